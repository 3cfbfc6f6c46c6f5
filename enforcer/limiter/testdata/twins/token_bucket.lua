-- The least a single-window token bucket decision does: read TIME and the
-- bucket, refill, take one token, write it back with its expiry.
-- KEYS[1] hash {t, ts}; ARGV: requests, period in ms, capacity.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local requests, period, cap = tonumber(ARGV[1]), tonumber(ARGV[2]) * 1000, tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 't', 'ts')
local tok = cap
if s[1] then
  tok = math.min(cap, tonumber(s[1]) + (now - tonumber(s[2])) * requests / period)
end
if tok < 1 then
  return 0
end
tok = tok - 1
redis.call('HSET', KEYS[1], 't', tok, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((cap - tok) * period / requests / 1000)))
return 1
