-- Token bucket: one bucket per window, refilled fractionally at
-- requests/period and capped at its capacity (burst). Every window is checked
-- before any is taken from, so a refusal consumes nothing.
--
-- KEYS[i]   hash {t = tokens, ts = time of t in µs} of window i
-- ARGV[1]   cost: tokens this request takes (0 reads without taking); -n
--           refunds the n tokens an admitted decision took, up to full
-- ARGV[2+3(i-1)] requests, ARGV[3+3(i-1)] period in ms, ARGV[4+3(i-1)] capacity of window i
-- ARGV[2+3n] want (n windows): the most tokens to take when cost fits, at
--           least cost; more than cost is a lease, taken from every window
--           at once, as many whole tokens as all of them hold up to want (a
--           lease at most a quarter of that)
-- ARGV[3+3n] delay (rules with onLimit.delay only): the longest wait in µs
--           a request may book. A request that does not fit now but whose
--           cost every window refills within delay is admitted now into
--           debt (the tokens go below zero) and waits until the debt is
--           repaid: its future tokens are taken, nobody else gets them.
-- ARGV[#ARGV] 'peek' (a last argument no decision passes): decide cost as
--           ever, reply as ever, but take nothing, so that /debug/tenant
--           can show whether cost fits and its retry_µs
-- Reply     {allowed (0|1), now_µs, then per window i: remaining, reset_µs,
--           retry_µs, then taken, then with a delay ARGV wait_µs}
--           remaining: whole tokens left; reset_µs: when the bucket is full
--           again; retry_µs: wait until it holds cost tokens (0 if it does);
--           taken: the tokens taken from each window (0 when refused).
--           wait_µs: how long an admitted request waits for its booked
--           tokens (0 when they were there); retry_µs stays the wait
--           until cost fits now, so a refused request's retry is beyond
--           delay.
--           A refund replies the number of windows it gave back to.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local cost = tonumber(ARGV[1])
-- a peek decides cost and its waits exactly, and takes nothing
local peek = ARGV[#ARGV] == 'peek'
local eps = 1e-9 -- absorbs float rounding of refills; far below one token

if cost < 0 then
  local refunded = 0
  for i = 1, #KEYS do
    local tokens = redis.call('HGET', KEYS[i], 't')
    if tokens then
      local back = math.min(tonumber(ARGV[4 + 3 * (i - 1)]), tonumber(tokens) - cost)
      redis.call('HSET', KEYS[i], 't', string.format('%.17g', back))
      refunded = refunded + 1
    end
  end
  return refunded
end

local want = math.max(cost, tonumber(ARGV[2 + 3 * #KEYS]) or cost)
local delay = tonumber(ARGV[3 + 3 * #KEYS])
local wait = 0
local tokens, requests, periods, caps = {}, {}, {}, {}
local allowed = 1
local take, left = 0, math.huge
for i = 1, #KEYS do
  local a = 2 + 3 * (i - 1)
  requests[i] = tonumber(ARGV[a])
  periods[i] = tonumber(ARGV[a + 1]) * 1000
  caps[i] = tonumber(ARGV[a + 2])
  local tok = caps[i]
  local state = redis.call('HMGET', KEYS[i], 't', 'ts')
  if state[1] then
    local elapsed = math.max(0, now - tonumber(state[2]))
    -- multiply before dividing: exact for whole token counts
    tok = math.min(caps[i], tonumber(state[1]) + elapsed * requests[i] / periods[i])
  end
  tokens[i] = tok
  if tok + eps < cost then
    allowed = 0
  end
  left = math.min(left, math.floor(tok + eps))
end
if allowed == 0 and delay and cost > 0 then
  -- the longest of the windows' waits: all of them book, or none
  for i = 1, #KEYS do
    if tokens[i] + eps < cost then
      wait = math.max(wait, math.ceil((cost - tokens[i]) * periods[i] / requests[i]))
    end
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
  local tok = tokens[i]
  local retry = 0
  if allowed == 1 then
    if take > 0 then
      tok = tok - take
      redis.call('HSET', KEYS[i], 't', string.format('%.17g', tok), 'ts', string.format('%d', now))
      -- once full again the bucket equals a fresh one: let it expire then
      local full_ms = math.ceil((caps[i] - tok) * periods[i] / requests[i] / 1000)
      redis.call('PEXPIRE', KEYS[i], math.max(1, full_ms))
    end
  elseif tok + eps < cost then
    retry = math.ceil((cost - tok) * periods[i] / requests[i])
  end
  local reset = now + math.ceil(math.max(0, caps[i] - tok - eps) * periods[i] / requests[i])
  reply[#reply + 1] = math.floor(tok + eps)
  reply[#reply + 1] = reset
  reply[#reply + 1] = retry
end
reply[#reply + 1] = take
if delay then
  reply[#reply + 1] = wait
end
return reply
