package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// redisCluster is a real Redis Cluster that a test started: masters and
// their replicas, each a redis-server on 127.0.0.1 keeping nothing on
// disk, joined by redis-cli --cluster create. A node is declared failed
// after a second without answer, so that a replica takes over within
// about two.
type redisCluster struct {
	nodes []*redisServer
}

// clusterNodeTimeout is how long a node may not answer before the others
// declare it failed, in milliseconds.
const clusterNodeTimeout = 1000

// startCluster starts a cluster of masters, each with replicas, for t,
// stopped when t ends. The tests need redis-server and redis-cli on the
// PATH (Debian's redis-server and redis-tools): without them they fail,
// never skip. In short mode (the quick tier) they skip.
func startCluster(t testing.TB, masters, replicas int) *redisCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("short: starts a Redis Cluster")
	}
	cli, err := exec.LookPath("redis-cli")
	require.NoError(t, err, "the cluster tests need redis-cli on the PATH (apt-get install redis-tools)")
	c := &redisCluster{}
	for range masters * (1 + replicas) {
		port := freeClusterPort(t)
		c.nodes = append(c.nodes, startRedisOn(t, port,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
			"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
			"--repl-diskless-sync-delay", "0")) // replicas in sync at once, not 5 s later
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	c.waitHealthy(t, c.addrs())
	return c
}

// addrs returns the addresses of every node, masters first.
func (c *redisCluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.addr)
	}
	return out
}

// client returns a cluster client of c with go-redis's defaults but for
// short timeouts, closed when t ends.
func (c *redisCluster) client(t testing.TB) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs(),
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// masterOf returns the node that serves key's slot now, as the cluster
// says.
func (c *redisCluster) masterOf(t testing.TB, key string) *redisServer {
	t.Helper()
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: n.addr})
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			rdb.Close()
			continue
		}
		shards, err := rdb.ClusterSlots(ctx).Result()
		rdb.Close()
		require.NoError(t, err)
		for _, s := range shards {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				for _, m := range c.nodes {
					if m.addr == s.Nodes[0].Addr {
						return m
					}
				}
			}
		}
	}
	t.Fatalf("no node serves %q", key)
	return nil
}

// waitHealthy waits, 20 seconds at most, until every node of addrs says
// the cluster is ok and knows every other node, and every replica is in
// sync with its master (a replica still in its first sync cannot take
// over).
func (c *redisCluster) waitHealthy(t testing.TB, addrs []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, addr := range addrs {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			info, err := rdb.ClusterInfo(ctx).Result()
			repl, err2 := rdb.Info(ctx, "replication").Result()
			rdb.Close()
			if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(addrs))+"\r") ||
				strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		require.True(t, time.Now().Before(deadline), "the cluster %v did not become healthy", addrs)
		time.Sleep(50 * time.Millisecond) // polling real processes: no fake time here
	}
}

// promoted waits, 20 seconds at most, until a node other than dead serves
// key's slot, and returns it with when that was first seen.
func (c *redisCluster) promoted(t testing.TB, key string, dead *redisServer) (*redisServer, time.Time) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, n := range c.nodes {
			if n == dead || n.cmd == nil {
				continue
			}
			rdb := redis.NewClient(&redis.Options{Addr: n.addr})
			role, err := rdb.Do(ctx, "ROLE").Slice()
			rdb.Close()
			if err != nil || len(role) == 0 || role[0] != "master" {
				continue
			}
			if c.masterOf(t, key) == n {
				return n, time.Now()
			}
		}
		require.True(t, time.Now().Before(deadline), "no replica took over %q", key)
		time.Sleep(20 * time.Millisecond) // polling real processes
	}
}

// freeClusterPort returns a port of 127.0.0.1 that is free, as is the
// port 10,000 above it, which a cluster node listens on for its bus.
func freeClusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		l.Close()
		if err != nil {
			continue
		}
		bus.Close()
		return port
	}
	t.Fatal("no free pair of ports for a cluster node")
	return 0
}

// clusterKeyOn returns a polite key whose fleet state lives on the given
// master of c, trying key0, key1, …
func clusterKeyOn(t testing.TB, c *redisCluster, ns string, master *redisServer, prefix string) string {
	t.Helper()
	for i := range 10000 {
		key := prefix + strconv.Itoa(i)
		if c.masterOf(t, fleet.RedisKey(ns, key, "s")) == master {
			return key
		}
	}
	t.Fatalf("no key on %s", master.addr)
	return ""
}

// Four processes × 50 hosts × 4 workers, each host WithRate(10, 2) for
// the whole fleet, on a Redis Cluster of 3 masters, over which the hosts'
// state spreads: every host within its quota, and within its rate and
// burst in every second; no breaker opening. The processes are OS
// processes, each with its Fleet and its ClusterClient. A round trip
// carries calls for keys of every master (go-redis splits it by node).
func TestClusterManyKeys(t *testing.T) {
	c := startCluster(t, 3, 0)
	m := manyKeys{procs: 4, hosts: 50, workers: 4, rate: 10, burst: 2, length: 3 * time.Second}
	next, openings, reports := m.runProcs(t, c.addrs(), true)
	m.check(t, next, openings, slowest(reports))
	logTrips(t, reports)
}

// A master of a Cluster killed, its replica promoted: the fleet paces
// locally meanwhile, and is back on shared state within 2 seconds of the
// promotion, with a default go-redis ClusterClient (which would otherwise
// learn of the promotion after a minute); then a pause one process sees
// reaches another.
func TestClusterFailoverWithReplica(t *testing.T) {
	c := startCluster(t, 3, 1)
	ns := uniqueNamespace(t)
	w := newFailoverWatch(t)
	a := newFleet(t, c.client(t), fleet.WithNamespace(ns), fleet.WithOnChange(w.onChange))
	b := newFleet(t, c.client(t), fleet.WithNamespace(ns))
	master := c.nodes[0]
	key := clusterKeyOn(t, c, ns, master, "api.example/")
	r := fleetapi.Request{PerSecond: 100, Burst: 1, MaxWait: -1}
	_, err := a.Reserve(ctx, key, r)
	require.NoError(t, err)
	_, err = b.Reserve(ctx, key, r) // b listens for pauses from here on
	require.NoError(t, err)

	master.stop() // SIGKILL
	w.through(t, a, key, r, func() time.Time {
		_, at := c.promoted(t, fleet.RedisKey(ns, key, "s"), master)
		return at
	})

	// A pause a sees after the failover holds b's sends, though b has not
	// called since the master died: its client may still send the key's
	// calls to the dead master, and b falls back on its own until its
	// probe finds the promoted replica, but it heard of the pause.
	require.NoError(t, a.Pause(ctx, key, 2*time.Second, r))
	paused := time.Now()
	next := &hostCounter{}
	trB := polite.New(next, polite.WithFleet(b), polite.WithRate(100, 1),
		polite.WithKey(func(*http.Request) string { return key }))
	for range 3 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
		resp, err := trB.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	first := next.arrivals["api.example"][0]
	t.Logf("b's first send %v after the pause began", first.Sub(paused).Round(time.Millisecond))
	assert.GreaterOrEqual(t, first.Sub(paused), 1900*time.Millisecond, "b sent during the pause")
}

// A master killed with no replica: its slots go unserved (and, with
// Redis's default cluster-require-full-coverage, the whole cluster
// refuses calls). The Transports go on pacing locally: no call fails,
// and no host goes over its rate and burst.
func TestClusterMasterKilledWithoutReplica(t *testing.T) {
	c := startCluster(t, 3, 0)
	m := manyKeys{hosts: 30, workers: 4, rate: 10, burst: 2, length: 3 * time.Second}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		time.Sleep(time.Second) // the crawl runs meanwhile: real time
		c.nodes[1].stop()
	}()
	next, openings, _, _ := m.run(t, func(t testing.TB) redis.UniversalClient { return c.client(t) })
	<-killed
	inSecond, _ := m.report(t, next, openings)
	assert.LessOrEqual(t, float64(inSecond), (m.rate+float64(m.burst))*1.01+1)
	assert.Positive(t, openings, "the dead master was noticed")
	assert.Zero(t, next.failed.Load(), "calls failed")
}

// A pause one process tells the fleet reaches a process whose pause
// channel is on another node of the cluster: Redis Cluster publishes to
// every node.
func TestClusterPauseAcrossNodes(t *testing.T) {
	c := startCluster(t, 3, 0)
	ns := uniqueNamespace(t)
	a := newFleet(t, c.client(t), fleet.WithNamespace(ns))
	r := fleetapi.Request{PerSecond: 10, Burst: 1, MaxWait: -1}
	var keys []string
	for _, n := range c.nodes {
		keys = append(keys, clusterKeyOn(t, c, ns, n, "host-"))
	}
	b := newFleet(t, c.client(t), fleet.WithNamespace(ns))
	_, err := b.Reserve(ctx, keys[0], r) // b listens from its first booking
	require.NoError(t, err)
	for _, key := range keys {
		deadline := time.Now().Add(2 * time.Second)
		for b.Paused(key) == 0 { // the subscription may take a moment to start
			require.NoError(t, a.Pause(ctx, key, 3*time.Second, r))
			require.True(t, time.Now().Before(deadline), "b never heard of the pause of %s", key)
			time.Sleep(10 * time.Millisecond) // a real cluster, real time
		}
		assert.Greater(t, b.Paused(key), 2*time.Second, key)
	}
}

// redisSentinels is a Redis master and its replica watched by three
// sentinels (quorum 2), each a redis-server started for a test.
type redisSentinels struct {
	master, replica *redisServer
	sentinels       []*redisServer
}

// sentinelMaster is the name the sentinels know the master by.
const sentinelMaster = "polite"

// startSentinels starts a master, a replica in sync with it, and three
// sentinels that declare the master down after a second without answer,
// for t.
func startSentinels(t testing.TB) *redisSentinels {
	t.Helper()
	if testing.Short() {
		t.Skip("short: starts Redis, a replica and three sentinels")
	}
	s := &redisSentinels{master: startRedis(t, "--repl-diskless-sync-delay", "0")}
	_, masterPort, _ := net.SplitHostPort(s.master.addr)
	s.replica = startRedis(t, "--replicaof", "127.0.0.1", masterPort)
	deadline := time.Now().Add(20 * time.Second)
	for {
		rdb := redis.NewClient(&redis.Options{Addr: s.replica.addr})
		info, err := rdb.Info(ctx, "replication").Result()
		rdb.Close()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the replica never synced")
		time.Sleep(20 * time.Millisecond) // polling real processes
	}
	for range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(
			"sentinel monitor %s 127.0.0.1 %s 2\n"+
				"sentinel down-after-milliseconds %[1]s 1000\n"+
				"sentinel failover-timeout %[1]s 5000\n"+
				"sentinel parallel-syncs %[1]s 1\n", sentinelMaster, masterPort)), 0o600))
		s.sentinels = append(s.sentinels, startRedisConf(t, conf, "--sentinel"))
	}
	return s
}

// client returns a go-redis failover client of s with short timeouts,
// closed when t ends (after the Fleets made on it, whose cleanups run
// first). Before it is closed, a command makes sure that it holds a
// sentinel that answers: go-redis v9.22's failover client closes the
// sentinel it holds, and a dial still in flight after a failover (a
// PubSub reconnecting) could set a new one after Close, whose listening
// goroutines then outlive the test (goleak failed the package so once in
// CI, 2026-11-29). v9.23 fixes that, but needs Go 1.26 (docs/fleet.md).
func (s *redisSentinels) client(t testing.TB) *redis.Client {
	var addrs []string
	for _, n := range s.sentinels {
		addrs = append(addrs, n.addr)
	}
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sentinelMaster, SentinelAddrs: addrs,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = rdb.Ping(pctx).Err()
		_ = rdb.Close()
	})
	return rdb
}

// promoted waits, 30 seconds at most, until the sentinels name the
// replica as the master, and returns when that was first seen.
func (s *redisSentinels) promoted(t testing.TB) time.Time {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, n := range s.sentinels {
			rdb := redis.NewSentinelClient(&redis.Options{Addr: n.addr})
			addr, err := rdb.GetMasterAddrByName(ctx, sentinelMaster).Result()
			rdb.Close()
			if err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == s.replica.addr {
				return time.Now()
			}
		}
		require.True(t, time.Now().Before(deadline), "the sentinels never promoted the replica")
		time.Sleep(20 * time.Millisecond) // polling real processes
	}
}

// A Sentinel-managed Redis whose master is killed: the fleet paces on its
// own until the sentinels promote the replica, and is back on shared state
// soon after, with a default go-redis failover client.
func TestSentinelFailover(t *testing.T) {
	s := startSentinels(t)
	w := newFailoverWatch(t)
	a := newFleet(t, s.client(t), fleet.WithNamespace(uniqueNamespace(t)), fleet.WithOnChange(w.onChange))
	r := fleetapi.Request{PerSecond: 100, Burst: 1, MaxWait: -1}
	_, err := a.Reserve(ctx, "api.example", r)
	require.NoError(t, err)

	s.master.stop() // SIGKILL
	w.through(t, a, "api.example", r, func() time.Time { return s.promoted(t) })
}

// failoverWatch follows a Fleet through a failover: when it paced on
// shared state again.
type failoverWatch struct {
	t    testing.TB
	mu   sync.Mutex
	back time.Time
}

func newFailoverWatch(t testing.TB) *failoverWatch { return &failoverWatch{t: t} }

// onChange is the Fleet's WithOnChange.
func (w *failoverWatch) onChange(ok bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok {
		w.back = time.Now()
	} else {
		w.t.Logf("pacing locally: %v", err)
	}
}

// through books key on f, 100 a second, from the master's death until f
// paces on shared state again (20 s at most), while promoted waits for
// the replica's promotion and returns when it saw it; it asserts that f
// was back within 2 seconds of the promotion and that no booking failed
// otherwise than for Redis.
func (w *failoverWatch) through(t *testing.T, f *fleet.Fleet, key string, r fleetapi.Request, promoted func() time.Time) {
	t.Helper()
	killed := time.Now()
	done := make(chan struct{})
	var failedCalls atomic.Int64
	go func() {
		defer close(done)
		for time.Since(killed) < 20*time.Second {
			if _, err := f.Reserve(ctx, key, r); err != nil && !errors.Is(err, fleet.ErrUnavailable) {
				failedCalls.Add(1)
			}
			w.mu.Lock()
			ok := !w.back.IsZero()
			w.mu.Unlock()
			if ok && f.Available() {
				return
			}
			time.Sleep(10 * time.Millisecond) // a real Redis, real time
		}
	}()
	promotedAt := promoted()
	<-done
	w.mu.Lock()
	recovered := w.back
	w.mu.Unlock()
	require.False(t, recovered.IsZero(), "never paced on shared state again")
	t.Logf("master killed; replica promoted %v later; shared again %v after the promotion",
		promotedAt.Sub(killed).Round(time.Millisecond), recovered.Sub(promotedAt).Round(time.Millisecond))
	assert.LessOrEqual(t, recovered.Sub(promotedAt), 2*time.Second, "back on shared state within 2 s of the promotion")
	assert.Zero(t, failedCalls.Load())
}
