-- Sliding window counter, for a rule of one window: what
-- sliding_window_counter.lua decides for such a rule, less the loops, the
-- peek and the refund, which that script still serves. The key it writes
-- is that script's, so either reads the other's.
--
-- KEYS[1]   hash {w = current window number, c = its count, p = previous window's count}
-- ARGV[1]   cost: requests this one counts as (0 reads without counting)
-- ARGV[2]   requests, ARGV[3] period in ms
-- Reply     {allowed (0|1), now_µs, remaining, reset_µs, retry_µs}, as
--           sliding_window_counter.lua's for one window

local time = redis.call('TIME')
local now = time[1] * 1000000 + time[2]
local cost, requests, period = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] * 1000
local eps = 1e-9
local win = math.floor(now / period)
local start = win * period
local cur, prev, current = 0, 0, false
local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
if state[1] then
  local w = tonumber(state[1])
  if w == win then
    current = true
    cur, prev = tonumber(state[2]), tonumber(state[3])
  elseif w == win - 1 then
    prev = tonumber(state[2])
  end
end
local estimate = prev * (period - (now - start)) / period + cur
local allowed, retry = 1, 0
if estimate + cost > requests + eps then
  allowed = 0
  local free = requests - cost
  local at
  if cur <= free then
    -- this window: wait until prev's weight w satisfies prev*w <= free - cur
    at = start + math.ceil(period * (1 - (free - cur) / prev))
  else
    -- next window, where the current count becomes the weighted one
    at = start + period + math.ceil(period * math.max(0, 1 - free / cur))
  end
  retry = math.max(0, at - now)
elseif cost > 0 then
  cur = cur + cost
  estimate = estimate + cost
  if current then
    redis.call('HINCRBY', KEYS[1], 'c', cost)
  else
    redis.call('HSET', KEYS[1], 'w', win, 'c', cur, 'p', prev)
    -- the current count still weighs until the end of the next window
    redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((start + 2 * period - now) / 1000)))
  end
end
local reset = now
if cur > 0 then
  reset = start + 2 * period
elseif prev > 0 then
  reset = start + period
end
return {allowed, now, math.floor(requests - estimate + eps), reset, retry}
