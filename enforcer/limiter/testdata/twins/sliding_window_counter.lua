-- The least a single-window sliding window counter decision does: read TIME
-- and the two counts, weigh the previous one, count one, write back.
-- KEYS[1] hash {w, c, p}; ARGV: requests, period in ms.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local requests, period = tonumber(ARGV[1]), tonumber(ARGV[2]) * 1000
local win = math.floor(now / period)
local s = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local c, p = 0, 0
if s[1] then
  local w = tonumber(s[1])
  if w == win then
    c, p = tonumber(s[2]), tonumber(s[3] or 0)
  elseif w == win - 1 then
    p = tonumber(s[2])
  end
end
local weight = 1 - (now - win * period) / period
if p * weight + c + 1 > requests then
  return 0
end
redis.call('HSET', KEYS[1], 'w', win, 'c', c + 1, 'p', p)
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(((win + 2) * period - now) / 1000)))
return 1
