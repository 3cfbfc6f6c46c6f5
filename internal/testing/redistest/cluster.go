package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterSlots = 16384
	// clusterNodeTimeoutMillis is low so that fault tests see a stopped
	// node marked failed, and back, in seconds; WithArgs can raise it.
	clusterNodeTimeoutMillis = 2000
	// clusterTimeout bounds the wait for cluster_state:ok. Redis holds a
	// new master in the fail state for its first 2 seconds.
	clusterTimeout = 20 * time.Second
)

// Cluster is a Redis Cluster of masters only, each a Server on 127.0.0.1
// with its own client and bus ports, and the slots split evenly.
type Cluster struct {
	nodes []*Server
	// replicas are StartClusterWithReplicas' replicas, replica i of master i.
	replicas []*Server
	dir      string // removed by Close; "" when owned by a testing.TB
	mu       sync.Mutex
	clients  []*redis.ClusterClient
	closed   bool
}

// StartCluster starts a cluster of masters nodes (3 is the smallest that
// Redis recommends) in t.TempDir(), waits until every node reports
// cluster_state:ok, and stops it when the test finishes.
func StartCluster(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	c, err := newCluster(t.TempDir(), false, masters, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// NewCluster starts a cluster like StartCluster in a new temporary
// directory. The caller must call Close, which also removes the directory.
func NewCluster(masters int, opts ...Option) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	c, err := newCluster(dir, true, masters, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func newCluster(dir string, ownsDir bool, masters int, opts []Option) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 1 master, got %d", masters)
	}
	c := &Cluster{nodes: make([]*Server, masters)}
	if ownsDir {
		c.dir = dir
	}
	errs := make([]error, masters)
	var wg sync.WaitGroup
	for i := range masters {
		wg.Go(func() {
			nodeDir := filepath.Join(dir, "node-"+strconv.Itoa(i))
			if errs[i] = os.Mkdir(nodeDir, 0o755); errs[i] == nil {
				c.nodes[i], errs[i] = newServer(nodeDir, false, true, opts)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.join(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// join does what `redis-cli --cluster create --cluster-replicas 0` does,
// without its fixed one-second sleeps: assign each node a slot range and a
// distinct config epoch, introduce every node to the first, then wait until
// all of them agree that the cluster is ok.
func (c *Cluster) join(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		defer clients[i].Close()
	}
	per := clusterSlots / len(c.nodes)
	for i, rdb := range clients {
		first, last := i*per, (i+1)*per-1
		if i == len(c.nodes)-1 {
			last = clusterSlots - 1
		}
		if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			return fmt.Errorf("redistest: assign slots %d-%d to %s: %w", first, last, c.nodes[i].Addr(), err)
		}
		// Distinct epochs spare the nodes resolving epoch collisions.
		if err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redistest: set config epoch of %s: %w", c.nodes[i].Addr(), err)
		}
	}
	for _, n := range c.nodes[1:] {
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.port, n.busPort).Err(); err != nil {
			return fmt.Errorf("redistest: introduce %s to the cluster: %w", n.Addr(), err)
		}
	}
	for i, rdb := range clients {
		if err := waitClusterOK(ctx, rdb); err != nil {
			return fmt.Errorf("redistest: cluster node %s: %w", c.nodes[i].Addr(), err)
		}
	}
	return nil
}

func waitClusterOK(ctx context.Context, rdb *redis.Client) error {
	var info string
	for {
		var err error
		info, err = rdb.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("cluster not ok: %w", err)
			}
			return fmt.Errorf("cluster not ok after %s:\n%s", clusterTimeout, strings.TrimSpace(info))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Addrs returns the nodes' addresses, "127.0.0.1:PORT".
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL returns "redis+cluster://127.0.0.1:P1?addr=127.0.0.1:P2&addr=...":
// the storage layer's scheme for a cluster, whose query go-redis
// ParseClusterURL reads once the scheme is mapped to redis.
func (c *Cluster) URL() string {
	var b strings.Builder
	b.WriteString("redis+cluster://")
	for i, addr := range c.Addrs() {
		switch i {
		case 0:
		case 1:
			b.WriteString("?addr=")
		default:
			b.WriteString("&addr=")
		}
		b.WriteString(addr)
	}
	return b.String()
}

// Nodes returns the cluster's nodes, for fault tests that stop, restart or
// freeze one of them. Closing a node leaves it closed.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// ClusterClient returns a new cluster client with go-redis default options.
// Each call returns its own client; the caller may close it, and Close
// closes every client that is still open.
func (c *Cluster) ClusterClient() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clients = append(c.clients, cc)
	return cc
}

// Close kills every node and closes the clients handed out by ClusterClient.
// It can be called more than once.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, cc := range c.clients {
		_ = cc.Close()
	}
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n != nil {
			wg.Go(n.Close)
		}
	}
	wg.Wait()
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}
