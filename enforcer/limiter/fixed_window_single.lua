-- Fixed window, for a rule of one period window without a calendar: what
-- fixed_window.lua decides for such a rule, less the loops, the calendar
-- parsing, the peek and the refund, which that script still serves. The
-- keys it writes are fixed_window.lua's, so either reads the other's.
--
-- KEYS[1]   hash {w = window number, c = count}
-- ARGV[1]   cost: requests this one counts as (0 reads without counting)
-- ARGV[2]   requests, ARGV[3] period in ms
-- ARGV[4]   want: the most to count when cost fits, at least cost; more
--           than cost is a lease, at most a quarter of what is left
-- Reply     {allowed (0|1), now_µs, remaining, reset_µs, retry_µs, taken},
--           as fixed_window.lua's for one window

local time = redis.call('TIME')
local now = time[1] * 1000000 + time[2]
local cost, requests, period = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] * 1000
local win = math.floor(now / period)
local reset = (win + 1) * period
local state = redis.call('HMGET', KEYS[1], 'w', 'c')
local count = 0
local current = state[1] and tonumber(state[1]) == win
if current then
  count = tonumber(state[2])
end
if count + cost > requests then
  if count == 0 then
    return {0, now, requests, now, reset - now, 0}
  end
  return {0, now, requests - count, reset, reset - now, 0}
end
local left = requests - count
local take = math.min(math.max(cost, tonumber(ARGV[4]) or cost), left)
if take > cost then
  take = math.min(take, math.max(cost, math.floor(left / 4)))
end
if take > 0 then
  count = count + take
  if current then
    redis.call('HINCRBY', KEYS[1], 'c', take)
  else
    redis.call('HSET', KEYS[1], 'w', win, 'c', count)
    redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((reset - now) / 1000)))
  end
end
if count == 0 then
  reset = now
end
return {1, now, requests - count, reset, 0, take}
