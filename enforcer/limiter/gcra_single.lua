-- GCRA, for a rule of one window without a delay: what gcra.lua decides
-- for such a rule, less the loops, the delay, the peek and the refund,
-- which that script still serves. The key it writes is gcra.lua's, so
-- either reads the other's.
--
-- KEYS[1]   string: the TAT in µs, expiring when it is reached
-- ARGV[1]   cost: units this request takes (0 reads without taking)
-- ARGV[2]   emission interval in µs, ARGV[3] tolerance in µs
-- ARGV[4]   want, only when it is more than cost: a lease, the most units
--           to take when cost fits, at most a quarter of what fits
-- Reply     "allowed now_µs tat taken", decimal integers (allowed 0|1, tat
--           the TAT after the decision): the enforcer computes remaining,
--           reset and retry from them as gcra.lua does (gcraAnswer). One
--           string costs Redis less than a table of those numbers.

local time = redis.call('TIME')
local now = time[1] * 1000000 + time[2]
local cost, interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = math.max(now, tonumber(stored))
end
if tat + cost * interval - now > tolerance then
  return string.format('0 %d %d 0', now, tat)
end
local take = cost
if ARGV[4] then
  local left = math.floor((tolerance - (tat - now)) / interval)
  take = math.min(math.max(cost, tonumber(ARGV[4])), left)
  if take > cost then
    take = math.min(take, math.max(cost, math.floor(left / 4)))
  end
end
if take > 0 then
  tat = tat + take * interval
  -- it lives until it is reached: from then on no state is whole state
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.max(1, math.ceil((tat - now) / 1000)))
end
return string.format('1 %d %d %d', now, tat, take)
