package polite_test

// The control-quality suite: whole scenarios in fake time, where 16
// closed-loop workers call an in-memory server that enforces a rate limit
// the way real servers do, through each adaptive mode of polite, beside an
// oracle that knows the limit and a client that only retries.
//
//	go test -run TestControlQuality -v
//
// prints the table that README.md shows.

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

const (
	qualityWorkers = 16
	qualityLatency = 20 * time.Millisecond // round trip of every request
	qualityBin     = 100 * time.Millisecond
)

// limiter is how a server enforces its limit. It decides at now whether a
// request is accepted; if not, it returns the status of the rejection. It
// returns the headers of the response either way, as name, value pairs.
type limiter interface {
	allow(now time.Time, limit float64) (ok bool, status int, header []string)
}

// retryAfter returns a Retry-After header, or none for "".
func retryAfter(v string) []string {
	if v == "" {
		return nil
	}
	return []string{"Retry-After", v}
}

// gcra is a token bucket as the generic cell rate algorithm: the limit per
// second, a burst of one second's worth, and 429 with Retry-After in whole
// seconds (RFC 9110 allows no fraction), rounded up.
type gcra struct {
	tat   time.Time
	burst float64 // the bucket's size; one second's worth if 0
}

func (g *gcra) allow(now time.Time, limit float64) (bool, int, []string) {
	interval := time.Duration(float64(time.Second) / limit)
	burst := cmp.Or(g.burst, limit)
	tolerance := time.Duration(math.Max(burst-1, 0)) * interval
	if g.tat.IsZero() {
		g.tat = now
	}
	if earliest := g.tat.Add(-tolerance); now.Before(earliest) {
		return false, http.StatusTooManyRequests, retryAfter(strconv.Itoa(int(math.Ceil(earliest.Sub(now).Seconds()))))
	}
	g.tat = maxTime(g.tat, now).Add(interval)
	return true, 0, nil
}

// fixedWindow allows the limit per whole second and answers a bare 429.
type fixedWindow struct {
	window time.Time
	count  float64
}

func (f *fixedWindow) allow(now time.Time, limit float64) (bool, int, []string) {
	if w := now.Truncate(time.Second); !w.Equal(f.window) {
		f.window, f.count = w, 0
	}
	if f.count+1 > limit {
		return false, http.StatusTooManyRequests, nil
	}
	f.count++
	return true, 0, nil
}

// slidingWindow is the sliding window counter (Cloudflare's): the count of
// the current second plus the previous second's, weighted by how much of
// it the window still covers. It answers 429 with Retry-After: 1.
type slidingWindow struct {
	window      time.Time
	prev, count float64
}

func (s *slidingWindow) allow(now time.Time, limit float64) (bool, int, []string) {
	w := now.Truncate(time.Second)
	switch d := w.Sub(s.window); {
	case d == time.Second:
		s.prev, s.count = s.count, 0
	case d > time.Second:
		s.prev, s.count = 0, 0
	}
	s.window = w
	elapsed := now.Sub(w).Seconds()
	if s.prev*(1-elapsed)+s.count+1 > limit {
		return false, http.StatusTooManyRequests, retryAfter("1")
	}
	s.count++
	return true, 0, nil
}

// leakyBucket is a leaky bucket used as a meter, as nginx's limit_req: a
// level that leaks at the limit and holds one second's worth. It answers
// 503 with Retry-After: 1.
type leakyBucket struct {
	level float64
	last  time.Time
}

func (l *leakyBucket) allow(now time.Time, limit float64) (bool, int, []string) {
	if !l.last.IsZero() {
		l.level = math.Max(0, l.level-now.Sub(l.last).Seconds()*limit)
	}
	l.last = now
	if l.level+1 > math.Max(limit, 1) {
		return false, http.StatusServiceUnavailable, retryAfter("1")
	}
	l.level++
	return true, 0, nil
}

// down is a server in a full outage: 503 without Retry-After.
type down struct{}

func (down) allow(time.Time, float64) (bool, int, []string) {
	return false, http.StatusServiceUnavailable, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// limitServer is an in-memory server, used as next, that enforces a limit
// that changes on a schedule, and counts what it accepted and rejected in
// bins of 100ms.
type limitServer struct {
	start    time.Time
	schedule []step
	latency  time.Duration

	mu       sync.Mutex
	limiter  limiter
	accepted []int
	rejected []int
}

// step is a limit that holds from a time into the scenario on.
type step struct {
	at    time.Duration
	limit float64
}

func (s *limitServer) limitAt(d time.Duration) float64 {
	l := s.schedule[0].limit
	for _, st := range s.schedule {
		if d >= st.at {
			l = st.limit
		}
	}
	return l
}

func (s *limitServer) RoundTrip(req *http.Request) (*http.Response, error) {
	// Each worker sees a slightly different latency, so that requests
	// seldom arrive at the same fake instant: the order of goroutines that
	// wake at the same instant is not fixed, and ties make runs differ.
	worker, _ := strconv.Atoi(req.Header.Get("Worker"))
	latency := s.latency + time.Duration(worker)*s.latency/97
	time.Sleep(latency / 2)
	now := time.Now()
	s.mu.Lock()
	ok, status, header := s.limiter.allow(now, s.limitAt(now.Sub(s.start)))
	bin := int(now.Sub(s.start) / qualityBin)
	for len(s.accepted) <= bin {
		s.accepted, s.rejected = append(s.accepted, 0), append(s.rejected, 0)
	}
	if ok {
		s.accepted[bin]++
	} else {
		s.rejected[bin]++
	}
	s.mu.Unlock()
	time.Sleep(latency / 2)
	if ok {
		status = http.StatusOK
	}
	return respond(req, status, http.NoBody, header...), nil
}

// oracle is a client that knows the server's limit at every moment and
// paces at it with x/time/rate; it never retries.
type oracle struct {
	server  *limitServer
	limiter *rate.Limiter
	mu      sync.Mutex
	current float64
}

func (o *oracle) RoundTrip(req *http.Request) (*http.Response, error) {
	l := o.server.limitAt(time.Since(o.server.start))
	o.mu.Lock()
	if l != o.current {
		o.current = l
		o.limiter.SetLimit(rate.Limit(l))
	}
	o.mu.Unlock()
	if err := o.limiter.Wait(req.Context()); err != nil {
		return nil, err
	}
	return o.server.RoundTrip(req)
}

// scenario is one run of the suite.
type scenario struct {
	name     string
	limiter  func() limiter
	schedule []step
	length   time.Duration
	steady   time.Duration // utilization and rejections are measured from here on
	workers  int           // closed-loop workers; 16 if 0
	latency  time.Duration // round trip of every request; 20ms if 0
	headers  bool          // the server tells its quota in headers
	floor    float64       // the default's utilization, asserted in the variants; 0.9 or Cubic's if 0
}

// result is what one client achieved in one scenario.
type result struct {
	client      string
	utilization float64 // accepted ÷ what the limit allowed, from steady on
	rejected    float64 // rejected ÷ attempts, from steady on
	amplify     float64 // attempts ÷ calls, over the whole run
	p99         time.Duration
	converge    []time.Duration // per change of limit: time to settle (see settle)
	calls       int
	attempts    int
}

// run runs the scenario through the client; seed makes the jitter of
// polite's clients (their backoff) a fixed sequence, so that a run is the
// same every time.
func (sc scenario) run(t *testing.T, client string, seed uint64) result {
	var r result
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &limitServer{start: start, schedule: sc.schedule, limiter: sc.limiter(), latency: cmp.Or(sc.latency, qualityLatency)}
		if debugServer != nil {
			debugServer(srv)
		}
		var rt http.RoundTripper
		switch client {
		case "oracle":
			rt = &oracle{server: srv, limiter: rate.NewLimiter(rate.Limit(sc.schedule[0].limit), 1), current: sc.schedule[0].limit}
		case "retry-only":
			rt = polite.New(srv, polite.WithSeed(seed), polite.WithAdaptive(polite.AdaptiveOff))
		case "aws-cubic":
			rt = polite.New(srv, polite.WithSeed(seed), polite.WithAdaptive(polite.AdaptiveCubic))
		case "aimd":
			rt = polite.New(srv, polite.WithSeed(seed), polite.WithAdaptive(polite.AdaptiveAIMD))
		case "default":
			rt = polite.New(srv, polite.WithSeed(seed))
		}
		var mu sync.Mutex
		var latencies []time.Duration
		var wg sync.WaitGroup
		for w := range cmp.Or(sc.workers, qualityWorkers) {
			wg.Go(func() {
				for time.Since(start) < sc.length {
					begin := time.Now()
					req := mustRequest(t, t.Context(), "http://api.test/")
					req.Header.Set("Worker", strconv.Itoa(w))
					resp, err := rt.RoundTrip(req)
					if err == nil {
						resp.Body.Close()
					}
					mu.Lock()
					latencies = append(latencies, time.Since(begin))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		r = sc.measure(srv, client, latencies)
	})
	return r
}

func (sc scenario) measure(srv *limitServer, client string, latencies []time.Duration) result {
	r := result{client: client, calls: len(latencies)}
	var accepted, rejected, allowed float64
	for bin := range srv.accepted {
		at := time.Duration(bin) * qualityBin
		r.attempts += srv.accepted[bin] + srv.rejected[bin]
		if at < sc.steady || at >= sc.length {
			continue
		}
		accepted += float64(srv.accepted[bin])
		rejected += float64(srv.rejected[bin])
		allowed += srv.limitAt(at) * qualityBin.Seconds()
	}
	if allowed > 0 {
		r.utilization = accepted / allowed
	}
	if accepted+rejected > 0 {
		r.rejected = rejected / (accepted + rejected)
	}
	r.amplify = float64(r.attempts) / float64(max(r.calls, 1))
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		r.p99 = latencies[min(n-1, n*99/100)]
	}
	for i := 1; i < len(sc.schedule); i++ {
		r.converge = append(r.converge, sc.settle(srv, i))
	}
	return r
}

// settle returns how long the client took to settle after the i-th change
// of limit: after a drop, until the rejections of every second of the
// following five stay under 5% of attempts; after a rise, until the
// accepted requests of a second first reach 90% of the new limit.
func (sc scenario) settle(srv *limitServer, i int) time.Duration {
	from, to := sc.schedule[i].at, sc.length
	if i+1 < len(sc.schedule) {
		to = sc.schedule[i+1].at
	}
	per := int(time.Second / qualityBin)
	first, last := int(from/qualityBin), int(to/qualityBin)-per
	sum := func(bins []int, b int) (n int) {
		for _, v := range bins[b : b+per] {
			n += v
		}
		return n
	}
	if sc.schedule[i].limit < sc.schedule[i-1].limit {
		calm := 0 // consecutive windows under 5%
		for b := first; b <= last; b++ {
			a, r := sum(srv.accepted, b), sum(srv.rejected, b)
			if a+r > 0 && float64(r) >= 0.05*float64(a+r) {
				calm = 0
				continue
			}
			if calm++; calm == 5*per {
				return time.Duration(b-calm+1+per-first) * qualityBin
			}
		}
		return to - from
	}
	for b := first; b <= last; b++ {
		if float64(sum(srv.accepted, b)) >= 0.9*sc.schedule[i].limit {
			return time.Duration(b+per-first) * qualityBin
		}
	}
	return to - from
}

var qualityScenarios = []scenario{
	{name: "token bucket, 429 + Retry-After", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second},
	{name: "fixed window, bare 429", limiter: func() limiter { return &fixedWindow{} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second},
	{name: "sliding window, 429 + Retry-After", limiter: func() limiter { return &slidingWindow{} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second},
	{name: "leaky bucket, 503 + Retry-After", limiter: func() limiter { return &leakyBucket{} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second},
	{name: "token bucket, L 100 → 25 → 100", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 100}, {40 * time.Second, 25}, {80 * time.Second, 100}}, length: 120 * time.Second, steady: 10 * time.Second},
	{name: "fixed window, L 100 → 25 → 100", limiter: func() limiter { return &fixedWindow{} },
		schedule: []step{{0, 100}, {40 * time.Second, 25}, {80 * time.Second, 100}}, length: 120 * time.Second, steady: 10 * time.Second},
	{name: "full outage, 503", limiter: func() limiter { return down{} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second},
	{name: "GitHub-style X-RateLimit-*, fixed window, no Retry-After", limiter: func() limiter { return &windowHeaders{dialect: "github"} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second, headers: true},
	{name: "IETF RateLimit and RateLimit-Policy, fixed window", limiter: func() limiter { return &windowHeaders{dialect: "ietf"} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second, headers: true},
	{name: "OpenAI-style duration resets, fixed window", limiter: func() limiter { return &windowHeaders{dialect: "openai"} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second, headers: true},
}

// qualityVariants run the default controller and Cubic at other limits,
// latencies and concurrencies, so that the default is not tuned to one
// operating point.
var qualityVariants = []scenario{
	{name: "token bucket, L 10, 200ms, 4 workers", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 10}}, length: 120 * time.Second, steady: 20 * time.Second, workers: 4, latency: 200 * time.Millisecond},
	{name: "fixed window, L 10, 200ms, 4 workers", limiter: func() limiter { return &fixedWindow{} },
		schedule: []step{{0, 10}}, length: 120 * time.Second, steady: 20 * time.Second, workers: 4, latency: 200 * time.Millisecond},
	{name: "token bucket, L 1000, 20ms, 64 workers", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 1000}}, length: 30 * time.Second, steady: 10 * time.Second, workers: 64},
	{name: "fixed window, L 1000, 20ms, 64 workers", limiter: func() limiter { return &fixedWindow{} },
		schedule: []step{{0, 1000}}, length: 30 * time.Second, steady: 10 * time.Second, workers: 64},
	{name: "token bucket, L 100, 2 workers (client-bound)", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second, workers: 2},
	// A token bucket whose burst is far less than what it refills during
	// its Retry-After (nginx's limit_req with a small burst): it saves
	// little of a pause, and what a client gets through at once as a pause
	// ends shows its burst, not its rate. The first ten or five seconds
	// show how fast the limit is learnt.
	{name: "token bucket, L 100, bursts of 5", limiter: func() limiter { return &gcra{burst: 5} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second, floor: 0.85},
	{name: "token bucket, L 100, bursts of 5, first 10 s", limiter: func() limiter { return &gcra{burst: 5} },
		schedule: []step{{0, 100}}, length: 10 * time.Second, floor: 0.5},
	{name: "token bucket, L 20, bursts of 5, 4 workers, first 5 s", limiter: func() limiter { return &gcra{burst: 5} },
		schedule: []step{{0, 20}}, length: 5 * time.Second, workers: 4, floor: 0.55},
}

// qualitySeed is the seed of the runs in the tables.
const qualitySeed = 1

var qualityClients = []string{"oracle", "retry-only", "aws-cubic", "aimd", "default"}

// debugServer, if set, is given each server the suite makes (see
// debug_quality_test.go).
var debugServer func(*limitServer)

// TestControlQuality runs the suite, prints its table, and asserts floors
// well inside the figures measured (README.md), so that it never flakes.
func TestControlQuality(t *testing.T) {
	results := make([][]result, len(qualityScenarios))
	for i, sc := range qualityScenarios {
		for _, c := range qualityClients {
			results[i] = append(results[i], sc.run(t, c, qualitySeed))
		}
	}
	t.Log("\n" + qualityTable(qualityScenarios, results))

	for i, sc := range qualityScenarios {
		byClient := map[string]result{}
		for _, r := range results[i] {
			byClient[r.client] = r
		}
		def, cubic, oracle := byClient["default"], byClient["aws-cubic"], byClient["oracle"]
		if sc.name == "full outage, 503" {
			// Once the budget is spent every call is one attempt: over the
			// run, the 100 retries the budget allows are a rounding error.
			for _, c := range []string{"retry-only", "aws-cubic", "aimd", "default"} {
				assert.LessOrEqual(t, byClient[c].amplify, 1.1, "%s: %s attempts ÷ calls", sc.name, c)
			}
			continue
		}
		assert.GreaterOrEqual(t, oracle.utilization, 0.97, "%s: the oracle shows what the server allows", sc.name)
		if sc.headers {
			// The server's own numbers pace every mode alike: no rejection
			// at all after the first window.
			for _, c := range []string{"retry-only", "aws-cubic", "aimd", "default"} {
				assert.GreaterOrEqual(t, byClient[c].utilization, 0.95, "%s: %s", sc.name, c)
				assert.Zero(t, byClient[c].rejected, "%s: %s", sc.name, c)
			}
			continue
		}
		// The default beats AWS's controller: more of the quota, and no
		// more rejections than it, or than 1% in steady state (2% when the
		// run holds a drop of the limit and its transient).
		assert.Greater(t, def.utilization, cubic.utilization, "%s: default vs aws-cubic utilization", sc.name)
		_, bound := sc.floors()
		assert.LessOrEqual(t, def.rejected, max(cubic.rejected, bound), "%s: default vs aws-cubic rejections", sc.name)
		sc.assertFloors(t, def)
	}
}

// floors returns the least utilization and the most rejections the suite
// accepts of the default controller on the scenario.
func (sc scenario) floors() (utilization, rejected float64) {
	switch {
	case len(sc.schedule) > 1:
		return 0.85, 0.02
	case strings.HasPrefix(sc.name, "sliding"):
		// Each probe costs the second of pause that Retry-After: 1 asks
		// for (see README.md): the 95% goal is out of reach here.
		return 0.88, 0.01
	}
	return 0.95, 0.01
}

// assertFloors asserts the floors of the scenario on a run of the default
// controller, and the goals after changes of the limit.
func (sc scenario) assertFloors(t *testing.T, r result) {
	t.Helper()
	utilization, rejected := sc.floors()
	assert.GreaterOrEqual(t, r.utilization, utilization, sc.name)
	assert.LessOrEqual(t, r.rejected, rejected, sc.name)
	if len(sc.schedule) > 1 {
		assert.LessOrEqual(t, r.converge[0], 5*time.Second, "%s: settled after the drop", sc.name)
		assert.LessOrEqual(t, r.converge[1], 10*time.Second, "%s: 90%% of the new limit after the rise", sc.name)
	}
}

// TestControlQualityAcrossSeeds runs the default controller through the
// suite's scenarios with ten seeds of its backoff jitter, and asserts the
// floors on every run: the figures of the table are not a lucky draw.
// (Only servers that refuse without Retry-After make runs differ: the
// pause they ask for sets the delay of a retry otherwise.)
func TestControlQualityAcrossSeeds(t *testing.T) {
	for _, sc := range qualityScenarios {
		if sc.headers || sc.name == "full outage, 503" {
			continue
		}
		var lines []string
		for seed := uint64(1); seed <= 10; seed++ {
			r := sc.run(t, "default", seed)
			sc.assertFloors(t, r)
			lines = append(lines, fmt.Sprintf("%.1f%% %.2f%% %v", 100*r.utilization, 100*r.rejected, r.converge))
		}
		t.Logf("%s, seeds 1 to 10: %s", sc.name, strings.Join(lines, "; "))
	}
}

func TestControlQualityVariants(t *testing.T) {
	results := make([][]result, len(qualityVariants))
	for i, sc := range qualityVariants {
		for _, c := range []string{"aws-cubic", "default"} {
			results[i] = append(results[i], sc.run(t, c, qualitySeed))
		}
	}
	t.Log("\n" + qualityTable(qualityVariants, results))
	for i, sc := range qualityVariants {
		cubic, def := results[i][0], results[i][1]
		assert.GreaterOrEqual(t, def.utilization, cmp.Or(sc.floor, min(0.9, cubic.utilization)), sc.name)
		assert.GreaterOrEqual(t, def.utilization, cubic.utilization, sc.name)
		assert.LessOrEqual(t, def.rejected, max(0.05, cubic.rejected), sc.name)
	}
}

func qualityTable(scenarios []scenario, results [][]result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | client | delivered ÷ L | rejected ÷ attempts | attempts ÷ calls | p99 call | settle after changes |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|\n")
	for i, row := range results {
		for _, r := range row {
			var settle []string
			for _, d := range r.converge {
				settle = append(settle, d.Round(100*time.Millisecond).String())
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f%% | %.2f%% | %.2f | %v | %s |\n", scenarios[i].name, r.client,
				100*r.utilization, 100*r.rejected, r.amplify, r.p99.Round(time.Millisecond), strings.Join(settle, ", "))
		}
	}
	return b.String()
}
