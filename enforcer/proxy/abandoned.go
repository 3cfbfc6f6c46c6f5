package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the answer settles must not depend on how the client ends the
// exchange. A request whose rule acts on the answer is forwarded with a
// context that outlives its client by answerDrainTime, and the answer
// writer drops what the client no longer takes instead of failing: the
// application's answer is read to its end (its status, its usage, its
// trailers), up to answerDrainTime and answerDrainBytes after the client
// went. An answer that still did not end is unfinished, and is charged as
// the rule says (config.ResponseCost.Unfinished); an unfinished answer to
// a countResponses rule keeps its count.

const (
	// answerDrainTime is how long the application's answer is read after
	// its client has gone.
	answerDrainTime = 30 * time.Second
	// answerDrainBytes is how much of it is read after its client has gone.
	answerDrainBytes = 64 << 20
)

// errDrainOver stops the copy of an answer whose client has gone, past
// answerDrainBytes.
var errDrainOver = errors.New("the client went away and the answer is over the bytes read for its report")

// outlive is a context with ctx's values that is cancelled
// answerDrainTime after ctx is, or when stop is called.
func outlive(ctx context.Context) (out context.Context, stop func()) {
	o := &outlivingCtx{}
	out, o.cancel = context.WithCancel(context.WithoutCancel(ctx))
	o.stopAfter = context.AfterFunc(ctx, o.clientGone)
	return out, o.stop
}

type outlivingCtx struct {
	cancel    context.CancelFunc
	stopAfter func() bool
	mu        sync.Mutex
	timer     *time.Timer
	stopped   bool
}

func (o *outlivingCtx) clientGone() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.stopped {
		o.timer = time.AfterFunc(answerDrainTime, o.cancel)
	}
}

func (o *outlivingCtx) stop() {
	o.stopAfter()
	o.mu.Lock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
	o.mu.Unlock()
	o.cancel()
}

// offerReadable narrows the encodings a request offers the application to
// those the usage reader reads, so that the client cannot pick one that
// hides the usage: gzip when the client takes it, else identity only. No
// Accept-Encoding field would offer every encoding.
func offerReadable(hdr http.Header) {
	if acceptsGzip(hdr["Accept-Encoding"]) {
		hdr["Accept-Encoding"] = []string{"gzip"}
		return
	}
	hdr["Accept-Encoding"] = []string{"identity"}
}

// acceptsGzip reports whether Accept-Encoding values take gzip: listed,
// or covered by *, with a weight above 0.
func acceptsGzip(values []string) bool {
	gzip, star := -1.0, -1.0
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(item, ";")
			q := 1.0
			if name, value, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.EqualFold(strings.TrimSpace(name), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
					q = f
				} else {
					q = 0
				}
			}
			switch coding = strings.ToLower(strings.TrimSpace(coding)); coding {
			case "gzip", "x-gzip":
				gzip = max(gzip, q)
			case "*":
				star = max(star, q)
			}
		}
	}
	if gzip >= 0 {
		return gzip > 0
	}
	return star > 0
}
