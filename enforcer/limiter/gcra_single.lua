-- GCRA, for a rule of one window without a delay: what gcra.lua decides
-- for such a rule, less the loops, the delay, the peek and the refund,
-- which that script still serves. The key it writes is gcra.lua's, so
-- either reads the other's.
--
-- KEYS[1]   string: the TAT in µs, expiring when it is reached
-- ARGV[1]   cost: units this request takes (0 reads without taking)
-- ARGV[2]   emission interval in µs, ARGV[3] tolerance in µs
-- ARGV[4]   want: the most units to take when cost fits, at least cost;
--           more than cost is a lease, at most a quarter of what fits
-- Reply     {allowed (0|1), now_µs, remaining, reset_µs, retry_µs, taken},
--           as gcra.lua's for one window

local time = redis.call('TIME')
local now = time[1] * 1000000 + time[2]
local cost, interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = math.max(now, tonumber(stored))
end
if tat + cost * interval - now > tolerance then
  return {0, now, math.floor((tolerance - (tat - now)) / interval), tat,
    tat + cost * interval - tolerance - now, 0}
end
local left = math.floor((tolerance - (tat - now)) / interval)
local take = math.min(math.max(cost, tonumber(ARGV[4]) or cost), left)
if take > cost then
  take = math.min(take, math.max(cost, math.floor(left / 4)))
end
if take > 0 then
  tat = tat + take * interval
  -- it lives until it is reached: from then on no state is whole state
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.max(1, math.ceil((tat - now) / 1000)))
end
return {1, now, math.floor((tolerance - (tat - now)) / interval), tat, 0, take}
