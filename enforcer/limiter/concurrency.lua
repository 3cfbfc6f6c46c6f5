-- Concurrency: the requests a tenant has in flight, across every enforcer.
-- One hash per tenant holds, for each enforcer holding slots in it, how many
-- it holds, when it first took them (the generation) and until when they
-- count (its expiry, renewed while its requests run by
-- concurrency_renew.lua). A take first drops the slots of enforcers whose
-- expiry passed: an enforcer that died frees its slots within the expiry.
--
-- KEYS[1]   hash {c|<e> = slots enforcer e holds (0 once it gave them all
--           back), g|<e> = µs its fields were made at, x|<e> = µs its slots
--           count until}; the fields of e go when its expiry passes
-- ARGV[1]   cost: slots to take (0 reads without taking); -n gives back n
--           slots taken at ARGV[5]
-- ARGV[2]   concurrent: the most slots the tenant may hold at once
-- ARGV[3]   expiry in ms of the slots taken
-- ARGV[4]   e, the enforcer taking or giving back
-- ARGV[5]   for a give-back, the µs the slots were taken at (Redis' clock):
--           slots taken before e's generation were dropped already (expired,
--           or lost with Redis' data) and are not given back again
-- ARGV[#ARGV] 'peek' (a last argument no decision passes): decide cost as
--           ever, reply as ever, but take nothing
-- Reply     {allowed (0|1), now_µs, remaining, reset_µs, retry_µs}; a
--           refusal's wait is not known here (the proxy estimates it from
--           the rule's response times): retry_µs is 1 s.
--           A give-back replies 1 when it gave back, 0 when not.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local key = KEYS[1]
local cost = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3]) * 1000
local me = ARGV[4]
local count, gen, expiry = 'c|' .. me, 'g|' .. me, 'x|' .. me

if cost < 0 then
  local taken = tonumber(ARGV[5]) or now
  local first = tonumber(redis.call('HGET', key, gen))
  if not first or first > taken then
    return 0
  end
  if redis.call('HINCRBY', key, count, cost) < 0 then
    -- a give-back sent twice (its first reply lost)
    redis.call('HSET', key, count, 0)
  end
  return 1
end

local peek = ARGV[#ARGV] == 'peek'
local fields = redis.call('HGETALL', key)
local held, counts, dead = 0, {}, {}
for i = 1, #fields, 2 do
  local kind, who = string.sub(fields[i], 1, 1), string.sub(fields[i], 3)
  if kind == 'c' then
    counts[who] = tonumber(fields[i + 1])
  elseif kind == 'x' and tonumber(fields[i + 1]) <= now then
    dead[#dead + 1] = who
  end
end
for _, who in ipairs(dead) do
  counts[who] = nil
  redis.call('HDEL', key, 'c|' .. who, 'g|' .. who, 'x|' .. who)
end
for _, n in pairs(counts) do
  held = held + n
end

local allowed, retry, reset = 0, 1000000, now + 1000000
if held + cost <= limit then
  allowed, retry, reset = 1, 0, now
  if cost > 0 and not peek then
    redis.call('HINCRBY', key, count, cost)
    -- e's first slots here, or its first since its slots were dropped
    -- (expired, or lost with Redis' data); kept while e's fields live
    redis.call('HSETNX', key, gen, now)
    redis.call('HSET', key, expiry, now + ttl)
    -- the hash outlives every expiry in it
    redis.call('PEXPIRE', key, math.ceil(2 * ttl / 1000))
    held = held + cost
  end
end
return {allowed, now, math.max(0, limit - held), reset, retry}
