-- Ban: wraps the script of a rule's algorithm, whose text replaces the
-- marker line below, for a rule with a ban. The ban is checked first: a
-- banned tenant is answered at once and consumes nothing. Otherwise the
-- algorithm decides; a refusal is logged, and the rule's after.denials-th
-- refusal within after.within starts a ban, one level higher when the
-- previous ban ended within forgetAfter. The ban's keys share the bucket's
-- hash tag, so one call holds them all on Redis Cluster.
--
-- KEYS[1]   hash {u = ban end in µs, l = level, d = refusals that started it};
--           it expires forgetAfter after the ban ends, forgetting the level
-- KEYS[2]   list of the times (µs) of the latest refusals, newest first, at
--           most after.denials of them; it expires after.within after the last
-- KEYS[3..] the algorithm's KEYS
-- ARGV[1]   after.denials, ARGV[2] after.within in ms, ARGV[3] forgetAfter
--           in ms, ARGV[4] k, the number of durations, ARGV[5..4+k] the
--           durations in ms; then the algorithm's ARGV (cost first, >= 0)
-- Reply     banned: {2, now_µs, ban end µs, level, refusals that started it};
--           otherwise the algorithm's reply followed by: ban end µs (0 when
--           this call started no ban), level, refusals that started it.

local ban_key, log_key = KEYS[1], KEYS[2]
local after = tonumber(ARGV[1])
local within = tonumber(ARGV[2]) * 1000
local forget = tonumber(ARGV[3]) * 1000
local k = tonumber(ARGV[4])
local keys, argv = {}, {}
for i = 3, #KEYS do
  keys[#keys + 1] = KEYS[i]
end
for i = 5 + k, #ARGV do
  argv[#argv + 1] = ARGV[i]
end

local clock = redis.call('TIME')
local ban_now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local ban = redis.call('HMGET', ban_key, 'u', 'l', 'd')
if ban[1] and tonumber(ban[1]) > ban_now then
  return {2, ban_now, tonumber(ban[1]), tonumber(ban[2]), tonumber(ban[3])}
end

local function algorithm(KEYS, ARGV)
--ALGORITHM--
end

local reply = algorithm(keys, argv)
if reply.err then
  -- a stale calendar window: nothing was decided
  return reply
end
if reply[1] ~= 0 or tonumber(argv[1]) <= 0 then
  -- admitted, or a read: nothing to log
  reply[#reply + 1] = 0
  reply[#reply + 1] = 0
  reply[#reply + 1] = 0
  return reply
end

local now = reply[2]
redis.call('LPUSH', log_key, string.format('%d', now))
redis.call('LTRIM', log_key, 0, after - 1)
redis.call('PEXPIRE', log_key, math.max(1, math.ceil(within / 1000)))
local oldest = redis.call('LINDEX', log_key, after - 1)
if not oldest or tonumber(oldest) <= now - within then
  reply[#reply + 1] = 0
  reply[#reply + 1] = 0
  reply[#reply + 1] = 0
  return reply
end

-- after.denials refusals within after.within: a ban
local level = 1
if ban[1] and now - tonumber(ban[1]) <= forget then
  level = tonumber(ban[2]) + 1
end
local duration = tonumber(ARGV[4 + math.min(level, k)]) * 1000
local ends = now + duration
redis.call('HSET', ban_key, 'u', string.format('%d', ends), 'l', level, 'd', after)
redis.call('PEXPIRE', ban_key, math.max(1, math.ceil((duration + forget) / 1000)))
redis.call('DEL', log_key)
reply[#reply + 1] = ends
reply[#reply + 1] = level
reply[#reply + 1] = after
return reply
