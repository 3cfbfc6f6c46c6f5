package limiter

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClientOptions tune the Redis client of an enforcer.
type ClientOptions struct {
	// RootCAs verifies the server certificate of rediss:// URLs; nil means
	// the system's roots.
	RootCAs *x509.CertPool
	// PoolSize is the maximum number of connections per Redis node; zero
	// keeps go-redis' default (10 per CPU).
	PoolSize int
	// DialTimeout bounds connection attempts; zero means 1s.
	DialTimeout time.Duration
}

// NewClient connects to the Redis that rawURL names:
//
//	redis://[user:password@]host:port[/db][?options]          one server
//	rediss://...                                              one server over TLS
//	redis+sentinel://[user:pass@]sentinel:26379?master_name=NAME[&addr=sentinel2:26379...]
//	redis+cluster://[user:pass@]node:6379[?addr=node2:6379...] a Redis Cluster
//
// The +sentinel and +cluster forms also accept rediss for TLS. Query options
// are go-redis' URL options (dial_timeout, pool_size, ...). The client never
// retries a command on its own: a decision must not be counted twice, and the
// policy's timeout bounds each decision instead.
func NewClient(rawURL string, opts ClientOptions) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", redactURLError(err))
	}
	base, topology, _ := strings.Cut(u.Scheme, "+")
	if base != "redis" && base != "rediss" {
		return nil, fmt.Errorf("redis URL %s: scheme %q is not redis, rediss, redis+sentinel or redis+cluster", redact(u), u.Scheme)
	}
	u.Scheme = base
	plain := u.String()
	switch topology {
	case "":
		o, err := redis.ParseURL(plain)
		if err != nil {
			return nil, fmt.Errorf("redis URL %s: %w", redact(u), err)
		}
		opts.apply(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize)
		o.ReadBufferSize, o.WriteBufferSize = connBuffer, connBuffer
		// The decisions' pipeline (AsyncAutoPipeline) has a pool of its own.
		o.PipelineReadBufferSize, o.PipelineWriteBufferSize = pipelineBuffer, pipelineBuffer
		opts.trust(o.TLSConfig)
		o.OnConnect = checkVersion
		return redis.NewClient(o), nil
	case "cluster":
		o, err := redis.ParseClusterURL(plain)
		if err != nil {
			return nil, fmt.Errorf("redis cluster URL %s: %w", redact(u), err)
		}
		opts.apply(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize)
		// Pipeline buffer sizes are left unset: setting them would give each
		// node a pipeline pool of its own.
		o.ReadBufferSize, o.WriteBufferSize = connBuffer, connBuffer
		opts.trust(o.TLSConfig)
		o.OnConnect = checkVersion
		return redis.NewClusterClient(o), nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(plain)
		if err != nil {
			return nil, fmt.Errorf("redis sentinel URL %s: %w", redact(u), err)
		}
		if o.MasterName == "" {
			return nil, fmt.Errorf("redis sentinel URL %s: master_name is required", redact(u))
		}
		opts.apply(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize)
		o.ReadBufferSize, o.WriteBufferSize = connBuffer, connBuffer
		opts.trust(o.TLSConfig)
		o.OnConnect = checkVersion
		return redis.NewFailoverClient(o), nil
	}
	return nil, fmt.Errorf("redis URL %s: unknown topology %q (use redis+sentinel or redis+cluster)", redact(u), topology)
}

// The buffers of each Redis connection. The client's defaults (32 KiB each
// way, 128 KiB for its pipeline pool) are sized for large values; the
// enforcer's commands and replies are a few hundred bytes, and a batch
// larger than a buffer is only written or read in more than one call. With
// the defaults, a busy enforcer's connections to one Redis held about 4 MiB
// of buffers (docs/performance.md, "Memory").
const (
	connBuffer     = 4 << 10
	pipelineBuffer = 16 << 10
)

// apply sets the fields every topology's options share.
func (opts ClientOptions) apply(maxRetries, dialRetries *int, dialTimeout, readTimeout, writeTimeout *time.Duration, poolSize *int) {
	*maxRetries = -1 // never resend a decision: it could be counted twice
	// One dial attempt: a refused connection is an outage for the failure
	// mode to handle now, not something to wait out inside a request.
	*dialRetries = 1
	*dialTimeout = time.Second
	if opts.DialTimeout > 0 {
		*dialTimeout = opts.DialTimeout
	}
	// A decision waits at most its policy's timeout (1s at most); a batch
	// stuck on a hung server is abandoned after the same second.
	for _, t := range []*time.Duration{readTimeout, writeTimeout} {
		if *t == 0 {
			*t = time.Second
		}
	}
	if opts.PoolSize > 0 {
		*poolSize = opts.PoolSize
	}
}

// trust makes a TLS connection verify the server against RootCAs.
func (opts ClientOptions) trust(c *tls.Config) {
	if c != nil && opts.RootCAs != nil {
		c.RootCAs = opts.RootCAs
	}
}

// redact hides the password of u for messages and logs.
func redact(u *url.URL) string { return u.Redacted() }

// redactURLError strips the URL, which may hold a password, from a parse error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
