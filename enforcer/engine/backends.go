package engine

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// DefaultBackend names the enforcer's default Redis (--redis-url).
const DefaultBackend = "default"

// Backend is one Redis the enforcer decides with, and its Guard.
type Backend struct {
	// Name is DefaultBackend or the environment variable that named the
	// URL; it is the Redis label of metrics (never the URL, which may hold
	// a password).
	Name string
	// URL is the Redis URL with any password redacted.
	URL   string
	Guard *limiter.Guard

	client redis.UniversalClient
	redis  *limiter.Redis
}

// Backends are the Redis servers of the policies, one Backend (and one
// Guard, so one health state) per distinct URL, made on first use and kept
// until Close: a reload that drops a policy must not close a client that
// in-flight requests still use.
type Backends struct {
	defaultURL string
	lookupEnv  func(string) (string, bool)
	opts       limiter.ClientOptions
	local      []limiter.LocalOption // each backend's LocalFallback state

	mu    sync.Mutex
	byURL map[string]*Backend
	all   []*Backend
}

// NewBackends decides with defaultURL for policies that name no Redis, and
// with the URL in the environment variable a policy names otherwise
// (lookupEnv is os.LookupEnv outside tests).
func NewBackends(defaultURL string, lookupEnv func(string) (string, bool), opts limiter.ClientOptions, local ...limiter.LocalOption) *Backends {
	return &Backends{defaultURL: defaultURL, lookupEnv: lookupEnv, opts: opts, local: local, byURL: map[string]*Backend{}}
}

// For returns the backend of policy p, connecting on first use. A policy
// naming an environment variable that is unset or empty is an error: its
// limits would otherwise be counted in another Redis than its other
// replicas use.
func (b *Backends) For(p *rules.Policy) (*Backend, error) {
	name, rawURL := DefaultBackend, b.defaultURL
	if p.RedisURLEnv != "" {
		name = p.RedisURLEnv
		v, ok := b.lookupEnv(p.RedisURLEnv)
		if !ok || v == "" {
			return nil, fmt.Errorf("policy %s: environment variable %s, which holds its Redis URL, is not set", p.Name, p.RedisURLEnv)
		}
		rawURL = v
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if be, ok := b.byURL[rawURL]; ok {
		return be, nil
	}
	client, err := limiter.NewClient(rawURL, b.opts)
	if err != nil {
		if p.RedisURLEnv != "" {
			return nil, fmt.Errorf("policy %s: environment variable %s: %w", p.Name, p.RedisURLEnv, err)
		}
		return nil, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	r, err := limiter.NewRedis(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	be := &Backend{Name: name, URL: redactURL(rawURL), Guard: limiter.NewGuard(r, b.local...), client: client, redis: r}
	b.byURL[rawURL] = be
	b.all = append(b.all, be)
	return be, nil
}

// All are the backends made so far, in the order they were made.
func (b *Backends) All() []*Backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Backend(nil), b.all...)
}

// Peek reports the state of req's bucket without consuming anything.
func (be *Backend) Peek(ctx context.Context, req limiter.Request, timeout time.Duration) (limiter.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return be.redis.Peek(ctx, req)
}

// AdaptiveStep sends an adaptive rule's measurements to Redis, bounded by
// timeout, and returns the factor all replicas share.
func (be *Backend) AdaptiveStep(ctx context.Context, b limiter.Bucket, a *config.Adaptive, counts limiter.MeterCounts, timeout time.Duration) (limiter.AdaptiveState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return be.redis.AdaptiveStep(ctx, b, a, counts)
}

// Monitor pings every backend each interval until ctx ends, so that health
// (/readyz, /status) follows Redis even while no request arrives.
func (b *Backends) Monitor(ctx context.Context, interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, be := range b.All() {
			_ = be.Guard.Ping(ctx, timeout)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Release gives back every backend's leases and forgets their cached
// refusals, for a new configuration.
func (b *Backends) Release(ctx context.Context) {
	for _, be := range b.All() {
		be.Guard.Release(ctx)
	}
}

// Close gives back every backend's leases, then stops its guard and client.
func (b *Backends) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, be := range b.all {
		be.Guard.Close()
		_ = be.redis.Close()
		_ = be.client.Close()
	}
	b.all, b.byURL = nil, map[string]*Backend{}
}

// redactURL hides the password of a Redis URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
