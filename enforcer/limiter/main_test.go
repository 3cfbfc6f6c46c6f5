package limiter

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// One standalone server and one 3-master cluster serve the package's tests;
// every test uses its own tenant, so they never share a bucket.
var (
	standalone *redistest.Server
	cluster    *redistest.Cluster
)

func TestMain(m *testing.M) {
	os.Exit(runWithRedis(m))
}

func runWithRedis(m *testing.M) int {
	var err error
	if standalone, err = redistest.New(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer standalone.Close()
	if cluster, err = redistest.NewCluster(3); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Close()
	return m.Run()
}

// topologies are the Redis deployments every algorithm test runs against.
func topologies() map[string]string {
	return map[string]string{"standalone": standalone.URL(), "cluster": cluster.URL()}
}

// newRedis is a Redis limiter on url, closed when t ends.
func newRedis(t testing.TB, url string) *Redis {
	t.Helper()
	client, err := NewClient(url, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRedis(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		_ = client.Close()
	})
	return r
}

// bucketFor is a bucket of its own for the running test.
func bucketFor(t testing.TB) Bucket {
	return Bucket{Namespace: "shop", Policy: "public-api", Rule: "api", Tenant: HashTenant("salt", t.Name())}
}
