-- Token bucket, for a rule of one window without a delay: what
-- token_bucket.lua decides for such a rule, less the loops, the delay, the
-- peek and the refund, which that script still serves. The key it writes
-- is that script's, so either reads the other's.
--
-- KEYS[1]   hash {t = tokens, ts = time of t in µs}
-- ARGV[1]   cost: tokens this request takes (0 reads without taking)
-- ARGV[2]   requests, ARGV[3] period in ms, ARGV[4] capacity
-- ARGV[5]   want, only when it is more than cost: a lease, the most tokens
--           to take when cost fits, at most a quarter of what is held
-- Reply     "allowed now_µs tokens taken" (allowed 0|1, tokens after the
--           decision as stored, %.17g): the enforcer computes remaining,
--           reset and retry from them as token_bucket.lua does
--           (tokenBucketAnswer). One string costs Redis less than a table
--           of those numbers.

local time = redis.call('TIME')
local now = time[1] * 1000000 + time[2]
local cost, requests, period, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] * 1000, tonumber(ARGV[4])
local eps = 1e-9 -- absorbs float rounding of refills; far below one token
local tok = cap
local state = redis.call('HMGET', KEYS[1], 't', 'ts')
if state[1] then
  -- multiply before dividing: exact for whole token counts
  tok = math.min(cap, tonumber(state[1]) + math.max(0, now - tonumber(state[2])) * requests / period)
end
if tok + eps < cost then
  return string.format('0 %d %.17g 0', now, tok)
end
local take = cost
if ARGV[5] then
  local left = math.floor(tok + eps)
  take = math.min(math.max(cost, tonumber(ARGV[5])), left)
  if take > cost then
    take = math.min(take, math.max(cost, math.floor(left / 4)))
  end
end
tok = tok - take
local t = string.format('%.17g', tok)
if take > 0 then
  redis.call('HSET', KEYS[1], 't', t, 'ts', string.format('%d', now))
  -- once full again the bucket equals a fresh one: let it expire then
  redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((cap - tok) * period / requests / 1000)))
end
return string.format('1 %d %s %d', now, t, take)
