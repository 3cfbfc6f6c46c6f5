-- Adaptive limits: adds one enforcer's measurements to the interval Redis'
-- clock is in, and, the first time any enforcer calls in an interval, steps
-- the shared factor once from the measurements of every enforcer in the
-- interval before. Both keys share one hash tag ({namespace/policy/rule}).
--
-- KEYS[1]   hash of measurements, fields "<interval>:<name>": n (responses),
--           e (5xx), s (slower than the latency target), w (slower than
--           the healthy margin of it), h<k> (latency histogram bucket k)
-- KEYS[2]   hash of the factor: f (basis points), i (interval it was last
--           stepped for), then that interval's n, e and p (p90 bucket), d
--           (the step taken) and l (the interval length i counts in)
-- ARGV[1]   interval in ms
-- ARGV[2]   minimum factor, basis points (100 .. 10000)
-- ARGV[3]   error rate target, basis points (0: none)
-- ARGV[4]   1 when there is a latency target, else 0
-- ARGV[5]   responses measured since the last call; ARGV[6] of them 5xx,
--           ARGV[7] slower than the target, ARGV[8] slower than 80% of it
-- ARGV[9..] the histogram of those responses' latencies, one count per bucket
-- Reply     {factor, interval, n, e, p90 bucket (-1: none), step (-1, 0, 1;
--           2 when this call held the factor: too few responses, or within
--           the margin), interval now}
--           step and the counts describe the last decided interval.

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local interval = tonumber(ARGV[1])
local minimum = tonumber(ARGV[2])
local err_target = tonumber(ARGV[3])
local lat_target = tonumber(ARGV[4]) == 1
local cur = math.floor(now_ms / interval)
local prev = cur - 1
local min_samples = 10

-- this call's measurements, into the current interval
local n = tonumber(ARGV[5])
if n > 0 then
  local p = cur .. ':'
  redis.call('HINCRBY', KEYS[1], p .. 'n', n)
  local names = {'e', 's', 'w'}
  for k = 1, 3 do
    local v = tonumber(ARGV[5 + k])
    if v > 0 then redis.call('HINCRBY', KEYS[1], p .. names[k], v) end
  end
  for k = 9, #ARGV do
    local v = tonumber(ARGV[k])
    if v > 0 then redis.call('HINCRBY', KEYS[1], p .. 'h' .. (k - 9), v) end
  end
end
redis.call('PEXPIRE', KEYS[1], interval * 4)

local state = redis.call('HMGET', KEYS[2], 'f', 'i', 'n', 'e', 'p', 'd', 'l')
local factor = tonumber(state[1]) or 10000
local decided = tonumber(state[2]) or -1
local step = tonumber(state[6]) or 0
if tonumber(state[7]) ~= interval or decided > prev then
  -- a new interval length numbers intervals anew, and a Redis whose clock
  -- is behind the one that decided (a failover) has not reached it: the
  -- factor stays, and the interval before this one is decided anew
  decided = -1
end
if decided < prev then
  local p = prev .. ':'
  local got = redis.call('HMGET', KEYS[1], p .. 'n', p .. 'e', p .. 's', p .. 'w')
  local tn, te = tonumber(got[1]) or 0, tonumber(got[2]) or 0
  local ts, tw = tonumber(got[3]) or 0, tonumber(got[4]) or 0
  local p90 = -1
  if tn > 0 then
    local need, seen, k = math.ceil(tn * 0.9), 0, 0
    while true do
      local v = redis.call('HGET', KEYS[1], p .. 'h' .. k)
      if not v and k > 64 then break end
      seen = seen + (tonumber(v) or 0)
      if seen >= need then p90 = k break end
      k = k + 1
    end
  end
  step = 2
  if tn >= min_samples then
    local over = (lat_target and ts * 10 > tn) or (err_target > 0 and te * 10000 > err_target * tn)
    local healthy = (not lat_target or tw * 10 <= tn) and (err_target == 0 or te * 12500 <= err_target * tn)
    if over then
      factor = math.floor(factor * 7 / 10)
      step = -1
    elseif healthy then
      factor = factor + 1000
      step = 1
    end
  end
  factor = math.max(minimum, math.min(10000, factor))
  redis.call('HSET', KEYS[2], 'f', factor, 'i', prev, 'n', tn, 'e', te, 'p', p90, 'd', step, 'l', interval)
  -- measurements of decided intervals (and of another interval length)
  -- are no longer needed
  local fields = redis.call('HKEYS', KEYS[1])
  for _, field in ipairs(fields) do
    local at = tonumber(string.match(field, '^(-?%d+):'))
    if at and at ~= cur then redis.call('HDEL', KEYS[1], field) end
  end
end
factor = math.max(minimum, math.min(10000, factor))
redis.call('PEXPIRE', KEYS[2], 86400000)
local s2 = redis.call('HMGET', KEYS[2], 'i', 'n', 'e', 'p')
return {factor, tonumber(s2[1]) or -1, tonumber(s2[2]) or 0, tonumber(s2[3]) or 0, tonumber(s2[4]) or -1, step, cur}
