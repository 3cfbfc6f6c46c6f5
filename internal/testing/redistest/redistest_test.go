package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
)

func TestServerServesCommands(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := Start(t)
	rdb := s.Client()
	ctx := context.Background()

	g.Expect(s.URL()).To(Equal("redis://" + s.Addr()))
	g.Expect(rdb.Set(ctx, "k", "v", 0).Err()).To(Succeed())
	g.Expect(rdb.Get(ctx, "k").Val()).To(Equal("v"))
	g.Expect(rdb.ConfigGet(ctx, "save").Val()).To(HaveKeyWithValue("save", ""), "no RDB snapshots")
	g.Expect(rdb.ConfigGet(ctx, "appendonly").Val()).To(HaveKeyWithValue("appendonly", "no"))
}

func TestWithArgsConfiguresServer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := Start(t, WithArgs("--maxmemory", "1mb", "--save", "3600 1"))
	cfg := s.Client().ConfigGet(context.Background(), "*").Val()
	g.Expect(cfg).To(HaveKeyWithValue("maxmemory", "1048576"))
	g.Expect(cfg).To(HaveKeyWithValue("save", "3600 1"), "the caller overrides a default")
}

func TestStopIsAnOutageAndRestartComesBackEmpty(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := Start(t)
	// go-redis retries failed dials and commands by default, which would
	// make each command to the stopped server take over a second.
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	ctx := context.Background()
	script := redis.NewScript(`return redis.call("INCR", KEYS[1])`)
	g.Expect(rdb.Set(ctx, "k", "v", 0).Err()).To(Succeed())
	g.Expect(script.Load(ctx, rdb).Err()).To(Succeed())
	oldPID := s.pid()

	s.Stop()
	g.Expect(s.pid()).To(BeZero())
	g.Expect(processGone(oldPID)).To(BeTrue(), "Stop reaps the process")
	err := rdb.Get(ctx, "k").Err()
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, redis.Nil)).To(BeFalse(), "a stopped server is an error, not a missing key")

	g.Expect(s.Restart()).To(Succeed())
	g.Expect(s.pid()).NotTo(Equal(oldPID))
	g.Expect(rdb.Ping(ctx).Err()).To(Succeed())
	g.Expect(rdb.Get(ctx, "k").Err()).To(MatchError(redis.Nil), "keys are gone")
	err = script.EvalSha(ctx, rdb, []string{"n"}).Err()
	g.Expect(redis.HasErrorPrefix(err, "NOSCRIPT")).To(BeTrue(), "loaded scripts are gone: %v", err)
	g.Expect(script.Run(ctx, rdb, []string{"n"}).Val()).To(BeEquivalentTo(1))
}

func TestRestartOfRunningServer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := Start(t)
	rdb := s.Client()
	ctx := context.Background()
	g.Expect(rdb.Set(ctx, "k", "v", 0).Err()).To(Succeed())

	g.Expect(s.Restart()).To(Succeed())
	g.Expect(rdb.Exists(ctx, "k").Val()).To(BeZero())
}

func TestRestartFailsWhileAnotherProcessHoldsThePort(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := Start(t)
	s.Stop()
	l, err := net.Listen("tcp", s.Addr())
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(s.Restart()).To(MatchError(And(
		ContainSubstring(s.Addr()),
		ContainSubstring("bind: Address already in use"), // from the server's log
	)))
	g.Expect(l.Close()).To(Succeed())
	g.Expect(s.Restart()).To(Succeed())
	g.Expect(s.Client().Ping(context.Background()).Err()).To(Succeed())
}

func TestStartErrorCarriesServerLog(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	_, err := New(WithArgs("--no-such-directive", "x"))
	g.Expect(err).To(MatchError(ContainSubstring("no-such-directive")))
}

func TestFreezeTimesOutClientsAndThawRecovers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	g.Expect(rdb.Set(ctx, "k", "v", 0).Err()).To(Succeed())

	s.Freeze()
	start := time.Now()
	err := rdb.Get(ctx, "k").Err()
	var netErr net.Error
	g.Expect(errors.As(err, &netErr) && netErr.Timeout()).To(BeTrue(), "want a timeout, got %v", err)
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))

	s.Thaw()
	g.Expect(rdb.Get(ctx, "k").Val()).To(Equal("v"), "a frozen server keeps its data")
}

func TestCloseKillsServer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s, err := New()
	g.Expect(err).NotTo(HaveOccurred())
	pid := s.pid()
	g.Expect(processGone(pid)).To(BeFalse())

	s.Close()
	g.Expect(processGone(pid)).To(BeTrue())
	g.Expect(s.dir).NotTo(BeADirectory())
	s.Close() // a second Close is harmless
}

func TestCloseKillsFrozenServer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s, err := New()
	g.Expect(err).NotTo(HaveOccurred())
	pid := s.pid()
	s.Freeze()

	s.Close()
	g.Expect(processGone(pid)).To(BeTrue())
}

func TestMissingRedisServerSaysHowToInstall(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("PATH", t.TempDir())
	_, err := New()
	g.Expect(err).To(MatchError(ContainSubstring("make redis")))
}

// A test binary that dies without running Cleanup (kill -9, -timeout) must
// not leave its servers behind. The test runs itself as a child that starts
// a server, kills the child, and expects the server to die too.
func TestServerDiesWithTestBinary(t *testing.T) {
	if os.Getenv("REDISTEST_ORPHAN") == "1" {
		// Start the server from a goroutine that exits locked to its
		// thread, which takes the thread down: the server must survive
		// that and die only with the process.
		var s *Server
		var err error
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			s, err = New()
			close(done)
		}()
		<-done
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println(s.pid())
		select {}
	}
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux only")
	}
	t.Parallel()
	g := NewWithT(t)
	child := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestBinary$")
	// The child cannot remove its server's directory; make it one of ours.
	child.Env = append(os.Environ(), "REDISTEST_ORPHAN=1", "TMPDIR="+t.TempDir())
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(child.Start()).To(Succeed())
	line, err := bufio.NewReader(out).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	g.Expect(err).NotTo(HaveOccurred(), "child said %q", line)

	g.Consistently(func() bool { return processGone(pid) }).WithTimeout(time.Second).
		Should(BeFalse(), "the server outlives its forking goroutine's thread")
	g.Expect(child.Process.Kill()).To(Succeed())
	_ = child.Wait()
	g.Eventually(func() bool { return processGone(pid) }).Should(BeTrue())
}

func TestClusterServesAllSlots(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c := StartCluster(t, 3)
	ctx := context.Background()
	cc := c.ClusterClient()

	g.Expect(c.Addrs()).To(HaveLen(3))
	g.Expect(c.URL()).To(Equal(fmt.Sprintf("redis+cluster://%s?addr=%s&addr=%s", c.Addrs()[0], c.Addrs()[1], c.Addrs()[2])))
	opts, err := redis.ParseClusterURL(strings.Replace(c.URL(), "redis+cluster://", "redis://", 1))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opts.Addrs).To(ConsistOf(c.Addrs()))

	keys := keyPerSlot()
	g.Expect(cc.ClusterKeySlot(ctx, keys[12345]).Val()).To(BeEquivalentTo(12345), "keyPerSlot agrees with Redis")
	_, err = cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Set(ctx, k, k, 0)
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	for _, n := range c.Nodes() {
		g.Expect(n.Client().DBSize(ctx).Val()).To(BeNumerically(">=", len(keys)/3), "node %s holds its share", n.Addr())
	}
	g.Expect(cc.Get(ctx, keys[0]).Val()).To(Equal(keys[0]))
	g.Expect(cc.Get(ctx, keys[len(keys)-1]).Val()).To(Equal(keys[len(keys)-1]))
}

func TestClusterRunsMultiKeyCommandsOnOneHashTag(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c := StartCluster(t, 3)
	ctx := context.Background()
	cc := c.ClusterClient()

	g.Expect(cc.MSet(ctx, "{bucket}:minute", 1, "{bucket}:day", 2).Err()).To(Succeed())
	g.Expect(cc.MGet(ctx, "{bucket}:minute", "{bucket}:day").Val()).To(Equal([]any{"1", "2"}))
	sum := redis.NewScript(`return redis.call("INCR", KEYS[1]) + redis.call("INCR", KEYS[2])`)
	g.Expect(sum.Run(ctx, cc, []string{"{bucket}:minute", "{bucket}:day"}).Val()).To(BeEquivalentTo(5))

	// Only a shared hash tag makes this work: Redis refuses keys in two slots.
	err := sum.Run(ctx, cc, []string{"a", "b"}).Err()
	g.Expect(redis.HasErrorPrefix(err, "CROSSSLOT")).To(BeTrue(), "got %v", err)
}

func TestClusterCloseKillsNodes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c, err := NewCluster(3)
	g.Expect(err).NotTo(HaveOccurred())
	var pids []int
	for _, n := range c.Nodes() {
		pids = append(pids, n.pid())
	}

	c.Close()
	for _, pid := range pids {
		g.Expect(processGone(pid)).To(BeTrue(), "pid %d", pid)
	}
	g.Expect(c.dir).NotTo(BeADirectory())
}

func TestClusterNodeRestartRejoins(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c := StartCluster(t, 3)
	ctx := context.Background()
	node := c.Nodes()[1]
	rdb := node.Client()
	id := rdb.ClusterMyID(ctx).Val()

	g.Expect(node.Restart()).To(Succeed())
	g.Eventually(func() string { return rdb.ClusterInfo(ctx).Val() }).
		WithTimeout(15 * time.Second).Should(ContainSubstring("cluster_state:ok"))
	g.Expect(rdb.ClusterMyID(ctx).Val()).To(Equal(id), "the node keeps its identity")
	g.Expect(c.ClusterClient().Set(ctx, "k", "v", 0).Err()).To(Succeed())
}

// processGone reports whether pid no longer runs: it does not exist, or it
// is a zombie waiting for a parent that does not reap.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// Fields: pid (comm) state ...; comm may contain spaces.
	rest := stat[strings.LastIndexByte(string(stat), ')')+1:]
	return strings.HasPrefix(strings.TrimSpace(string(rest)), "Z")
}

// keyPerSlot returns one key for each of the 16384 cluster slots.
func keyPerSlot() []string {
	keys := make([]string, clusterSlots)
	for found, i := 0, 0; found < clusterSlots; i++ {
		k := "k" + strconv.Itoa(i)
		if slot := crc16([]byte(k)) % clusterSlots; keys[slot] == "" {
			keys[slot] = k
			found++
		}
	}
	return keys
}

// crc16 is the CRC-16/XMODEM that Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		s, err := New()
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

func BenchmarkStartCluster(b *testing.B) {
	for b.Loop() {
		c, err := NewCluster(3)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func TestWithClockAtFakesTimeAndExpiry(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	start := time.Date(2027, time.March, 27, 22, 59, 56, 0, time.UTC)
	s := Start(t, WithClockAt(start))
	rdb := s.Client()
	ctx := context.Background()

	now, err := rdb.Time(ctx).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now).To(BeTemporally(">=", start), "TIME starts at the given instant")
	g.Expect(now).To(BeTemporally("<", start.Add(5*time.Second)))

	// a key expiring 2 s later on the faked clock lives until then, and a
	// key expiring at the machine's now is already gone
	expiry := now.Add(2 * time.Second)
	g.Expect(rdb.Set(ctx, "later", "v", 0).Err()).To(Succeed())
	g.Expect(rdb.PExpireAt(ctx, "later", expiry).Val()).To(BeTrue())
	g.Expect(rdb.Set(ctx, "real-now", "v", 0).Err()).To(Succeed())
	g.Expect(rdb.PExpireAt(ctx, "real-now", time.Now().Add(time.Hour)).Val()).To(BeTrue())
	g.Expect(rdb.Exists(ctx, "later").Val()).To(Equal(int64(1)))
	g.Expect(rdb.Exists(ctx, "real-now").Val()).To(Equal(int64(0)), "an hour after the machine's now is long past on the faked clock")
	ttl := rdb.PTTL(ctx, "later").Val()
	g.Expect(ttl).To(BeNumerically(">", time.Second))
	g.Expect(ttl).To(BeNumerically("<=", 2*time.Second))

	// the clock runs: once TIME is past the expiry, the key is gone
	g.Eventually(func() time.Time { return rdb.Time(ctx).Val() }, 10*time.Second, 100*time.Millisecond).
		Should(BeTemporally(">", expiry))
	g.Expect(rdb.Exists(ctx, "later").Val()).To(Equal(int64(0)), "expired on the faked clock")
	g.Expect(rdb.Time(ctx).Val()).To(BeTemporally("<", start.Add(15*time.Second)), "the clock advances in real time, not faster")
}
