-- Refund: gives back what an admitted decision took, when another rule
-- refused the same HTTP request (its rules live under other hash tags, so
-- they cannot share one script). Best effort by design: it runs right after
-- the decision, and never takes a bucket below empty or above full.
--
-- KEYS[i]   the window keys the decision used
-- ARGV[1]   algorithm code: tb, fw, swc or swl
-- ARGV[2]   cost the decision took
-- ARGV[3+2(i-1)] period in ms, ARGV[4+2(i-1)] capacity of window i
-- Reply     number of windows refunded

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local algorithm, cost = ARGV[1], tonumber(ARGV[2])
local refunded = 0
for i = 1, #KEYS do
  local period = tonumber(ARGV[3 + 2 * (i - 1)]) * 1000
  local capacity = tonumber(ARGV[4 + 2 * (i - 1)])
  if algorithm == 'tb' then
    local tokens = redis.call('HGET', KEYS[i], 't')
    if tokens then
      local back = math.min(capacity, tonumber(tokens) + cost)
      redis.call('HSET', KEYS[i], 't', string.format('%.17g', back))
      refunded = refunded + 1
    end
  elseif algorithm == 'fw' or algorithm == 'swc' then
    -- only while the decision's window is still the current one
    local state = redis.call('HMGET', KEYS[i], 'w', 'c')
    if state[1] and tonumber(state[1]) == math.floor(now / period) then
      redis.call('HSET', KEYS[i], 'c', math.max(0, tonumber(state[2]) - cost))
      refunded = refunded + 1
    end
  elseif algorithm == 'swl' then
    -- the newest entries: the decision's own, or ones indistinguishable from them
    if #redis.call('ZPOPMAX', KEYS[i], cost) > 0 then
      refunded = refunded + 1
    end
  end
end
return refunded
