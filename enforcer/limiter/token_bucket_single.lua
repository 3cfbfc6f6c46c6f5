-- Token bucket, for a rule of one window without a delay: what
-- token_bucket.lua decides for such a rule, less the loops, the delay, the
-- peek and the refund, which that script still serves. The key it writes
-- is that script's, so either reads the other's.
--
-- KEYS[1]   hash {t = tokens, ts = time of t in µs}
-- ARGV[1]   cost: tokens this request takes (0 reads without taking)
-- ARGV[2]   requests, ARGV[3] period in ms, ARGV[4] capacity
-- ARGV[5]   want: the most tokens to take when cost fits, at least cost;
--           more than cost is a lease, at most a quarter of what is held
-- Reply     {allowed (0|1), now_µs, remaining, reset_µs, retry_µs, taken},
--           as token_bucket.lua's for one window

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
  return {0, now, math.floor(tok + eps), now + math.ceil(math.max(0, cap - tok - eps) * period / requests),
    math.ceil((cost - tok) * period / requests), 0}
end
local left = math.floor(tok + eps)
local take = math.min(math.max(cost, tonumber(ARGV[5]) or cost), left)
if take > cost then
  take = math.min(take, math.max(cost, math.floor(left / 4)))
end
if take > 0 then
  tok = tok - take
  redis.call('HSET', KEYS[1], 't', string.format('%.17g', tok), 'ts', string.format('%d', now))
  -- once full again the bucket equals a fresh one: let it expire then
  redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((cap - tok) * period / requests / 1000)))
end
return {1, now, math.floor(tok + eps), now + math.ceil(math.max(0, cap - tok - eps) * period / requests), 0, take}
