-- The least a single-window GCRA decision does: read TIME and the TAT,
-- move it on by one emission interval, write it back with its expiry.
-- KEYS[1] string TAT in µs; ARGV: emission interval, tolerance (µs).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = math.max(now, tonumber(redis.call('GET', KEYS[1]) or now))
local new = tat + interval
if new - now > tolerance + interval then
  return 0
end
redis.call('SET', KEYS[1], new, 'PX', math.max(1, math.ceil((new - now) / 1000)))
return 1
