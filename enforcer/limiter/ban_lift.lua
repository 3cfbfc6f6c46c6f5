-- Lifts a tenant's ban under a rule: forgets the ban, its level and the
-- refusals logged toward the next one.
--
-- KEYS[1]   the ban hash (ban.lua), KEYS[2] its refusal log
-- Reply     the end (µs) of the ban that was in force, 0 when none was
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local ends = tonumber(redis.call('HGET', KEYS[1], 'u') or '0')
redis.call('DEL', KEYS[1], KEYS[2])
if ends > now then
  return ends
end
return 0
