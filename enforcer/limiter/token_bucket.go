package limiter

import (
	"math"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// TokenBucket refills Burst tokens at Requests per Period, fractionally; a
// request takes Cost tokens.
const TokenBucket = config.TokenBucket

var tokenBucket = algorithm{
	name:   TokenBucket,
	code:   "tb",
	script: newScript("token_bucket.lua"),
	single: newScript("token_bucket_single.lua"),
	args:   tokenBucketArgs,
	read:   (*localWindow).readTokenBucket,
	answer: (*localWindow).answerTokenBucket,
	leases: true,
}

// tokenBucketArgs is a window's ARGV: requests, period in ms, capacity.
func tokenBucketArgs(dst []any, w Window) []any {
	return append(windowArgs(dst, w), w.capacity(TokenBucket))
}

func (p *localWindow) readTokenBucket(now, cost int64) bool {
	e := p.entry
	p.tokens = float64(p.capacity)
	if !p.fresh {
		elapsed := max(0, now-e.last)
		// multiply before dividing, as the script: exact for whole token counts
		p.tokens = min(float64(p.capacity), e.tokens+float64(elapsed)*float64(p.requests)/float64(p.period))
	}
	return p.tokens+localEps >= float64(cost)
}

func (p *localWindow) answerTokenBucket(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	tok, fcost := p.tokens, float64(cost)
	capacity, period, requests := float64(p.capacity), float64(p.period), float64(p.requests)
	if allowed {
		if cost > 0 {
			tok -= fcost
			if e := p.entry; e != nil {
				e.tokens, e.last = tok, now
				// once full again the bucket equals a fresh one: let it expire then
				e.expires = now + expiryMs(math.Ceil((capacity-tok)*period/requests/1000))
			}
		}
	} else if tok+localEps < fcost {
		retry = int64(math.Ceil((fcost - tok) * period / requests))
	}
	reset = now + int64(math.Ceil(max(0, capacity-tok-localEps)*period/requests))
	return int64(math.Floor(tok + localEps)), reset, retry
}
