-- Concurrency renewal: keeps an enforcer's slots in a tenant's hash (see
-- concurrency.lua) counting for another expiry while its requests run. It
-- never brings back slots that were dropped: those requests hold nothing
-- in Redis any more (and their give-backs are ignored).
--
-- KEYS[1]   the tenant's hash of slots
-- ARGV[1]   e, the enforcer renewing
-- ARGV[2]   the expiry in ms
-- Reply     the generation of e's fields there (µs they were made at), 0
--           when e has none: its slots taken before it count no more

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local ttl = tonumber(ARGV[2])
local gen = tonumber(redis.call('HGET', KEYS[1], 'g|' .. ARGV[1]))
if not gen then
  return 0
end
redis.call('HSET', KEYS[1], 'x|' .. ARGV[1], now + ttl * 1000)
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
return gen
