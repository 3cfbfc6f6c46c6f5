-- Charge after the answer: charges (n > 0) or gives back (n < 0) units of
-- a decision that was admitted, when the application's answer says what
-- the request really cost, over all the windows of its rule at once. A
-- charge always lands: it may take a window below empty (debt), at most
-- one limit deep, which the tenant's next requests wait out. A give back
-- has a refund's caps: never below empty, never above full, and for the
-- counted algorithms only into the window the units were counted in.
--
-- KEYS[i]   the state of window i, as the algorithm's script keeps it
-- ARGV[1]   the algorithm's code: fw, swc, tb or gcra
-- ARGV[2]   n: units to charge (> 0) or give back (< 0); 0 reads the debt
--           and changes nothing
-- ARGV[3]   µs (Redis' clock) the decision's units were counted at
-- ARGV[4..] each window's arguments, as the algorithm's script takes them:
--           fw, swc: requests, period in ms; tb: requests, period in ms,
--           capacity; gcra: emission interval in µs, tolerance in µs
-- Reply     {now_µs, then per window i: debt}: how far the window is below
--           empty after the call (0 when it is not), the algorithm's
--           script's remaining below zero: for swc the weighted count of
--           the sliding window over the limit.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local algo = ARGV[1]
local n = tonumber(ARGV[2])
local counted = tonumber(ARGV[3])
local stride = (#ARGV - 3) / #KEYS
local reply = {now}

for i = 1, #KEYS do
  local a = 4 + stride * (i - 1)
  local debt = 0
  if algo == 'fw' or algo == 'swc' then
    local requests = tonumber(ARGV[a])
    local period = tonumber(ARGV[a + 1]) * 1000
    local win = math.floor(now / period)
    local state = redis.call('HMGET', KEYS[i], 'w', 'c', 'p')
    local w, c, p = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0
    if n < 0 then
      if w == win and math.floor(counted / period) == win then
        c = math.max(0, c + n)
        redis.call('HSET', KEYS[i], 'c', c)
      end
    elseif n > 0 then
      if w ~= win then
        -- a new window: the sliding counter carries the last one's count
        if algo == 'swc' then
          p = (w == win - 1) and c or 0
        end
        c = 0
      end
      c = math.max(c, math.min(c + n, 2 * requests))
      local expire = (win + 1) * period
      if algo == 'swc' then
        redis.call('HSET', KEYS[i], 'w', win, 'c', c, 'p', p)
        expire = (win + 2) * period
      else
        redis.call('HSET', KEYS[i], 'w', win, 'c', c)
      end
      redis.call('PEXPIRE', KEYS[i], math.max(1, math.ceil((expire - now) / 1000)))
      w = win
    end
    if w ~= win then
      -- an older window: the sliding counter weighs the last one's count
      p = (algo == 'swc' and w == win - 1) and c or 0
      c = 0
    end
    -- what the algorithm's script counts against the limit: its remaining
    -- below zero
    local over = c - requests
    if algo == 'swc' then
      over = p * (period - (now - win * period)) / period + c - requests
    end
    debt = math.max(0, math.ceil(over - 1e-9))
  elseif algo == 'tb' then
    local requests = tonumber(ARGV[a])
    local period = tonumber(ARGV[a + 1]) * 1000
    local cap = tonumber(ARGV[a + 2])
    local state = redis.call('HMGET', KEYS[i], 't', 'ts')
    local tok = cap
    if state[1] then
      local elapsed = math.max(0, now - tonumber(state[2]))
      tok = math.min(cap, tonumber(state[1]) + elapsed * requests / period)
    end
    if n < 0 then
      tok = math.min(cap, tok - n)
    elseif n > 0 then
      tok = math.min(tok, math.max(tok - n, -cap))
    end
    if n ~= 0 then
      redis.call('HSET', KEYS[i], 't', string.format('%.17g', tok), 'ts', string.format('%d', now))
      local full_ms = math.ceil((cap - tok) * period / requests / 1000)
      redis.call('PEXPIRE', KEYS[i], math.max(1, full_ms))
    end
    debt = math.max(0, -math.floor(tok + 1e-9))
  elseif algo == 'gcra' then
    local interval = tonumber(ARGV[a])
    local tolerance = tonumber(ARGV[a + 1])
    local tat = math.max(now, tonumber(redis.call('GET', KEYS[i]) or now))
    if n < 0 then
      tat = tat + n * interval
    elseif n > 0 then
      tat = math.max(tat, math.min(tat + n * interval, now + 2 * tolerance))
    end
    if n == 0 then
      -- a read changes nothing
    elseif tat > now then
      redis.call('SET', KEYS[i], string.format('%d', tat), 'PX', math.max(1, math.ceil((tat - now) / 1000)))
    else
      redis.call('DEL', KEYS[i])
    end
    debt = math.max(0, math.ceil((tat - now - tolerance) / interval))
  else
    return redis.error_reply('charge: unknown algorithm ' .. tostring(algo))
  end
  reply[#reply + 1] = debt
end
return reply
