package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis the scripts run on: they write after
// reading TIME, which Redis allows from 5.0, where scripts are replicated
// by their effects.
const MinRedisVersion = "5.0.0"

var minRedis = mustVersion(MinRedisVersion)

// ErrRedisTooOld is the error of a connection to a Redis older than
// MinRedisVersion: it is refused, and the policy's failure mode decides.
var ErrRedisTooOld = errors.New("redis is too old")

// checkVersion refuses a new connection to a Redis older than
// MinRedisVersion, with the version found. A server that does not let the
// client read INFO (an ACL user without it, a managed Redis that hides
// it) is taken at its word: its reply error is no outage.
func checkVersion(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server").Result()
	if err != nil {
		if isReplyError(err) {
			return nil
		}
		return err
	}
	return versionAcceptable(info)
}

// versionAcceptable checks the redis_version line of an INFO server reply.
func versionAcceptable(info string) error {
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		// a version we cannot read is not a reason to refuse
		if got, err := parseVersion(v); err == nil && got.less(minRedis) {
			return fmt.Errorf("%w: the server runs Redis %s, and Sluice's scripts need %s or newer", ErrRedisTooOld, v, MinRedisVersion)
		}
		return nil
	}
	return nil
}

// isReplyError says err is the server's answer, not a failed exchange.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

type version [3]int

func parseVersion(s string) (version, error) {
	var v version
	parts := strings.SplitN(strings.TrimSpace(s), ".", 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("version %q: %w", s, err)
		}
		v[i] = n
	}
	return v, nil
}

func mustVersion(s string) version {
	v, err := parseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

func (v version) less(w version) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}
