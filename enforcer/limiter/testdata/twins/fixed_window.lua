-- The least a single-window fixed window decision does: read TIME and the
-- window's count, count one, write it back with the window's expiry.
-- KEYS[1] hash {w, c}; ARGV: requests, period in ms.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local requests, period = tonumber(ARGV[1]), tonumber(ARGV[2]) * 1000
local win = math.floor(now / period)
local s = redis.call('HMGET', KEYS[1], 'w', 'c')
local c = 0
if s[1] and tonumber(s[1]) == win then
  c = tonumber(s[2])
end
if c + 1 > requests then
  return 0
end
redis.call('HSET', KEYS[1], 'w', win, 'c', c + 1)
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(((win + 1) * period - now) / 1000)))
return 1
