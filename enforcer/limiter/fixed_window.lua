-- Fixed window: counts requests in windows aligned to multiples of the
-- period since the Unix epoch (a 1h window resets on the hour, UTC). Every
-- window is checked before any is counted, so a refusal consumes nothing.
--
-- KEYS[i]   hash {w = window number, c = count} of window i
-- ARGV[1]   cost: requests this one counts as (0 reads without counting); -n
--           refunds the n an admitted decision counted, while its window lasts
--           (the window of ARGV[2+2n], the µs the n were counted at)
-- ARGV[2+2(i-1)] requests, ARGV[3+2(i-1)] period in ms of window i, or,
--           for a calendar window, 'start:end' in ms: the window the
--           enforcer believes current, numbered by its start
-- ARGV[2+2n] want (n windows): the most to count when cost fits, at least
--           cost; more than cost is a lease, counted in every window at
--           once, as much as all of them have left up to want (a
--           lease at most a quarter of that)
-- ARGV[#ARGV] 'peek' (a last argument no decision passes): decide cost as
--           ever, reply as ever, but take nothing, so that /debug/tenant
--           can show whether cost fits and its retry_µs
-- Reply     {allowed (0|1), now_µs, then per window i: remaining, reset_µs,
--           retry_µs, then taken}
--           remaining: requests - count, below zero when more is counted
--           than the limit (a debt); reset_µs: the window's end; retry_µs:
--           wait until cost fits (0 if it does); taken: what was counted in
--           each window (0 when refused).
--           A refund replies the number of windows it gave back to.
--           A decision whose calendar window does not hold now counts
--           nothing and answers the error 'STALE <now_µs>', for the enforcer
--           to compute the window again at that time.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local cost = tonumber(ARGV[1])
-- a peek decides cost and its waits exactly, and takes nothing
local peek = ARGV[#ARGV] == 'peek'

-- window(arg, at) is the window of a period or calendar argument holding
-- at: its number and end (µs). A calendar window ('start:end' in ms) is
-- numbered by its start, and is nil when at is outside it.
local function window(arg, at)
  local s, e = string.match(arg, '^(%d+):(%d+)$')
  if s then
    s, e = tonumber(s), tonumber(e)
    if at < s * 1000 or at >= e * 1000 then
      return nil, nil
    end
    return s, e * 1000
  end
  local period = tonumber(arg) * 1000
  local w = math.floor(at / period)
  return w, (w + 1) * period
end

if cost < 0 then
  -- only into the window the units were counted in: given back after it
  -- ended, they must not free room in the next one
  local counted = tonumber(ARGV[2 + 2 * #KEYS]) or now
  local refunded = 0
  for i = 1, #KEYS do
    local state = redis.call('HMGET', KEYS[i], 'w', 'c')
    local win = window(ARGV[3 + 2 * (i - 1)], counted)
    if state[1] and win and tonumber(state[1]) == win and window(ARGV[3 + 2 * (i - 1)], now) == win then
      redis.call('HSET', KEYS[i], 'c', math.max(0, tonumber(state[2]) + cost))
      refunded = refunded + 1
    end
  end
  return refunded
end

local want = math.max(cost, tonumber(ARGV[2 + 2 * #KEYS]) or cost)
local counts, current, requests, resets, wins = {}, {}, {}, {}, {}
for i = 1, #KEYS do
  wins[i], resets[i] = window(ARGV[3 + 2 * (i - 1)], now)
  if not wins[i] then
    return redis.error_reply(string.format('STALE %d', now))
  end
end
local allowed = 1
local take, left = 0, math.huge
for i = 1, #KEYS do
  local a = 2 + 2 * (i - 1)
  requests[i] = tonumber(ARGV[a])
  local count = 0
  local state = redis.call('HMGET', KEYS[i], 'w', 'c')
  current[i] = state[1] and tonumber(state[1]) == wins[i]
  if current[i] then
    count = tonumber(state[2])
  end
  counts[i] = count
  if count + cost > requests[i] then
    allowed = 0
  end
  left = math.min(left, requests[i] - count)
end
if allowed == 1 then
  -- what every window holds, up to want; a lease (more than cost) at most
  -- a quarter of it, so that the tenant's requests on other replicas find some
  take = math.min(want, left)
  if take > cost then
    take = math.min(take, math.max(cost, math.floor(left / 4)))
  end
  if peek then
    take = 0
  end
end

local reply = {allowed, now}
for i = 1, #KEYS do
  local count = counts[i]
  local reset = resets[i]
  local retry = 0
  if allowed == 1 then
    if take > 0 then
      count = count + take
      if current[i] then
        -- same window: its number and expiry are already set
        redis.call('HINCRBY', KEYS[i], 'c', take)
      else
        redis.call('HSET', KEYS[i], 'w', wins[i], 'c', count)
        redis.call('PEXPIRE', KEYS[i], math.max(1, math.ceil((reset - now) / 1000)))
      end
    end
  elseif count + cost > requests[i] then
    retry = reset - now
  end
  if count == 0 then
    reset = now
  end
  -- below zero when more is counted than the limit allows: a debt
  -- (charge.lua) or a lowered limit
  reply[#reply + 1] = requests[i] - count
  reply[#reply + 1] = reset
  reply[#reply + 1] = retry
end
reply[#reply + 1] = take
return reply
