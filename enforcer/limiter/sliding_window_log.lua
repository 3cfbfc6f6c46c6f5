-- Sliding window log: a sorted set of request times per window; a request
-- fits when the requests of the last period plus its cost stay within the
-- limit. Exact, with memory proportional to the limit. Every window is
-- checked before any is recorded, so a refusal consumes nothing.
--
-- KEYS[i]   sorted set of window i: score = request time in µs, member
--           "<µs>-<n>", unique even for requests within one microsecond
-- ARGV[1]   cost: entries this request records (0 reads without recording);
--           -n refunds the n newest entries: the decision's own, or ones
--           indistinguishable from them
-- ARGV[2+2(i-1)] requests, ARGV[3+2(i-1)] period in ms of window i
-- ARGV[#ARGV] 'peek' (a last argument no decision passes): decide cost as
--           ever, reply as ever, but take nothing, so that /debug/tenant
--           can show whether cost fits and its retry_µs
-- Reply     {allowed (0|1), now_µs, then per window i: remaining, reset_µs, retry_µs}
--           reset_µs: when the newest entry leaves the window; retry_µs: exact
--           wait until enough old entries leave for cost to fit (0 if it does).
--           A refund replies the number of windows it gave back to.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local cost = tonumber(ARGV[1])
-- a peek decides cost and its waits exactly, and takes nothing
local peek = ARGV[#ARGV] == 'peek'

if cost < 0 then
  local refunded = 0
  for i = 1, #KEYS do
    if #redis.call('ZPOPMAX', KEYS[i], -cost) > 0 then
      refunded = refunded + 1
    end
  end
  return refunded
end
-- Lua prints numbers with 14 digits; microsecond times need 16
local stamp = string.format('%d', now)

local requests, periods, counts = {}, {}, {}
local allowed = 1
for i = 1, #KEYS do
  local a = 2 + 2 * (i - 1)
  requests[i] = tonumber(ARGV[a])
  periods[i] = tonumber(ARGV[a + 1]) * 1000
  -- the window is (now - period, now]: an entry leaves at its time + period
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', string.format('%d', now - periods[i]))
  counts[i] = redis.call('ZCARD', KEYS[i])
  if counts[i] + cost > requests[i] then
    allowed = 0
  end
end

local reply = {allowed, now}
for i = 1, #KEYS do
  local count, period = counts[i], periods[i]
  local retry = 0
  local reset = now
  if allowed == 1 and cost > 0 and not peek then
    -- Members must be unique. After a refund the count no longer names a
    -- free suffix within this microsecond, so ZADD NX refuses a taken name
    -- and the loop tries the next: every admitted unit is recorded.
    local added, seq = 0, count
    while added < cost do
      local args, n = {}, 0
      for _ = 1, math.min(cost - added, 256) do
        seq = seq + 1
        args[n + 1] = stamp
        args[n + 2] = stamp .. '-' .. seq
        n = n + 2
      end
      added = added + redis.call('ZADD', KEYS[i], 'NX', unpack(args, 1, n))
    end
    count = count + cost
    redis.call('PEXPIRE', KEYS[i], math.ceil(period / 1000))
    reset = now + period
  elseif count > 0 then
    if allowed == 0 and count + cost > requests[i] then
      -- the (count + cost - requests)-th oldest entry must leave first
      local k = count + cost - requests[i]
      local entry = redis.call('ZRANGE', KEYS[i], k - 1, k - 1, 'WITHSCORES')
      retry = math.max(0, tonumber(entry[2]) + period - now)
    end
    local newest = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
    reset = tonumber(newest[2]) + period
  end
  reply[#reply + 1] = math.max(0, requests[i] - count)
  reply[#reply + 1] = reset
  reply[#reply + 1] = retry
end
return reply
