package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
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

// hostCounter is an in-memory next that answers 200 at once and counts
// the arrivals of every host, as a crawler's many servers would see them.
type hostCounter struct {
	mu       sync.Mutex
	arrivals map[string][]time.Time
	failed   atomic.Int64 // calls that ended in an error, counted by the callers
}

func (h *hostCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	h.mu.Lock()
	if h.arrivals == nil {
		h.arrivals = make(map[string][]time.Time)
	}
	h.arrivals[req.URL.Host] = append(h.arrivals[req.URL.Host], now)
	h.mu.Unlock()
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// worst returns, over every host, the most arrivals in any interval of w
// and the most arrivals in all, with the host of each.
func (h *hostCounter) worst(w time.Duration) (inW int, inWHost string, total int, totalHost string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for host, at := range h.arrivals {
		at := slices.Clone(at)
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		lo := 0
		for hi := range at {
			for at[hi].Sub(at[lo]) >= w {
				lo++
			}
			if n := hi - lo + 1; n > inW {
				inW, inWHost = n, host
			}
		}
		if len(at) > total {
			total, totalHost = len(at), host
		}
	}
	return inW, inWHost, total, totalHost
}

// requests returns how many requests arrived.
func (h *hostCounter) requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, at := range h.arrivals {
		n += len(at)
	}
	return n
}

// hosts returns how many hosts were called.
func (h *hostCounter) hosts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.arrivals)
}

// manyKeys is a crawler's run: procs processes (each a Transport
// WithFleet and WithRate(rate, burst), with a Fleet and a Redis client of
// its own, as a process of a fleet has), each calling hosts × workers
// (each worker one host, in a loop), for length. run returns what the
// hosts saw, the breakers' openings, the durations of the reserve calls
// and the fleets.
type manyKeys struct {
	procs          int // 1 if 0
	hosts, workers int
	rate           float64
	burst          int
	length         time.Duration
}

func (m manyKeys) run(t *testing.T, client func(testing.TB) redis.UniversalClient) (*hostCounter, int64, []time.Duration, []*fleet.Fleet) {
	t.Helper()
	var openings atomic.Int64
	var mu sync.Mutex
	var took []time.Duration
	ns := uniqueNamespace(t)
	next := &hostCounter{}
	var fleets []*fleet.Fleet
	var trs []*polite.Transport
	for p := range max(m.procs, 1) {
		// The fleet's size is known, as a deployment knows it: a process
		// that falls back before Redis has told it of the others paces at
		// its share, not at the whole rate (see fleet.WithSize). Under the
		// race detector, which slows every process here several times
		// over on 2 cores, Redis's answers take longer than the default
		// timeout allows a healthy Redis (CI runs this package again
		// without it, at the default).
		timeout := fleet.DefaultTimeout
		if raceDetector {
			timeout = 5 * fleet.DefaultTimeout
		}
		f := newFleet(t, client(t), fleet.WithNamespace(ns), fleet.WithMember(fmt.Sprint("p", p)), fleet.WithSize(max(m.procs, 1)),
			fleet.WithTimeout(timeout),
			fleet.WithOnChange(func(ok bool, err error) {
				if !ok {
					openings.Add(1)
					t.Logf("p%d: breaker opened: %v", p, err)
				}
			}))
		f.Observe(fleet.Observer{OnCall: func(op string, d time.Duration, err error) {
			if op == "reserve" && err == nil {
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		}})
		warm(t, f)
		fleets = append(fleets, f)
		trs = append(trs, polite.New(next, polite.WithFleet(f), polite.WithRate(m.rate, m.burst)))
	}
	stop := time.Now().Add(m.length)
	var wg sync.WaitGroup
	for _, tr := range trs {
		wg.Go(func() { crawl(tr, next, m.hosts, m.workers, stop, func(error) {}) })
	}
	wg.Wait()
	return next, openings.Load(), took, fleets
}

// crawl calls hosts × workers through tr until stop (each worker one
// host, in a loop), counting the failed calls in next and handing each
// error to failed.
func crawl(tr http.RoundTripper, next *hostCounter, hosts, workers int, stop time.Time, failed func(error)) {
	var wg sync.WaitGroup
	for h := range hosts {
		url := fmt.Sprintf("http://h%d.test/", h)
		for range workers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					// Each call with a deadline of its own, as a crawler's
					// callers set one: the run's end is no deadline.
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
					resp, err := tr.RoundTrip(req)
					if err == nil {
						resp.Body.Close()
					} else {
						next.failed.Add(1)
						failed(err)
					}
					cancel()
				}
			})
		}
	}
	wg.Wait()
}

// check asserts what a crawler's fleet must hold: every host at most its
// rate and burst in any second, and its quota over the run, give or take
// 1%, and the sends that the slowest answer to a booking (late) can have
// moved into one interval; no breaker opening while Redis is healthy.
//
// A process sends at the instant Redis booked counted from the answer's
// arrival, never before it (counted from the call, a send would go early
// by as much as the answer took, and over the quota): an answer that
// comes late moves its send late by as much, into the next interval,
// beside that interval's own sends. On 2 cores shared by four race-built
// processes of 200 workers, Redis and the test, the slowest answer of a
// run took 138–215 ms (8 runs), and a host's busiest 3 s held 32–33 of a
// quota of 32 (34 in a CI run, over the bound before it counted this);
// built without the race detector, 39–66 ms and 32.
func (m manyKeys) check(t *testing.T, next *hostCounter, openings int64, late time.Duration) {
	t.Helper()
	inSecond, total := m.report(t, next, openings)
	quota := float64(m.burst) + m.rate*m.length.Seconds()
	moved := m.rate * late.Seconds()
	t.Logf("the slowest answer to a booking %v: up to %.1f sends moved into an interval", late.Round(time.Millisecond), moved)
	assert.LessOrEqual(t, float64(inSecond), (m.rate+float64(m.burst))*1.01+1+moved, "a host over its rate and burst in a second")
	assert.LessOrEqual(t, float64(total), quota*1.01+1+moved, "a host over its quota")
	assert.Zero(t, openings, "the breaker opened while Redis was healthy")
	assert.Zero(t, next.failed.Load(), "calls failed")
}

// report logs what the hosts saw, and returns the most arrivals of a host
// in a second and in the run's length.
func (m manyKeys) report(t *testing.T, next *hostCounter, openings int64) (inSecond, total int) {
	t.Helper()
	require.Equal(t, m.hosts, next.hosts(), "every host was called")
	inSecond, host1, _, _ := next.worst(time.Second)
	// The calls under way at the run's end still go, at their slots: the
	// quota holds over any interval of the run's length.
	total, host2, _, _ := next.worst(m.length)
	quota := float64(m.burst) + m.rate*m.length.Seconds()
	t.Logf("%d processes × %d hosts × %d workers, WithRate(%v, %d), %v: the busiest second of a host %d (%s), the busiest %v of a host %d (%s) of a quota of %.0f; %d breaker openings, %d calls failed",
		max(m.procs, 1), m.hosts, m.workers, m.rate, m.burst, m.length, inSecond, host1, m.length, total, host2, quota, openings, next.failed.Load())
	return inSecond, total
}

// singleRedis returns a function that makes clients of one redis-server
// started for t.
func singleRedis(t *testing.T) func(testing.TB) redis.UniversalClient {
	addr := startRedis(t).addr
	return func(t testing.TB) redis.UniversalClient { return newClient(t, addr) }
}

// A crawler's width on one process: 1,000 hosts × 4 workers, each host
// WithRate(10, 2), on a single Redis. Bookings for many keys share round
// trips: at most one a request, and several calls a round trip; the p99
// of a booking is logged. (At that width, on 2 cores shared with Redis,
// the process itself is the bottleneck: a round trip now and then outlives
// the timeout, and the key falls back for a moment; the quotas are held
// by the four processes × 50 hosts below.) Under the race detector, which
// slows the process ten times over, a quarter of the hosts.
func TestManyKeysShareRoundTrips(t *testing.T) {
	m := manyKeys{hosts: 1000, workers: 4, rate: 10, burst: 2, length: 2 * time.Second}
	if raceDetector {
		m.hosts = 250
	}
	next, openings, took, fleets := m.run(t, singleRedis(t))
	m.report(t, next, openings)
	trips, calls := fleet.RoundTrips(fleets[0])
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	t.Logf("%d requests; %d script calls (%d bookings answered) in %d round trips (%.2f calls a trip); booking latency p50 %v, p99 %v",
		next.requests(), calls, len(took), trips, float64(calls)/float64(trips), p50.Round(time.Microsecond), p99.Round(time.Microsecond))
	assert.LessOrEqual(t, trips, int64(next.requests()), "at most one round trip a request")
	assert.Greater(t, float64(calls)/float64(trips), 2.0, "round trips shared by the calls of many keys")
}

// Four processes × 50 hosts × 4 workers, each host WithRate(10, 2) for the
// whole fleet, on a single Redis: every host within its quota, and within
// its rate and burst in every second, its first included; no breaker
// opening. The processes are OS processes, each with its Fleet and its
// Redis client, as a crawler's fleet runs.
func TestManyKeysKeepEachQuota(t *testing.T) {
	m := manyKeys{procs: 4, hosts: 50, workers: 4, rate: 10, burst: 2, length: 3 * time.Second}
	next, openings, reports := m.runProcs(t, []string{startRedis(t).addr}, false)
	m.check(t, next, openings, slowest(reports))
	logTrips(t, reports)
}

// logTrips logs the round trips the processes of a many-key run made to
// Redis and the script calls they carried, and checks that no process
// made more round trips than calls.
func logTrips(t *testing.T, reports []manyKeysReport) {
	t.Helper()
	for p, r := range reports {
		t.Logf("p%d: %d script calls in %d round trips (%.2f a trip)", p, r.Calls, r.Trips, float64(r.Calls)/float64(max(r.Trips, 1)))
		assert.LessOrEqual(t, r.Trips, r.Calls, "p%d: more round trips than calls", p)
	}
}

// 50 concurrent bookings for 50 keys all succeed: none is refused for
// their number.
func TestConcurrentBookingsQueue(t *testing.T) {
	f := newFleet(t, newClient(t, startRedis(t).addr), fleet.WithNamespace(uniqueNamespace(t)))
	warm(t, f)
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = f.Reserve(ctx, fmt.Sprintf("k%d", i), fleetapi.Request{PerSecond: 10, Burst: 2, MaxWait: -1})
		})
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, i)
	}
	assert.True(t, f.Available())
}

// manyKeysReport is what a process of a many-key run prints: the
// arrivals it made at each host (Unix nanoseconds; the processes share the
// machine's clock), its breaker's openings, its failed calls, and its round
// trips to Redis.
type manyKeysReport struct {
	Arrivals    map[string][]int64
	Openings    int64
	Failed      int64
	FirstError  string `json:",omitempty"`
	Trips       int64
	Calls       int64
	LateStartMs int64 // how late the process began against the run's start
	SlowestNs   int64 // the slowest answer to a booking, in nanoseconds
}

// slowest returns the slowest answer to a booking of any process in
// reports.
func slowest(reports []manyKeysReport) time.Duration {
	var d int64
	for _, r := range reports {
		d = max(d, r.SlowestNs)
	}
	return time.Duration(d)
}

// runProcs is run with each process of the fleet an OS process of its
// own (the test binary, started with POLITE_MANYKEYS_CHILD=1), on the
// Redis at addrs: a Cluster if cluster is set. It returns what the hosts
// saw, the breakers' openings, and the processes' reports.
func (m manyKeys) runProcs(t *testing.T, addrs []string, cluster bool) (*hostCounter, int64, []manyKeysReport) {
	t.Helper()
	ns := uniqueNamespace(t)
	// Four OS processes of 200 workers each, Redis (or a Cluster's three
	// masters) and the test share 2 cores: a process descheduled for tens
	// of milliseconds outlives the default timeout now and then, with
	// Redis healthy (3 breaker openings in a CI run, none in the same
	// test alone). What these runs show is each host's quota held across
	// processes, so they allow what such a machine meets (run, in one
	// process, keeps the default). Under the race detector, which slows
	// each of them several times over, 250 ms was outlived once in three
	// runs of the Cluster's tests (one opening, Redis healthy).
	timeout := 5 * fleet.DefaultTimeout
	if raceDetector {
		timeout = 20 * fleet.DefaultTimeout
	}
	// The processes start, dial Redis and load its scripts, then begin
	// together at start.
	start := time.Now().Add(3 * time.Second)
	procs := max(m.procs, 1)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for p := range procs {
		cmd := exec.Command(os.Args[0]) // TestMain runs it as a process of the fleet
		cmd.Env = append(os.Environ(),
			"POLITE_MANYKEYS_CHILD=1",
			"POLITE_MANYKEYS_ADDRS="+strings.Join(addrs, ","),
			"POLITE_MANYKEYS_CLUSTER="+strconv.FormatBool(cluster),
			"POLITE_MANYKEYS_NS="+ns,
			"POLITE_MANYKEYS_MEMBER=p"+strconv.Itoa(p),
			"POLITE_MANYKEYS_SIZE="+strconv.Itoa(procs),
			"POLITE_MANYKEYS_HOSTS="+strconv.Itoa(m.hosts),
			"POLITE_MANYKEYS_WORKERS="+strconv.Itoa(m.workers),
			fmt.Sprintf("POLITE_MANYKEYS_RATE=%v", m.rate),
			"POLITE_MANYKEYS_BURST="+strconv.Itoa(m.burst),
			"POLITE_MANYKEYS_LENGTH="+m.length.String(),
			"POLITE_MANYKEYS_TIMEOUT="+timeout.String(),
			"POLITE_MANYKEYS_START="+strconv.FormatInt(start.UnixNano(), 10))
		out := &bytes.Buffer{}
		cmd.Stdout = out
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	next := &hostCounter{arrivals: make(map[string][]time.Time)}
	var openings int64
	var reports []manyKeysReport
	for p, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "process %d", p)
		line, ok := strings.CutPrefix(strings.TrimSpace(outs[p].String()), "MANYKEYS ")
		require.True(t, ok, "process %d printed no report: %q", p, outs[p].String())
		var r manyKeysReport
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		for host, at := range r.Arrivals {
			for _, ns := range at {
				next.arrivals[host] = append(next.arrivals[host], time.Unix(0, ns))
			}
		}
		openings += r.Openings
		next.failed.Add(r.Failed)
		if r.FirstError != "" {
			t.Logf("p%d: first failed call: %s", p, r.FirstError)
		}
		assert.Less(t, r.LateStartMs, int64(1000), "process %d began late: the processes did not run together", p)
		reports = append(reports, r)
	}
	return next, openings, reports
}

// manyKeysChild is a process of a many-key run (see runProcs): a crawler's
// Transport on a Fleet of its own, calling hosts × workers for the run's
// length from its start, which prints its report.
func manyKeysChild() {
	env := func(k string) string { return os.Getenv("POLITE_MANYKEYS_" + k) }
	addrs := strings.Split(env("ADDRS"), ",")
	var rdb redis.UniversalClient
	if env("CLUSTER") == "true" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: addrs[0], DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	defer rdb.Close()
	size, _ := strconv.Atoi(env("SIZE"))
	hosts, _ := strconv.Atoi(env("HOSTS"))
	workers, _ := strconv.Atoi(env("WORKERS"))
	perSecond, _ := strconv.ParseFloat(env("RATE"), 64)
	burst, _ := strconv.Atoi(env("BURST"))
	length, _ := time.ParseDuration(env("LENGTH"))
	timeout, _ := time.ParseDuration(env("TIMEOUT"))
	startNs, _ := strconv.ParseInt(env("START"), 10, 64)
	member := env("MEMBER")

	var openings atomic.Int64
	f := fleet.New(rdb, fleet.WithNamespace(env("NS")), fleet.WithMember(member), fleet.WithSize(size), fleet.WithTimeout(timeout),
		fleet.WithOnChange(func(ok bool, err error) {
			if !ok {
				openings.Add(1)
				fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), member, "breaker opened:", err)
			}
		}))
	defer f.Close()
	var slowestNs atomic.Int64
	f.Observe(fleet.Observer{OnCall: func(op string, d time.Duration, err error) {
		if op == "reserve" && err == nil {
			for cur := slowestNs.Load(); int64(d) > cur && !slowestNs.CompareAndSwap(cur, int64(d)); cur = slowestNs.Load() {
			}
		}
	}})
	// Dial Redis and load the scripts before the run, as warm does.
	if _, err := f.Reserve(context.Background(), "warm-up", fleetapi.Request{PerSecond: 1, Burst: 1, MaxWait: -1}); err != nil {
		fmt.Fprintln(os.Stderr, member, "warm-up:", err)
		os.Exit(1)
	}
	next := &hostCounter{}
	tr := polite.New(next, polite.WithFleet(f), polite.WithRate(perSecond, burst))
	start := time.Unix(0, startNs)
	time.Sleep(time.Until(start)) // the processes begin together: real time
	late := time.Since(start)
	stop := start.Add(length)
	var firstErr atomic.Value
	crawl(tr, next, hosts, workers, stop, func(err error) { firstErr.CompareAndSwap(nil, err.Error()) })
	r := manyKeysReport{Arrivals: make(map[string][]int64), Openings: openings.Load(), Failed: next.failed.Load(), LateStartMs: late.Milliseconds(), SlowestNs: slowestNs.Load()}
	if s, ok := firstErr.Load().(string); ok {
		r.FirstError = s
	}
	next.mu.Lock()
	for host, at := range next.arrivals {
		for _, a := range at {
			r.Arrivals[host] = append(r.Arrivals[host], a.UnixNano())
		}
	}
	next.mu.Unlock()
	r.Trips, r.Calls = fleet.RoundTrips(f)
	out, _ := json.Marshal(r)
	fmt.Println("MANYKEYS " + string(out))
}
