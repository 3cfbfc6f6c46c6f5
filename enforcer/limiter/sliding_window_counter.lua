-- Sliding window counter: approximates a sliding window from two fixed
-- windows (aligned to multiples of the period since the Unix epoch). The
-- previous window's count is weighted by how much of it the sliding window
-- still covers: estimate = previous * (1 - elapsed/period) + current.
-- Every window is checked before any is counted.
--
-- KEYS[i]   hash {w = current window number, c = its count, p = previous window's count}
-- ARGV[1]   cost: requests this one counts as (0 reads without counting); -n
--           refunds the n an admitted decision counted, while its window lasts
-- ARGV[2+2(i-1)] requests, ARGV[3+2(i-1)] period in ms of window i
-- ARGV[#ARGV] 'peek' (a last argument no decision passes): decide cost as
--           ever, reply as ever, but take nothing, so that /debug/tenant
--           can show whether cost fits and its retry_µs
-- Reply     {allowed (0|1), now_µs, then per window i: remaining, reset_µs, retry_µs}
--           remaining: floor(requests - estimate), below zero a debt; reset_µs: when the estimate
--           reaches 0; retry_µs: exact wait until estimate + cost fits (0 if it does).
--           A refund replies the number of windows it gave back to.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local cost = tonumber(ARGV[1])
-- a peek decides cost and its waits exactly, and takes nothing
local peek = ARGV[#ARGV] == 'peek'
local eps = 1e-9

if cost < 0 then
  local refunded = 0
  for i = 1, #KEYS do
    local state = redis.call('HMGET', KEYS[i], 'w', 'c')
    if state[1] and tonumber(state[1]) == math.floor(now / (tonumber(ARGV[3 + 2 * (i - 1)]) * 1000)) then
      redis.call('HSET', KEYS[i], 'c', math.max(0, tonumber(state[2]) + cost))
      refunded = refunded + 1
    end
  end
  return refunded
end

local requests, periods, wins, curs, prevs, estimates, current = {}, {}, {}, {}, {}, {}, {}
local allowed = 1
for i = 1, #KEYS do
  local a = 2 + 2 * (i - 1)
  requests[i] = tonumber(ARGV[a])
  local period = tonumber(ARGV[a + 1]) * 1000
  periods[i] = period
  local win = math.floor(now / period)
  wins[i] = win
  local cur, prev = 0, 0
  local state = redis.call('HMGET', KEYS[i], 'w', 'c', 'p')
  if state[1] then
    local w = tonumber(state[1])
    if w == win then
      current[i] = true
      cur, prev = tonumber(state[2]), tonumber(state[3])
    elseif w == win - 1 then
      prev = tonumber(state[2])
    end
  end
  curs[i], prevs[i] = cur, prev
  estimates[i] = prev * (period - (now - win * period)) / period + cur
  if estimates[i] + cost > requests[i] + eps then
    allowed = 0
  end
end

local reply = {allowed, now}
for i = 1, #KEYS do
  local period, win, cur, prev = periods[i], wins[i], curs[i], prevs[i]
  local start = win * period
  local estimate = estimates[i]
  local retry = 0
  if allowed == 1 then
    if cost > 0 and not peek then
      cur = cur + cost
      estimate = estimate + cost
      if current[i] then
        -- same window: its number, the previous count and the expiry are set
        redis.call('HINCRBY', KEYS[i], 'c', cost)
      else
        redis.call('HSET', KEYS[i], 'w', win, 'c', cur, 'p', prev)
        -- the current count still weighs until the end of the next window
        redis.call('PEXPIRE', KEYS[i], math.max(1, math.ceil((start + 2 * period - now) / 1000)))
      end
    end
  elseif estimate + cost > requests[i] + eps then
    local free = requests[i] - cost
    local at
    if cur <= free then
      -- this window: wait until prev's weight w satisfies prev*w <= free - cur
      at = start + math.ceil(period * (1 - (free - cur) / prev))
    else
      -- next window, where the current count becomes the weighted one
      at = start + period + math.ceil(period * math.max(0, 1 - free / cur))
    end
    retry = math.max(0, at - now)
  end
  local reset = now
  if cur > 0 then
    reset = start + 2 * period
  elseif prev > 0 then
    reset = start + period
  end
  reply[#reply + 1] = math.floor(requests[i] - estimate + eps)
  reply[#reply + 1] = reset
  reply[#reply + 1] = retry
end
return reply
