-- GCRA, the generic cell rate algorithm: one timestamp per window, its
-- theoretical arrival time (TAT), the time at which the window is whole
-- again. Each unit of cost moves the TAT one emission interval (period /
-- requests) later; a request of cost n is admitted while the TAT it leaves
-- stays within the tolerance (capacity emission intervals) of now, so the
-- capacity (burst) can be spent at once and comes back one unit per
-- interval. Every window is checked before any is moved, so a refusal
-- consumes nothing. All arithmetic is on whole microseconds: exact.
--
-- KEYS[i]   string: the TAT of window i in µs, expiring when it is reached
-- ARGV[1]   cost: units this request takes (0 reads without taking); -n
--           refunds the n units an admitted decision took, up to whole
-- ARGV[2+2(i-1)] emission interval in µs (period / requests, rounded up),
--           ARGV[3+2(i-1)] tolerance in µs (capacity * interval) of window i
-- ARGV[2+2n] want (n windows): the most units to take when cost fits, at
--           least cost; more than cost is a lease, taken from every window
--           at once, as many as fit all of them now up to want (a
--           lease at most a quarter of that)
-- ARGV[3+2n] delay (rules with onLimit.delay only): the longest wait in µs
--           a request may book. A request that does not fit now but fits
--           every window within delay moves the TATs now, up to delay past
--           the tolerance, and waits until its units are due: its future
--           units are taken, nobody else gets them.
-- ARGV[#ARGV] 'peek' (a last argument no decision passes): decide cost as
--           ever, reply as ever, but take nothing, so that /debug/tenant
--           can show whether cost fits and its retry_µs
-- Reply     {allowed (0|1), now_µs, then per window i: remaining, reset_µs,
--           retry_µs, then taken, then with a delay ARGV wait_µs}
--           remaining: whole units that fit now, below zero how many the
--           TAT is past the tolerance (a debt); reset_µs: the TAT, when the
--           window is whole again; retry_µs: exact wait until cost fits (0 if
--           it does); taken: the units taken from each window (0 when
--           refused). wait_µs: how long an admitted request waits for
--           its booked units (0 when they fit now); retry_µs stays the
--           wait until cost fits now. A refund replies the number of windows it gave back to.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local cost = tonumber(ARGV[1])
-- a peek decides cost and its waits exactly, and takes nothing
local peek = ARGV[#ARGV] == 'peek'

-- stores a TAT, living until it is reached: from then on no state is whole state
local function store(key, tat)
  redis.call('SET', key, string.format('%d', tat), 'PX', math.max(1, math.ceil((tat - now) / 1000)))
end

if cost < 0 then
  local refunded = 0
  for i = 1, #KEYS do
    local tat = redis.call('GET', KEYS[i])
    if tat then
      local back = tonumber(tat) + cost * tonumber(ARGV[2 + 2 * (i - 1)])
      if back > now then
        store(KEYS[i], back)
      else
        redis.call('DEL', KEYS[i])
      end
      refunded = refunded + 1
    end
  end
  return refunded
end

local want = math.max(cost, tonumber(ARGV[2 + 2 * #KEYS]) or cost)
local delay = tonumber(ARGV[3 + 2 * #KEYS])
local wait = 0
local tats, intervals, tolerances = {}, {}, {}
local allowed = 1
local take, left = 0, math.huge
for i = 1, #KEYS do
  local a = 2 + 2 * (i - 1)
  intervals[i] = tonumber(ARGV[a])
  tolerances[i] = tonumber(ARGV[a + 1])
  local tat = now
  local stored = redis.call('GET', KEYS[i])
  if stored then
    tat = math.max(now, tonumber(stored))
  end
  tats[i] = tat
  if tat + cost * intervals[i] - now > tolerances[i] then
    allowed = 0
  end
  left = math.min(left, math.floor((tolerances[i] - (tat - now)) / intervals[i]))
end
if allowed == 0 and delay and cost > 0 then
  -- the longest of the windows' waits: all of them book, or none
  for i = 1, #KEYS do
    wait = math.max(wait, tats[i] + cost * intervals[i] - tolerances[i] - now)
  end
  if wait <= delay then
    allowed, take = 1, cost
  else
    wait = 0
  end
end
if allowed == 1 and wait == 0 then
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
  local tat, interval, tolerance = tats[i], intervals[i], tolerances[i]
  local retry = 0
  if allowed == 1 then
    if take > 0 then
      tat = tat + take * interval
      store(KEYS[i], tat)
    end
  elseif tat + cost * interval - now > tolerance then
    retry = tat + cost * interval - tolerance - now
  end
  -- a lowered limit can leave the TAT beyond the tolerance
  reply[#reply + 1] = math.floor((tolerance - (tat - now)) / interval)
  reply[#reply + 1] = tat
  reply[#reply + 1] = retry
end
reply[#reply + 1] = take
if delay then
  reply[#reply + 1] = wait
end
return reply
