-- The least a single-window sliding log decision does: read TIME, drop
-- the entries that left the window, count the rest, record one.
-- KEYS[1] sorted set of request times in µs; ARGV: requests, period in ms.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local requests, period = tonumber(ARGV[1]), tonumber(ARGV[2]) * 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
if redis.call('ZCARD', KEYS[1]) + 1 > requests then
  return 0
end
redis.call('ZADD', KEYS[1], now, now)
redis.call('PEXPIRE', KEYS[1], math.ceil(period / 1000))
return 1
