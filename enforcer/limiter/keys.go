package limiter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Tenant is a salted hash of a tenant's identity. Raw client input (an API
// key, a header, an IP address) never becomes part of a Redis key.
type Tenant string

// tenantHashBytes is how much of the SHA-256 a Tenant keeps: 96 bits make a
// collision between two tenants of one policy vanishingly unlikely.
const tenantHashBytes = 12

// HashTenant returns the Tenant for identity under a policy's salt. An empty
// identity has no tenant and yields "", for which Rule.Request builds a
// Request the guard refuses.
func HashTenant(salt, identity string) Tenant {
	if identity == "" {
		return ""
	}
	// salt, NUL, identity in one buffer, on the stack for usual sizes: the
	// returned string is the only allocation.
	var stack [256]byte
	buf := append(append(append(stack[:0], salt...), 0), identity...)
	sum := sha256.Sum256(buf)
	var out [2 * tenantHashBytes]byte
	hex.Encode(out[:], sum[:tenantHashBytes])
	return Tenant(out[:])
}

// Bucket names the counters of one rule of one policy for one tenant. All
// windows of a bucket share a Redis Cluster hash tag, so one script can check
// them together.
type Bucket struct {
	Namespace string
	Policy    string
	Rule      string
	Tenant    Tenant
}

func (b Bucket) validate() error {
	for _, f := range []struct{ name, value string }{
		{"namespace", b.Namespace}, {"policy", b.Policy}, {"rule", b.Rule}, {"tenant", string(b.Tenant)},
	} {
		if f.value == "" {
			return fmt.Errorf("%w: empty %s", ErrInvalidRequest, f.name)
		}
		if strings.ContainsAny(f.value, "{}/") {
			return fmt.Errorf("%w: %s %q contains '{', '}' or '/'", ErrInvalidRequest, f.name, f.value)
		}
	}
	return nil
}

// String is the bucket's hash tag content: namespace/policy/rule/tenant.
func (b Bucket) String() string {
	return b.Namespace + "/" + b.Policy + "/" + b.Rule + "/" + string(b.Tenant)
}

// appendKey appends the Redis key of one window of b to dst:
// sl:{<namespace>/<policy>/<rule>/<tenant>}:<algorithm>:<period>.
func (b Bucket) appendKey(dst []byte, a Algorithm, period time.Duration) []byte {
	return appendPeriodLabel(b.appendKeyPrefix(dst, a), period)
}

// appendKeyPrefix appends the key of a's windows of b up to the period:
// sl:{<namespace>/<policy>/<rule>/<tenant>}:<algorithm>:
func (b Bucket) appendKeyPrefix(dst []byte, a Algorithm) []byte {
	dst = append(dst, "sl:{"...)
	dst = append(dst, b.Namespace...)
	dst = append(dst, '/')
	dst = append(dst, b.Policy...)
	dst = append(dst, '/')
	dst = append(dst, b.Rule...)
	dst = append(dst, '/')
	dst = append(dst, b.Tenant...)
	dst = append(dst, "}:"...)
	dst = append(dst, code(a)...)
	return append(dst, ':')
}

// appendPeriodLabel writes a period compactly: whole seconds as "60s", the
// rest as milliseconds ("1500ms").
func appendPeriodLabel(dst []byte, d time.Duration) []byte {
	if d%time.Second == 0 {
		return append(strconv.AppendInt(dst, int64(d/time.Second), 10), 's')
	}
	return append(strconv.AppendInt(dst, int64(d/time.Millisecond), 10), "ms"...)
}
