package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartClusterWithReplicas starts a cluster of masters nodes like
// StartCluster, then one replica of each master, and waits until every
// master has its replica in sync. Replicas (i) is master i's replica. A
// replica is promoted on its own when its master stops answering for the
// cluster node timeout (2s): fault tests kill a master to see that.
func StartClusterWithReplicas(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	c := StartCluster(t, masters, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	first := redis.NewClient(&redis.Options{Addr: c.nodes[0].Addr(), MaxRetries: -1})
	defer first.Close()
	for i, m := range c.nodes {
		dir := t.TempDir()
		r, err := newServer(dir, false, true, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
		defer rdb.Close()
		if err := first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", r.port, r.busPort).Err(); err != nil {
			t.Fatalf("redistest: introduce replica %s: %v", r.Addr(), err)
		}
		id, err := c.NodeID(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		// The replica must know its master before it can replicate it.
		err = retry(ctx, func() error { return rdb.Do(ctx, "CLUSTER", "REPLICATE", id).Err() })
		if err != nil {
			t.Fatalf("redistest: make %s a replica of %s: %v", r.Addr(), m.Addr(), err)
		}
		c.replicas = append(c.replicas, r)
		err = retry(ctx, func() error {
			info, err := rdb.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if !containsLine(info, "master_link_status:up") {
				return errors.New("replica not in sync")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("redistest: replica %s of %s: %v", r.Addr(), m.Addr(), err)
		}
		if err := waitClusterOK(ctx, rdb); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Replicas returns the replicas of StartClusterWithReplicas, replica i of
// master i at first (a failover swaps their roles).
func (c *Cluster) Replicas() []*Server {
	return append([]*Server(nil), c.replicas...)
}

// NodeID is the cluster node ID of master i.
func (c *Cluster) NodeID(ctx context.Context, i int) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: c.nodes[i].Addr(), MaxRetries: -1})
	defer rdb.Close()
	id, err := rdb.ClusterMyID(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("redistest: id of %s: %w", c.nodes[i].Addr(), err)
	}
	return id, nil
}

// SlotOwner is the index of the master serving slot, as master 0 sees it.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (int, error) {
	rdb := redis.NewClient(&redis.Options{Addr: c.nodes[0].Addr(), MaxRetries: -1})
	defer rdb.Close()
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redistest: cluster shards: %w", err)
	}
	for _, sh := range shards {
		served := false
		for _, r := range sh.Slots {
			served = served || (int64(slot) >= r.Start && int64(slot) <= r.End)
		}
		if !served {
			continue
		}
		for _, n := range sh.Nodes {
			if n.Role != "master" {
				continue
			}
			for i, m := range c.nodes {
				if int64(m.port) == n.Port {
					return i, nil
				}
			}
			return 0, fmt.Errorf("redistest: slot %d served by port %d, not a master this cluster started with", slot, n.Port)
		}
	}
	return 0, fmt.Errorf("redistest: slot %d is not served", slot)
}

// MigrateSlot moves slot from the master serving it to master to, the
// way redis-cli --cluster reshard does while clients keep running: the
// target imports, the source migrates, the keys go over batch keys at a
// time with a pause of between after each batch (clients meanwhile get
// ASK for moved keys and TRYAGAIN for commands whose keys are split),
// then every master is told the slot's new owner (clients get MOVED).
func (c *Cluster) MigrateSlot(ctx context.Context, slot, to, batch int, between time.Duration) error {
	m, err := c.StartMigration(ctx, slot, to)
	if err != nil || m == nil {
		return err
	}
	defer m.close()
	for {
		keys, err := m.src.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		if err != nil {
			return fmt.Errorf("redistest: keys of slot %d: %w", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		if err := m.Move(ctx, keys...); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(between):
		}
	}
	return m.Finish(ctx)
}

// Migration is a slot's move in progress, stepped by the caller: between
// Move calls the slot's keys may be split across two masters, and a
// command on several of them gets TRYAGAIN until Finish.
type Migration struct {
	c              *Cluster
	slot, from, to int
	toID           string
	src            *redis.Client
}

// StartMigration marks slot importing on master to and migrating on the
// master serving it, and moves no key; it is nil when to serves slot
// already.
func (c *Cluster) StartMigration(ctx context.Context, slot, to int) (*Migration, error) {
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, nil
	}
	fromID, err := c.NodeID(ctx, from)
	if err != nil {
		return nil, err
	}
	toID, err := c.NodeID(ctx, to)
	if err != nil {
		return nil, err
	}
	dst := redis.NewClient(&redis.Options{Addr: c.nodes[to].Addr(), MaxRetries: -1})
	defer dst.Close()
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err(); err != nil {
		return nil, fmt.Errorf("redistest: slot %d importing on %s: %w", slot, c.nodes[to].Addr(), err)
	}
	src := redis.NewClient(&redis.Options{Addr: c.nodes[from].Addr(), MaxRetries: -1})
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err(); err != nil {
		_ = src.Close()
		return nil, fmt.Errorf("redistest: slot %d migrating on %s: %w", slot, c.nodes[from].Addr(), err)
	}
	return &Migration{c: c, slot: slot, from: from, to: to, toID: toID, src: src}, nil
}

// Move migrates keys of the slot to the target master.
func (m *Migration) Move(ctx context.Context, keys ...string) error {
	args := []any{"MIGRATE", "127.0.0.1", m.c.nodes[m.to].port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.src.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redistest: migrate %d keys of slot %d: %w", len(keys), m.slot, err)
	}
	return nil
}

// Finish moves the keys left and tells every master the slot's new owner.
func (m *Migration) Finish(ctx context.Context) error {
	defer m.close()
	for {
		keys, err := m.src.ClusterGetKeysInSlot(ctx, m.slot, 100).Result()
		if err != nil {
			return fmt.Errorf("redistest: keys of slot %d: %w", m.slot, err)
		}
		if len(keys) == 0 {
			break
		}
		if err := m.Move(ctx, keys...); err != nil {
			return err
		}
	}
	// The target first, so that it serves the slot before the source
	// redirects there; then the source, then the others.
	order := []int{m.to, m.from}
	for i := range m.c.nodes {
		if i != m.to && i != m.from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		rdb := redis.NewClient(&redis.Options{Addr: m.c.nodes[i].Addr(), MaxRetries: -1})
		err := rdb.Do(ctx, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID).Err()
		_ = rdb.Close()
		if err != nil {
			return fmt.Errorf("redistest: slot %d to %s on %s: %w", m.slot, m.c.nodes[m.to].Addr(), m.c.nodes[i].Addr(), err)
		}
	}
	return nil
}

func (m *Migration) close() { _ = m.src.Close() }

// retry runs f every 20ms until it succeeds or ctx ends.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func containsLine(info, line string) bool {
	for _, l := range strings.Split(info, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
