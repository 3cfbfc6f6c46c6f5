-- Sliding window log, for a rule of one window: what
-- sliding_window_log.lua decides for such a rule, less the loops, the
-- peek and the refund, which that script still serves. The key it writes
-- is that script's, so either reads the other's.
--
-- KEYS[1]   sorted set: score = request time in µs, member "<µs>-<n>"
-- ARGV[1]   cost: entries this request records (0 reads without recording)
-- ARGV[2]   requests, ARGV[3] period in ms
-- Reply     when it records the request, "1 now_µs count", count the
--           entries before it: the enforcer computes remaining, reset and
--           retry from them as sliding_window_log.lua does; one string costs
--           Redis less than a table of those numbers. Else {allowed (0|1),
--           now_µs, remaining, reset_µs, retry_µs}, as
--           sliding_window_log.lua's for one window.

local time = redis.call('TIME')
local now = time[1] * 1000000 + time[2]
local cost, requests, period = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] * 1000
-- Lua prints numbers with 14 digits; microsecond times need 16
local stamp = string.format('%d', now)
-- the window is (now - period, now]: an entry leaves at its time + period.
-- A number argument reaches Redis exact (as %.17g, or its shortest form)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
local count = redis.call('ZCARD', KEYS[1])
if count + cost <= requests and cost > 0 then
  -- Members must be unique: after a refund the count no longer names a
  -- free suffix within this microsecond, and ZADD NX refuses a taken name
  local added, seq = 0, count
  if cost == 1 then
    seq = seq + 1
    added = redis.call('ZADD', KEYS[1], 'NX', stamp, stamp .. '-' .. seq)
  end
  while added < cost do
    local args, n = {}, 0
    for _ = 1, math.min(cost - added, 256) do
      seq = seq + 1
      args[n + 1] = stamp
      args[n + 2] = stamp .. '-' .. seq
      n = n + 2
    end
    added = added + redis.call('ZADD', KEYS[1], 'NX', unpack(args, 1, n))
  end
  redis.call('PEXPIRE', KEYS[1], math.ceil(period / 1000))
  return string.format('1 %s %d', stamp, count)
end
local allowed, retry, reset = 1, 0, now
if count > 0 then
  if count + cost > requests then
    allowed = 0
    -- the (count + cost - requests)-th oldest entry must leave first
    local k = count + cost - requests
    local entry = redis.call('ZRANGE', KEYS[1], k - 1, k - 1, 'WITHSCORES')
    retry = math.max(0, tonumber(entry[2]) + period - now)
  end
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  reset = tonumber(newest[2]) + period
elseif cost > requests then
  allowed = 0
end
return {allowed, now, math.max(0, requests - count), reset, retry}
