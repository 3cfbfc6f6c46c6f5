package limiter

import (
	"math"
	"strconv"

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
	singleAnswer: func(w Window, state string, now, cost int64, allowed bool) (remaining, reset, retry int64, err error) {
		tok, err := strconv.ParseFloat(state, 64)
		if err != nil {
			return 0, 0, 0, err
		}
		remaining, reset, retry = tokenBucketAnswer(tok, w.capacity(TokenBucket), w.Requests, w.Period.Milliseconds()*1000, now, cost, allowed)
		return remaining, reset, retry, nil
	},
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
	tok := p.tokens
	if allowed && cost > 0 {
		tok -= float64(cost)
		if e := p.entry; e != nil {
			e.tokens, e.last = tok, now
			// once full again the bucket equals a fresh one: let it expire then
			e.expires = now + expiryMs(math.Ceil((float64(p.capacity)-tok)*float64(p.period)/float64(p.requests)/1000))
		}
	}
	return tokenBucketAnswer(tok, p.capacity, p.requests, p.period, now, cost, allowed)
}

// tokenBucketAnswer is the remaining, reset and retry of a window of
// capacity tokens refilled at requests per period (µs) that holds tok at
// now after a decision of cost: the scripts' arithmetic, for Local and for
// the reply of the single-window script, which answers tok.
func tokenBucketAnswer(tok float64, capacity, requests, period, now, cost int64, allowed bool) (remaining, reset, retry int64) {
	fcost, fcapacity, fperiod, frequests := float64(cost), float64(capacity), float64(period), float64(requests)
	if !allowed && tok+localEps < fcost {
		retry = int64(math.Ceil((fcost - tok) * fperiod / frequests))
	}
	reset = now + int64(math.Ceil(max(0, fcapacity-tok-localEps)*fperiod/frequests))
	return int64(math.Floor(tok + localEps)), reset, retry
}
