package limiter

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/redistest"
)

func TestNewClientTopologies(t *testing.T) {
	cases := []struct {
		url     string
		want    any // concrete client type, or nil for an error
		wantErr string
	}{
		{url: "redis://127.0.0.1:6379/0", want: &redis.Client{}},
		{url: "rediss://user:secret@redis.example:6380", want: &redis.Client{}},
		{url: "redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001", want: &redis.ClusterClient{}},
		{url: "rediss+cluster://127.0.0.1:7000", want: &redis.ClusterClient{}},
		{url: "redis+sentinel://127.0.0.1:26379?master_name=main", want: &redis.Client{}},
		{url: "redis+sentinel://127.0.0.1:26379", wantErr: "master_name is required"},
		{url: "http://127.0.0.1:6379", wantErr: `scheme "http" is not redis`},
		{url: "redis+ring://127.0.0.1:6379", wantErr: `unknown topology "ring"`},
		{url: "redis://127.0.0.1:6379?pool_sizes=3", wantErr: "pool_sizes"},
		{url: "redis://:hunter2@127.0.0.1:6379?bogus=1", wantErr: "xxxxx"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			g := NewWithT(t)
			client, err := NewClient(c.url, ClientOptions{})
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				g.Expect(err.Error()).NotTo(ContainSubstring("hunter2"), "passwords never reach messages")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			defer client.Close()
			g.Expect(client).To(BeAssignableToTypeOf(c.want))
		})
	}
}

func TestNewClientReachesEveryTopology(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			client, err := NewClient(url, ClientOptions{PoolSize: 4})
			g.Expect(err).NotTo(HaveOccurred())
			defer client.Close()
			g.Expect(client.Ping(context.Background()).Err()).To(Succeed())
		})
	}
}

// A Sentinel-managed Redis is found through the Sentinel, and decisions run
// on the primary it names.
func TestSentinelURLDecidesOnThePrimary(t *testing.T) {
	g := NewWithT(t)
	primary := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, primary, "main")
	r := newRedis(t, "redis+sentinel://"+sentinel.Addr()+"?master_name=main")
	req := Request{Bucket: bucketFor(t), Algorithm: FixedWindow, Cost: 1,
		Windows: []Window{{Requests: 2, Period: time.Hour}}}
	for _, want := range []bool{true, true, false} {
		d, err := r.Allow(context.Background(), req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Allowed).To(Equal(want))
	}
	// The counter lives on the primary.
	key := req.Bucket.Key(FixedWindow, time.Hour)
	g.Expect(primary.Client().HGet(context.Background(), key, "c").Val()).To(Equal("2"))
}
