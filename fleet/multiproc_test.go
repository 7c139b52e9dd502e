package fleet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
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

// limitServer enforces limit requests a second with a GCRA of burst (a
// token bucket full at first), as the bench's synthetic server does: 429
// with Retry-After in whole seconds, at least 1. It logs every arrival.
// pauseAt > 0 makes it answer its pauseAt-th request with a 429 and
// "Retry-After: 2" instead.
type limitServer struct {
	limit, burst float64
	pauseAt      int64
	headers      bool // it states its limit as tollbooth does
	fixed        bool // it counts limit requests in windows of a second from its first arrival instead, and states them as ulule/limiter does
	counting     bool // it counts every request, refused or not, over a sliding second as HAProxy's http_req_rate(1s) does, and refuses above limit, with no Retry-After
	status       int  // if set, every request is answered with it instead: an outage

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	start    time.Time // the first window's start, if fixed
	count    int       // the current window's count, if fixed
	end      time.Time // its end
	prev     int       // the count of the window before, if counting
	arrivals []time.Time
	refused  []bool
	paused   time.Time    // when it answered the pausing 429
	down     [2]time.Time // when Redis was stopped and started again, if it was
	killed   time.Time    // when a process was killed, if one was
	joined   time.Time    // when the process that joins late started, if one did
	n        atomic.Int64
}

func (s *limitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	n := s.n.Add(1)
	s.mu.Lock()
	if s.last.IsZero() {
		s.tokens = s.burst
	} else {
		s.tokens = math.Min(s.burst, s.tokens+now.Sub(s.last).Seconds()*s.limit)
	}
	s.last = now
	ok := s.tokens >= 1
	if ok {
		s.tokens--
	}
	if s.fixed {
		if now.After(s.end) || now.Equal(s.end) {
			s.count, s.end = 0, now.Add(time.Second)
		}
		ok = s.count < int(s.limit)
		if ok {
			s.count++
		}
	}
	if s.counting {
		// HAProxy's estimate of the rate over the last second: this
		// period's requests, and the last one's in proportion to what
		// of it the second still covers; a refused request counts too.
		if s.end.IsZero() {
			s.end = now.Add(time.Second)
		}
		for !now.Before(s.end) {
			s.prev, s.count = s.count, 0
			if now.Sub(s.end) >= time.Second {
				s.prev = 0
			}
			s.end = s.end.Add(time.Second)
		}
		s.count++
		left := s.end.Sub(now).Seconds()
		ok = float64(s.count)+float64(s.prev)*left <= s.limit
	}
	remaining, end := int(s.limit)-s.count, s.end
	if n == s.pauseAt {
		ok, s.paused = false, now
	}
	s.arrivals = append(s.arrivals, now)
	s.refused = append(s.refused, !ok)
	wait := (1 - s.tokens) / s.limit
	tokens := s.tokens
	s.mu.Unlock()
	if s.fixed {
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(int(s.limit)))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(float64(end.UnixNano())/1e9)), 10))
		if !ok {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
	}
	if s.headers {
		h := w.Header()
		h.Set("X-Rate-Limit-Limit", strconv.FormatFloat(s.limit, 'f', 2, 64))
		h.Set("X-Rate-Limit-Duration", "1")
		h.Set("RateLimit-Limit", strconv.Itoa(int(s.limit)))
		h.Set("RateLimit-Remaining", strconv.Itoa(int(tokens)))
		h.Set("RateLimit-Reset", "1")
	}
	switch {
	case s.status != 0:
		w.WriteHeader(s.status)
	case n == s.pauseAt:
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
	case !ok && s.counting:
		w.WriteHeader(http.StatusTooManyRequests)
	case !ok:
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait)))))
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// share returns what the server accepted in the length of a run from its
// first arrival over what it allows in that time (its burst, then limit a
// second). The processes start a little apart, and calls booked before
// the end may arrive after it: those are left out.
func (s *limitServer) share(length time.Duration) float64 {
	s.mu.Lock()
	first := s.arrivals[0]
	s.mu.Unlock()
	ok, _ := s.counts(first, first.Add(length))
	return float64(ok) / (s.burst + s.limit*length.Seconds())
}

// perSecond returns the requests accepted in each second from the first
// arrival.
func (s *limitServer) perSecond() []int { return s.bySecond(false) }

// bySecond returns the requests accepted (or refused) in each second from
// the first arrival.
func (s *limitServer) bySecond(refused bool) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, at := range s.arrivals {
		k := int(at.Sub(s.arrivals[0]) / time.Second)
		for len(out) <= k {
			out = append(out, 0)
		}
		if s.refused[i] == refused {
			out[k]++
		}
	}
	return out
}

// counts returns the requests accepted and refused in [from, to).
func (s *limitServer) counts(from, to time.Time) (ok, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, at := range s.arrivals {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		if s.refused[i] {
			refused++
		} else {
			ok++
		}
	}
	return ok, refused
}

// maxIn returns the most arrivals in any interval of length w.
func (s *limitServer) maxIn(w time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := slices.Clone(s.arrivals)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most, lo := 0, 0
	for hi := range at {
		for at[hi].Sub(at[lo]) >= w {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// childReport is what a child process prints: its calls and how they
// ended.
type childReport struct {
	Calls, OK, Refused, Errors int
	FirstError                 string        `json:",omitempty"`
	RefusedAt                  []int64       `json:",omitempty"` // when its first 100 refusals came, in ms after it started
	Each                       []childReport `json:"-"`          // of a run's total: each process's, in order
}

// fleetRun is one multi-process run.
type fleetRun struct {
	procs, workers int
	limit          float64 // the server's limit, requests a second
	configured     bool    // each process is configured WithRate(limit, burst); else it learns
	length         time.Duration
	pauseAt        int64
	down           [2]time.Duration // Redis stopped from down[0] after the start until down[1]; none if zero
	window         fleetapi.Window  // each process is configured WithWindow(window.N, window.Per), if set
	kill           time.Duration    // the first process is killed (SIGKILL) this long after the start, if set
	headers        bool             // the server states its limit in headers
	fixed          bool             // the server counts in fixed windows of a second, and states them (limitServer.fixed)
	counting       bool             // the server counts refusals too, as HAProxy does (limitServer.counting)
	shared         bool             // the fleet shares a controller (fleet.WithSharedController)
	steady         time.Duration    // reportRun also reports the run from this long after its start
	status         int              // the server answers every request with this status, if set
	budget         int              // the processes retry, from a budget of this capacity they share, if set
	join           time.Duration    // the last process starts this long after the others, and runs until they end, if set
}

// run starts a server and a Redis, then the processes, and returns the
// server and the calls the processes made and the Redis script calls.
func (fr fleetRun) run(t testing.TB) (*limitServer, childReport, int64) {
	t.Helper()
	// The server's burst is 10, or 10ms of its rate if that is more (20
	// at 2,000 a second): the clients' burst is 10, and the margin
	// absorbs the jitter of arrivals on a busy machine.
	srv := &limitServer{limit: fr.limit, burst: max(10, fr.limit/100), pauseAt: fr.pauseAt, headers: fr.headers, fixed: fr.fixed, counting: fr.counting, status: fr.status}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	redisSrv := startRedis(t)
	rdb := newClient(t, redisSrv.addr)
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())

	var cmds []*exec.Cmd
	var outs []*bufio.Scanner
	for i := range fr.procs {
		length := fr.length
		if fr.join > 0 && i == fr.procs-1 {
			time.Sleep(fr.join) // the others run meanwhile: real time
			length -= fr.join
			srv.mu.Lock()
			srv.joined = time.Now()
			srv.mu.Unlock()
		}
		cmd := exec.Command(os.Args[0]) // TestMain runs it as a process of the fleet
		cmd.Env = append(os.Environ(),
			"POLITE_FLEET_CHILD=1",
			"POLITE_FLEET_URL="+hs.URL,
			"POLITE_FLEET_REDIS="+redisSrv.addr,
			"POLITE_FLEET_MEMBER=p"+strconv.Itoa(i),
			fmt.Sprintf("POLITE_FLEET_RATE=%v", map[bool]float64{true: fr.limit}[fr.configured]),
			"POLITE_FLEET_WORKERS="+strconv.Itoa(fr.workers),
			"POLITE_FLEET_SIZE="+strconv.Itoa(fr.procs),
			"POLITE_FLEET_SHARED="+strconv.FormatBool(fr.shared),
			fmt.Sprintf("POLITE_FLEET_WINDOW=%d/%v", fr.window.N, fr.window.Per),
			"POLITE_FLEET_LENGTH="+length.String(),
			"POLITE_FLEET_BUDGET="+strconv.Itoa(fr.budget))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
		outs = append(outs, bufio.NewScanner(out))
	}
	if fr.kill > 0 {
		time.Sleep(fr.kill) // the processes run meanwhile: real time
		require.NoError(t, cmds[0].Process.Kill())
		srv.mu.Lock()
		srv.killed = time.Now()
		srv.mu.Unlock()
	}
	if fr.down[1] > 0 {
		time.Sleep(fr.down[0]) // the processes run meanwhile: real time
		redisSrv.stop()
		srv.mu.Lock()
		srv.down[0] = time.Now()
		srv.mu.Unlock()
		time.Sleep(fr.down[1] - fr.down[0])
		redisSrv.restart(t)
		srv.mu.Lock()
		srv.down[1] = time.Now()
		srv.mu.Unlock()
		rdb = newClient(t, redisSrv.addr)
	}
	var total childReport
	for i, cmd := range cmds {
		var got bool
		for outs[i].Scan() {
			line := outs[i].Text()
			if rest, ok := strings.CutPrefix(line, "REPORT "); ok {
				var r childReport
				require.NoError(t, json.Unmarshal([]byte(rest), &r))
				total.Calls, total.OK, total.Refused, total.Errors = total.Calls+r.Calls, total.OK+r.OK, total.Refused+r.Refused, total.Errors+r.Errors
				total.Each = append(total.Each, r)
				got = true
				if total.FirstError == "" {
					total.FirstError = r.FirstError
				}
			}
		}
		if fr.kill > 0 && i == 0 {
			_ = cmd.Wait() // killed
			continue
		}
		require.NoError(t, cmd.Wait())
		require.True(t, got, "process %d reported nothing", i)
	}
	return srv, total, scriptCalls(t, rdb)
}

// scriptCalls returns the script calls Redis served since its stats were
// reset: EVALSHA, and EVAL after a NOSCRIPT.
func scriptCalls(t testing.TB, rdb *redis.Client) int64 {
	info, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var calls int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				for _, field := range strings.Split(rest, ",") {
					if v, ok := strings.CutPrefix(field, "calls="); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						calls += n
					}
				}
			}
		}
	}
	return calls
}

// fleetChild is a process of a multi-process run, which the run starts as
// the test binary with POLITE_FLEET_CHILD=1 (see TestMain): it sends
// requests for the run's length and prints its report.
func fleetChild() {
	url := os.Getenv("POLITE_FLEET_URL")
	perSecond, _ := strconv.ParseFloat(os.Getenv("POLITE_FLEET_RATE"), 64)
	workers, _ := strconv.Atoi(os.Getenv("POLITE_FLEET_WORKERS"))
	length, _ := time.ParseDuration(os.Getenv("POLITE_FLEET_LENGTH"))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("POLITE_FLEET_REDIS"), PoolSize: 2 * workers})
	defer rdb.Close()
	size, _ := strconv.Atoi(os.Getenv("POLITE_FLEET_SIZE"))
	lease := fleet.DefaultLease
	if d, err := time.ParseDuration(os.Getenv("POLITE_FLEET_LEASE")); err == nil {
		lease = d
	}
	f := fleet.New(rdb, fleet.WithMember(os.Getenv("POLITE_FLEET_MEMBER")), fleet.WithSize(size), fleet.WithLease(lease),
		fleet.WithSharedController(os.Getenv("POLITE_FLEET_SHARED") == "true"), fleet.WithOnChange(func(ok bool, err error) {
			fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), os.Getenv("POLITE_FLEET_MEMBER"), "fleet available:", ok, err)
		}))
	defer f.Close()
	opts := []polite.Option{polite.WithFleet(f), polite.WithMaxAttempts(1)}
	if capacity, _ := strconv.Atoi(os.Getenv("POLITE_FLEET_BUDGET")); capacity > 0 {
		opts = append(opts, polite.WithMaxAttempts(3), polite.WithRetryBudget(f.RetryBudget("api", capacity)))
	}
	if perSecond > 0 {
		opts = append(opts, polite.WithRate(perSecond, 10))
	}
	if n, per, ok := strings.Cut(os.Getenv("POLITE_FLEET_WINDOW"), "/"); ok && n != "0" {
		count, _ := strconv.Atoi(n)
		length, _ := time.ParseDuration(per)
		opts = append(opts, polite.WithWindow(count, length))
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = workers
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: polite.New(base, opts...)}
	var report childReport
	var mu sync.Mutex
	var wg sync.WaitGroup
	started := time.Now()
	stop := started.Add(length)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
				resp, err := client.Do(req)
				mu.Lock()
				report.Calls++
				switch {
				case err != nil:
					report.Errors++
					if report.FirstError == "" {
						report.FirstError = err.Error()
					}
				case resp.StatusCode == http.StatusTooManyRequests:
					report.Refused++
					if len(report.RefusedAt) < 100 {
						report.RefusedAt = append(report.RefusedAt, time.Since(started).Milliseconds())
					}
				default:
					report.OK++
				}
				mu.Unlock()
				if err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	out, _ := json.Marshal(report)
	fmt.Println("REPORT " + string(out))
}

// Four processes, each configured WithRate(L, 10), share one Redis: together
// they deliver at least 95% of L with at most 1% refused, at most 1% more
// than L and the server's burst in any second at the server, at one Redis
// round trip per request at L = 100, and a tenth of one with leases at L =
// 2,000.
func TestFleetOfProcessesKeepsToOneQuota(t *testing.T) {
	for _, limit := range []float64{100, 2000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			fr := fleetRun{procs: 4, workers: 4, limit: limit, configured: true, length: 4 * time.Second}
			srv, rep, calls := fr.run(t)
			ok, refused := srv.counts(time.Time{}, time.Now())
			attempts := ok + refused
			share := srv.share(fr.length)
			t.Logf("L=%v, 4 processes: %.3f of L, %d refused of %d attempts, %.2f script calls per attempt, max in 1s %d; accepted per second %v; processes: %+v",
				limit, share, refused, attempts, float64(calls)/float64(attempts), srv.maxIn(time.Second), srv.perSecond(), rep)
			least, most := floors(limit, 0.95, 0.01)
			assert.GreaterOrEqual(t, share, least)
			assert.LessOrEqual(t, float64(refused), most*float64(attempts))
			// At the server, arrivals jitter around the booked instants:
			// at most 1% over the GCRA's b + L in any second.
			assert.LessOrEqual(t, float64(srv.maxIn(time.Second)), (1+most)*(limit+srv.burst))
			// One script call per attempt, and one more for each of the
			// first calls of a process, made at once, whose EVALSHA finds
			// no script: it is sent again with EVAL. From 200 a second,
			// leases book 50ms of the rate, shared among the processes,
			// per call: at most a tenth of a call per attempt.
			if limit < 200 {
				assert.LessOrEqual(t, calls, int64(attempts+fr.procs*fr.workers))
			} else {
				assert.LessOrEqual(t, float64(calls)/float64(attempts), 0.1)
			}
			assert.Zero(t, rep.Errors)
		})
	}
}

// One process gets a 429 with Retry-After: 2; no process sends to the key
// until it ends: the pause is booked in Redis and published, and the
// sends booked before it, asleep until their slot, hear of it and hold.
// Only requests already on the wire when the 429 was answered may arrive
// in its first 20ms. The sends after it resume spaced, not in a burst.
func TestFleetSharesARetryAfter(t *testing.T) {
	fr := fleetRun{procs: 4, workers: 4, limit: 100, configured: true, length: 5 * time.Second, pauseAt: 150}
	srv, rep, _ := fr.run(t)
	require.False(t, srv.paused.IsZero(), "the server paused no one")
	p := srv.paused
	wire, _ := srv.counts(p.Add(time.Nanosecond), p.Add(20*time.Millisecond))
	during, refusedDuring := srv.counts(p.Add(20*time.Millisecond), p.Add(2*time.Second-5*time.Millisecond))
	after, _ := srv.counts(p.Add(2*time.Second-5*time.Millisecond), p.Add(2*time.Second+100*time.Millisecond))
	t.Logf("after the 429: %d arrivals in its first 20ms, %d during the rest of the pause, %d in the 100ms after it; processes: %+v",
		wire, during+refusedDuring, after, rep)
	assert.Zero(t, during+refusedDuring, "a process sent during the pause")
	assert.LessOrEqual(t, wire, 2)
	assert.LessOrEqual(t, after, 12, "no burst after the pause: 100 a second, and one more at its end")
}

// Redis stopped for 5 seconds mid-run, then started again on its port:
// no call fails or hangs, the fleet paces meanwhile at L split over its
// configured size (within 10% of L), and it is back on shared state
// within a second of Redis's return.
func TestFleetFailsOpen(t *testing.T) {
	fr := fleetRun{procs: 4, workers: 4, limit: 100, configured: true, length: 9 * time.Second,
		down: [2]time.Duration{2 * time.Second, 7 * time.Second}}
	srv, rep, calls := fr.run(t)
	down, up := srv.down[0], srv.down[1]
	// The rate while Redis was down, leaving out the first 100ms (calls
	// waiting on Redis when it went) and the time to restart it.
	from, to := down.Add(100*time.Millisecond), up.Add(-100*time.Millisecond)
	ok, refused := srv.counts(from, to)
	rate := float64(ok+refused) / to.Sub(from).Seconds()
	t.Logf("Redis stopped at %s, ready again at %s", down.Format("15:04:05.000"), up.Format("15:04:05.000"))
	t.Logf("Redis down %v: %.1f requests a second at the server (L = %v), %d refused; after it returned: %d script calls; processes: %+v",
		up.Sub(down).Round(time.Millisecond), rate, fr.limit, refused, calls, rep)
	srv.mu.Lock()
	var bins [60]int
	for _, at := range srv.arrivals {
		if k := int(at.Sub(down) / (100 * time.Millisecond)); k >= 0 && k < len(bins) {
			bins[k]++
		}
	}
	srv.mu.Unlock()
	t.Logf("arrivals per 100ms from Redis's stop: %v", bins)
	assert.Zero(t, rep.Errors, "a call failed")
	assert.InDelta(t, fr.limit, rate, 0.1*fr.limit)
	// Back on shared state: Redis served script calls again, as many as
	// the requests sent after it returned, less the first second.
	okAfter, refusedAfter := srv.counts(up.Add(time.Second), time.Now().Add(time.Hour))
	assert.GreaterOrEqual(t, calls, int64(okAfter+refusedAfter), "the processes went back to Redis")
}

// Four processes configured WithWindow(100, 5s): never 101 arrivals at the
// server in any 5 seconds, and at least 98% of the quota used over three
// windows.
func TestFleetWindowIsExact(t *testing.T) {
	win := fleetapi.Window{N: 100, Per: 5 * time.Second}
	fr := fleetRun{procs: 4, workers: 4, limit: 1e6, length: 12 * time.Second, window: win}
	srv, rep, _ := fr.run(t)
	srv.mu.Lock()
	first := srv.arrivals[0]
	srv.mu.Unlock()
	used, _ := srv.counts(first, first.Add(3*win.Per+time.Second))
	t.Logf("WithWindow(100, 5s), 4 processes: most in any 5 s %d, %d sent in the first three windows; processes: %+v",
		srv.maxIn(win.Per), used, rep)
	assert.LessOrEqual(t, srv.maxIn(win.Per), win.N)
	assert.GreaterOrEqual(t, float64(used), 0.98*3*float64(win.N))
	assert.Zero(t, rep.Errors)
}

// Sixteen processes, 2 workers each, at L = 100 and L = 2,000 (with
// POLITE_FLEET_LEASE=100ms in the environment, a lease of 100ms: the
// processes inherit it):
//
//	go test -run '^$' -bench FleetOf16 -benchtime 1x -v ./fleet
func BenchmarkFleetOf16Processes(b *testing.B) {
	for _, limit := range []float64{100, 2000} {
		b.Run(fmt.Sprint(limit), func(b *testing.B) {
			for b.Loop() {
				fr := fleetRun{procs: 16, workers: 2, limit: limit, configured: true, length: 4 * time.Second}
				reportRun(b, fr)
			}
		})
	}
}

// A process killed mid-run (at L = 2,000, holding a lease): the others
// go on, none of their calls fails, and together they deliver L again
// from a second after the kill (its lease and its membership expire).
func TestFleetSurvivesAKilledProcess(t *testing.T) {
	fr := fleetRun{procs: 4, workers: 4, limit: 2000, configured: true, length: 5 * time.Second, kill: 2 * time.Second}
	srv, rep, _ := fr.run(t)
	from := srv.killed.Add(time.Second)
	to := from.Add(2 * time.Second)
	ok, refused := srv.counts(from, to)
	t.Logf("after the kill: %.0f accepted a second, %d refused; survivors: %+v", float64(ok)/2, refused, rep)
	assert.Zero(t, rep.Errors)
	least, most := floors(fr.limit, 0.95, 0.01)
	assert.GreaterOrEqual(t, float64(ok)/2, least*fr.limit)
	assert.LessOrEqual(t, float64(refused), most*float64(ok+refused))
}

// Four processes configured with no rate, against a server that states
// its limit in headers (tollbooth's): the fleet paces at the stated rate,
// less polite's 2% margin, from the first responses on. The 16 first
// requests go before anything is known, and a burst of 10 refuses some:
// 8-second runs, as the bench's, from a cold start.
func TestFleetPacesAtTheStatedRate(t *testing.T) {
	for _, limit := range []float64{100, 2000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			fr := fleetRun{procs: 4, workers: 4, limit: limit, length: 8 * time.Second, headers: true}
			srv, rep, calls := fr.run(t)
			ok, refused := srv.counts(time.Time{}, time.Now().Add(time.Hour))
			t.Logf("L=%v stated, 4 processes: %.3f of L, %d refused of %d, %.2f script calls per attempt; accepted per second %v; processes: %+v",
				limit, srv.share(fr.length), refused, ok+refused, float64(calls)/float64(ok+refused), srv.perSecond(), rep)
			least, most := floors(limit, 0.95, 0.01)
			assert.GreaterOrEqual(t, srv.share(fr.length), least)
			assert.LessOrEqual(t, float64(refused), most*float64(ok+refused))
			assert.Zero(t, rep.Errors)
		})
	}
}

// Four processes configured with no rate, against a server that counts
// 100 requests in fixed windows of a second and states its limit, what
// remains and the window's end in whole seconds (ulule/limiter's headers):
// the fleet paces at the stated rate once two answers agree on the reset,
// and the sends each process made before (its first, and its own
// controller's slow start, some 20 in all) are owed to the fleet, so that
// the first window is not spent twice. Before they were owed, 16 to 20
// of the first window's sends were refused here (2.0-2.4%), and in the
// bench (ulule, 4 processes); since, 0 to 3 in 8 runs with each
// process's own controller, and 0 to 7 with a shared one (whose
// processes book at its slow start until two answers agree on the
// reset). The goal is 1%; the bound, 1.5%, leaves room for a busy
// machine.
func TestFleetPacesAtAStatedWindow(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "own", true: "shared"}[shared], func(t *testing.T) {
			fr := fleetRun{procs: 4, workers: 4, limit: 100, length: 8 * time.Second, fixed: true, shared: shared}
			srv, rep, _ := fr.run(t)
			ok, refused := srv.counts(time.Time{}, time.Now().Add(time.Hour))
			t.Logf("fixed windows of 100 a second, 4 processes: %.3f of L, %d refused of %d; accepted per second %v, refused %v",
				srv.share(fr.length), refused, ok+refused, srv.perSecond(), srv.bySecond(true))
			least, most := floors(fr.limit, 0.9, 0.015)
			assert.GreaterOrEqual(t, srv.share(fr.length), least)
			assert.LessOrEqual(t, float64(refused), most*float64(ok+refused))
			assert.Zero(t, rep.Errors, rep.FirstError)
		})
	}
}

// Four processes retry from one budget of 100 tokens on Redis, against a
// server down for the whole run (503 to every request): together they
// retry 20 times (a retry costs 5), where four budgets of their own would
// allow 80. A call that Redis is too slow to answer within its deadline
// takes from the process's share (25) instead: at most a few more.
func TestFleetSharesARetryBudget(t *testing.T) {
	fr := fleetRun{procs: 4, workers: 2, limit: 1e6, length: 2 * time.Second, status: http.StatusServiceUnavailable, budget: 100}
	srv, rep, _ := fr.run(t)
	srv.mu.Lock()
	arrivals := len(srv.arrivals)
	srv.mu.Unlock()
	retries := arrivals - rep.Calls
	t.Logf("4 processes, %d calls, %d attempts: %d retries", rep.Calls, arrivals, retries)
	assert.GreaterOrEqual(t, retries, 20)
	assert.LessOrEqual(t, retries, 30, "one budget for the fleet, not four")
	assert.Zero(t, rep.Errors, rep.FirstError)
}

// Four processes configured with no rate, sharing one controller
// (fleet.WithSharedController), against a server that states nothing but
// 429 with Retry-After: 1: once the limit is found (the first 7 seconds
// are left out), the fleet keeps to it together. Floors below the
// benchmark's figures (1.00 and 0.99 of L, 0.4% and 0.02% refused), for a
// busy machine and the finding below; BenchmarkFleetLearnsFromThrottles
// measures.
//
// The finding usually ends within 2 seconds. In about one run in six
// (5 of 27 at L = 100, and 2 of 17 on the code before the calls to Redis
// shared round trips), it ended on a measure taken over a ramp, below the
// limit (0.82 to 0.87 of L at L = 100, 0.74 to 0.8 at 2,000), held for 4
// seconds; the probe after that was refused 15 to 22 times at L = 100 as
// it crossed, by the 7th second. Since the limit is measured from the rate
// the sends went at (not the successes told over the time since the
// event, which a fleet tells late), 9 runs of 9 at L = 100 got 0.995 to
// 1.006 of L, and 3 of 3 at 2,000 0.978 to 0.992 (the code before: 0.806
// and 0.915 in CI).
func TestFleetLearnsTheLimitTogether(t *testing.T) {
	for _, limit := range []float64{100, 2000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			fr := fleetRun{procs: 4, workers: 4, limit: limit, length: 15 * time.Second, shared: true}
			srv, rep, _ := fr.run(t)
			srv.mu.Lock()
			from := srv.arrivals[0].Add(7 * time.Second)
			srv.mu.Unlock()
			ok, refused := srv.counts(from, from.Add(8*time.Second))
			share := float64(ok) / (limit * 8)
			t.Logf("L=%v learned, 4 processes, from the 7th second: %.3f of L, %d refused of %d; accepted per second %v, refused %v",
				limit, share, refused, ok+refused, srv.perSecond(), srv.bySecond(true))
			// At 2,000 a second the server, Redis and the 4 processes
			// share 2 cores, and the learned rate follows what the machine
			// lets through: with two busy loops beside it, 0.90 of L (told
			// the limit, 0.97 with 2.4% refused). A finding that ends low
			// (above) stays low longer at 2,000: twice in CI, 0.79 and 0.82,
			// flat from the second second, none refused. The floor there is
			// for a fleet that collapses or scatters.
			goal := 0.9
			if limit > 100 {
				goal = 0.75
			}
			// Up to 3% refused: a finding that ended low crosses the limit
			// once more, about the 7th second (12 of 806 from then, and
			// 22 of 1,003 from the 5th second under -race, were seen).
			least, most := floors(limit, goal, 0.03)
			assert.GreaterOrEqual(t, share, least)
			assert.LessOrEqual(t, float64(refused), most*float64(ok+refused))
			assert.Zero(t, rep.Errors, rep.FirstError)
		})
	}
}

// A process that joins a fleet that has learnt the limit starts from what
// the fleet knows: three processes with the defaults learn it from
// throttles (no rate configured, the shared controller), and a fourth
// joins 8 s in, for the last 8 s. It pays no cold start: at most one
// request refused in its first 2 s, a probe's (a process that started
// alone would find the limit from its first contact, refused then), it
// gets its share of the limit, and
// it is refused at most what falls to it of the fleet's probes of the
// limit (a probe is refused once or twice, and the fleet probes a limit
// that stands ever less often: about 2, 6, 13 and 25 s in).
func TestAProcessJoiningAFleetStartsFromWhatItKnows(t *testing.T) {
	fr := fleetRun{procs: 4, workers: 4, limit: 100, length: 16 * time.Second, join: 8 * time.Second, shared: true}
	srv, rep, _ := fr.run(t)
	require.Len(t, rep.Each, 4)
	joiner := rep.Each[3]
	srv.mu.Lock()
	joined := srv.joined
	srv.mu.Unlock()
	ok, refused := srv.counts(joined, time.Now().Add(time.Hour))
	joinedFor := (fr.length - fr.join).Seconds()
	t.Logf("the process that joined: %d calls, %d refused (at %v ms); the fleet from the join: %d accepted (%.2f of L), %d refused; accepted per second %v, refused %v",
		joiner.Calls, joiner.Refused, joiner.RefusedAt, ok, float64(ok)/(joinedFor*fr.limit), refused, srv.perSecond(), srv.bySecond(true))
	// A probe of the fleet's may fall in the joiner's first 2 s, and its
	// one refused request be the joiner's (CI, 2026-12-04: at 1,369 ms,
	// the fleet's only refusal from the join on): one is a probe's, more
	// a cold start's first contact.
	early := 0
	for _, ms := range joiner.RefusedAt {
		if ms < 2000 {
			early++
		}
	}
	assert.LessOrEqual(t, early, 1, "the process that joined: refused in its first 2 s, at %v ms", joiner.RefusedAt)
	assert.LessOrEqual(t, joiner.Refused, 2, "the process that joined: a probe's refusals at most")
	assert.GreaterOrEqual(t, joiner.OK, int(0.5*fr.limit*joinedFor/4), "its share: a quarter of L, half of it at least")
	assert.LessOrEqual(t, refused, 4, "the fleet, from the join: a probe's refusals at most")
	assert.GreaterOrEqual(t, float64(ok), 0.9*fr.limit*joinedFor, "the fleet, from the join: the limit still used")
	assert.Zero(t, rep.Errors, rep.FirstError)
}

// Four processes configured with no rate, sharing one controller, against
// a server that counts every request, refused or not, over a sliding
// second and refuses above its limit with a bare 429 (HAProxy's
// http_req_rate, the bench's haproxy): a client above the limit is locked
// out until it slows below it. The fleet's first sends cross the limit
// and are locked out for about a second; the floor the shared controller
// took then (half the rate its slow start had booked: 4 times the limit)
// kept it locked out, and the climb from a floor and the probes crossed
// into lockouts again: 0.46-0.58 of L in 8 s, 16-25% refused, in the
// bench. A lockout now takes the limit as what the server let through
// over a whole second, and holds there as at a limit a climb found.
// Here that still had 0.83 of L in 8 s with 10% refused (62 in the
// first second: the sends booked before each halving went at the old
// rate into the lockout). Now a halving lets them go as an event does,
// the fleet waits for the lockout's second to pass after its second
// halving (no faster than the server let through then), and holds 3%
// below a limit that locked it out: 0.95-0.96 of L with 4-6 refused of
// 795; HAProxy in the bench 0.96-0.97 with 0.5-0.9% refused (5.8-6.6%
// before).
func TestFleetLearnsALimitThatCountsRefusals(t *testing.T) {
	fr := fleetRun{procs: 4, workers: 4, limit: 100, length: 8 * time.Second, counting: true, shared: true}
	srv, rep, _ := fr.run(t)
	ok, refused := srv.counts(time.Time{}, time.Now().Add(time.Hour))
	t.Logf("a limit that counts refusals, 4 processes: %.3f of L in 8 s, %d refused of %d; accepted per second %v, refused %v",
		srv.share(fr.length), refused, ok+refused, srv.perSecond(), srv.bySecond(true))
	// Under the race detector the processes are slower to hear of the
	// first refusals, and more are in flight: 21 of 785 (17 in the first
	// second) in one CI run, 4-8 without it.
	most := 0.025
	if raceDetector {
		most = 0.05
	}
	assert.GreaterOrEqual(t, srv.share(fr.length), 0.88)
	assert.LessOrEqual(t, float64(refused), most*float64(ok+refused))
	assert.Zero(t, rep.Errors, rep.FirstError)
}

// Four processes × 4 workers, and 16 × 2, configured with no rate,
// against a server that states nothing but 429 with Retry-After: 1, for
// 30 seconds from a cold start: each process's own controller paces it as
// if it were alone and the fleet shares the pauses ("own"), or the fleet
// shares one controller through Redis ("shared"). The steady figures
// leave out the first 5 seconds, where the limit is found. This measures
// the gap to the goal (0.95 of L, 1% refused); it asserts nothing but
// that no call fails:
//
//	go test -run '^$' -bench FleetLearns -benchtime 1x -v ./fleet
func BenchmarkFleetLearnsFromThrottles(b *testing.B) {
	for _, procs := range [][2]int{{4, 4}, {16, 2}} {
		for _, limit := range []float64{100, 2000} {
			for _, mode := range []string{"own", "shared"} {
				b.Run(fmt.Sprintf("%dx%d/%v/%s", procs[0], procs[1], limit, mode), func(b *testing.B) {
					for b.Loop() {
						reportRun(b, fleetRun{procs: procs[0], workers: procs[1], limit: limit,
							length: 30 * time.Second, shared: mode == "shared", steady: 5 * time.Second})
					}
				})
			}
		}
	}
}

// reportRun runs fr and reports its figures as a benchmark's metrics.
func reportRun(b *testing.B, fr fleetRun) {
	srv, rep, calls := fr.run(b)
	ok, refused := srv.counts(time.Time{}, time.Now().Add(time.Hour))
	attempts := ok + refused
	b.ReportMetric(srv.share(fr.length), "share-of-L")
	b.ReportMetric(100*float64(refused)/float64(attempts), "refused-%")
	b.ReportMetric(float64(calls)/float64(attempts), "calls/attempt")
	b.ReportMetric(float64(srv.maxIn(time.Second))/(fr.limit+srv.burst), "max-1s/(L+b)")
	if fr.steady > 0 {
		srv.mu.Lock()
		from := srv.arrivals[0].Add(fr.steady)
		srv.mu.Unlock()
		ok, refused := srv.counts(from, from.Add(fr.length-fr.steady))
		b.ReportMetric(float64(ok)/(fr.limit*(fr.length-fr.steady).Seconds()), "steady-share")
		b.ReportMetric(100*float64(refused)/float64(ok+refused), "steady-refused-%")
	}
	b.Logf("accepted per second %v, refused %v", srv.perSecond(), srv.bySecond(true))
	if rep.Errors > 0 {
		b.Errorf("%d calls failed: %s", rep.Errors, rep.FirstError)
	}
}

// floors returns the least share of L and the most share of refusals that
// a fleet run at limit must show: the goals given, or, under the race
// detector from 2,000 a second, what 4 processes slowed several times over
// keep on 2 cores (0.73–0.99 of L and up to 1.9% refused were seen, on
// the code before the change that made this helper too). CI runs the fleet
// tests again without the race detector, at the goals.
func floors(limit, share, refused float64) (least, most float64) {
	if raceDetector && limit > 100 {
		return min(share, 0.6), max(refused, 0.05)
	}
	return share, refused
}
