package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// The fleet clients stand for a fleet of N processes calling one API: N
// Transports (or N oracles), each with its own Redis client, the run's
// requests spread over them in turn. They share one quota through the
// Redis that the bench starts (or REDIS_ADDR).

// fleetClients returns the clients that run as a fleet of n.
func fleetClients() []client {
	return []client{
		{name: "oracle-split", build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			// One x/time/rate limiter per process at L/N: what a fleet
			// told the limit, and how many it is, would do.
			rts := make([]http.RoundTripper, cfg.fleet)
			first := cfg.profile.rateAt(0, cfg.duration)
			for i := range rts {
				share := 1 / float64(cfg.fleet)
				if cfg.share > 0 {
					share *= cfg.share // -share: each paces at its part of the share
				}
				o := &oracle{next: tr, lim: rate.NewLimiter(rate.Limit(first*share), 1), cfg: cfg, share: share}
				rts[i] = o
			}
			return &http.Client{Transport: &spread{rts: rts}}
		}},
		{name: "polite-alone", build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			rts := make([]http.RoundTripper, cfg.fleet)
			for i := range rts {
				rts[i] = polite.New(tr)
			}
			return &http.Client{Transport: &spread{rts: rts}}
		}},
		{name: "polite-fleet", build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			return buildFleet(tr, cfg, nil)
		}},
		// The fleet's default since 2026-11-28; the name stays for the
		// commands of the figures measured before.
		{name: "polite-fleet-shared", build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			return buildFleet(tr, cfg, []fleet.Option{fleet.WithSharedController(true)})
		}},
		{name: "polite-fleet-own", build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			return buildFleet(tr, cfg, []fleet.Option{fleet.WithSharedController(false)})
		}},
		{name: "polite-fleet-memory", learn: 1, build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			return buildFleetRemembering(tr, cfg, nil, true)
		}},
		// The last process of the fleet joins half-way through the run,
		// when the others have learnt the limit; the note says what it
		// sent and had refused.
		{name: "polite-fleet-join", join: true, build: buildFleetJoining},
		// Told the limit, with a burst of 10; with -share below 1, told
		// that part of it with a burst of 1: how a fleet that knew the
		// server fares (the burst-1 server: 0.89 of L with 1.2% refused
		// told 0.9 of it, 0.75 with 21% told 0.95).
		{name: "polite-fleet-told", build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			first := cfg.profile.rateAt(0, cfg.duration)
			if cfg.share > 0 && cfg.share < 1 {
				return buildFleet(tr, cfg, nil, polite.WithRate(first*cfg.share, 1))
			}
			return buildFleet(tr, cfg, nil, polite.WithRate(first, 10))
		}},
	}
}

// buildFleet returns N polite Transports sharing one quota through Redis
// (a Fleet configured with fopts), each configured with opts. The fleet's
// namespace is cfg.namespace, or a fresh one: a run starts afresh, but
// after its fleet's own run before (client.learn).
func buildFleet(tr http.RoundTripper, cfg clientConfig, fopts []fleet.Option, opts ...polite.Option) *http.Client {
	return buildFleetRemembering(tr, cfg, fopts, false, opts...)
}

// buildFleetRemembering is buildFleet, and, if remember is set, gives each
// process the fleet's Memory ((*fleet.Fleet).Memory, loaded when it is
// built) and keys requests by the host's name (see hostname).
func buildFleetRemembering(tr http.RoundTripper, cfg clientConfig, fopts []fleet.Option, remember bool, opts ...polite.Option) *http.Client {
	ns := cfg.namespace
	if ns == "" {
		ns = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	rts := make([]http.RoundTripper, cfg.fleet)
	for i := range rts {
		rts[i] = fleetProcess(i, ns, tr, cfg, fopts, remember, opts...)
	}
	return &http.Client{Transport: &spread{rts: rts}}
}

// buildFleetJoining returns a fleet of N polite Transports with the
// defaults, N−1 of them from the start and the last built when the first
// request after cfg.joined.At comes (as a process that joins a fleet that
// has learnt the limit), the run's requests spread over those there in
// turn; the one that joins counts its attempts and refusals in cfg.joined.
func buildFleetJoining(tr http.RoundTripper, cfg clientConfig) *http.Client {
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	rts := make([]http.RoundTripper, max(cfg.fleet-1, 1))
	for i := range rts {
		rts[i] = fleetProcess(i, ns, tr, cfg, nil, false)
	}
	return &http.Client{Transport: &joinSpread{before: spread{rts: rts}, at: cfg.origin.Add(cfg.joined.At), join: func() http.RoundTripper {
		return fleetProcess(len(rts), ns, &counting{next: tr, c: cfg.joined, cfg: cfg}, cfg, nil, false)
	}}}
}

// fleetProcess returns process i of a fleet in namespace ns, sending
// through tr: a polite Transport with its own Redis client and Fleet (see
// buildFleetRemembering).
func fleetProcess(i int, ns string, tr http.RoundTripper, cfg clientConfig, fopts []fleet.Option, remember bool, opts ...polite.Option) http.RoundTripper {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.redis})
	cfg.cleanup(func() { _ = rdb.Close() })
	alone := &fallbacks{origin: cfg.origin, errs: map[string]int{}}
	f := fleet.New(rdb, append([]fleet.Option{fleet.WithNamespace(ns), fleet.WithMember(fmt.Sprint(i)), fleet.WithSize(cfg.fleet),
		fleet.WithOnChange(alone.changed)}, fopts...)...)
	alone.watch(f)
	cfg.cleanup(func() {
		_ = f.Close()
		alone.report(fmt.Sprintf("p%d", i))
	}) // registered after its client: closed before it
	popts := append([]polite.Option{polite.WithFleet(f)}, opts...)
	var traced func(*polite.Transport)
	if cfg.trace {
		var opt polite.Option
		opt, traced = traceHooks(fmt.Sprintf("p%d", i), cfg.origin)
		popts = append(popts, opt)
	}
	if remember {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		mem, err := f.Memory(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		}
		cfg.cleanup(func() { _ = mem.Close() }) // written to Redis before its fleet closes
		popts = append(popts, polite.WithMemory(mem), polite.WithKey(hostname))
	}
	t := polite.New(tr, popts...)
	if traced != nil {
		traced(t)
	}
	return t
}

// joinSpread sends each request through the next of a fleet's processes in
// turn: those of before from the start, and from at on those and the one
// join builds, when the first request after at comes.
type joinSpread struct {
	before spread
	at     time.Time
	join   func() http.RoundTripper
	once   sync.Once
	after  spread
}

func (s *joinSpread) RoundTrip(req *http.Request) (*http.Response, error) {
	if time.Now().Before(s.at) {
		return s.before.RoundTrip(req)
	}
	s.once.Do(func() { s.after.rts = append(slices.Clone(s.before.rts), s.join()) })
	return s.after.RoundTrip(req)
}

// joinCount is what the process that joins a fleet half-way sent to the
// server and had refused (429, 503, 403; not an outage's 503s, as the
// server's counts), from its first request on.
type joinCount struct {
	At                time.Duration // when it joined, after the run's start
	Attempts, Refused atomic.Int64
}

// MarshalJSON encodes c as the report's JSON shows it.
func (c *joinCount) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"at_ns":%d,"attempts":%d,"refused":%d}`, int64(c.At), c.Attempts.Load(), c.Refused.Load()), nil
}

// counting counts the attempts it sends and the refusals they get in c;
// cfg tells an outage's 503s, which are failures, not refusals.
type counting struct {
	next http.RoundTripper
	c    *joinCount
	cfg  clientConfig
}

func (t *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.Attempts.Add(1)
	sent := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			if !t.cfg.profile.downAt(sent.Sub(t.cfg.origin), t.cfg.duration) {
				t.c.Refused.Add(1)
			}
		case http.StatusTooManyRequests, http.StatusForbidden:
			t.c.Refused.Add(1)
		}
	}
	return resp, err
}

// spread sends each request through the next of its RoundTrippers in
// turn.
type spread struct {
	rts  []http.RoundTripper
	next atomic.Uint64
}

func (s *spread) RoundTrip(req *http.Request) (*http.Response, error) {
	return s.rts[int(s.next.Add(1)%uint64(len(s.rts)))].RoundTrip(req)
}

// needsRedis reports whether any of cls runs as a fleet on Redis.
func needsRedis(cls []client) bool {
	for _, c := range cls {
		if strings.HasPrefix(c.name, "polite-fleet") {
			return true
		}
	}
	return false
}

// startRedis returns the address of the Redis the fleet clients share:
// REDIS_ADDR if set, else a redis-server the bench starts (keeping nothing
// on disk), stopped by the returned func.
func startRedis() (string, func(), error) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr, func() {}, nil
	}
	bin, err := lookBinary("redis-server")
	if err != nil {
		return "", nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "bench-redis-")
	if err != nil {
		return "", nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	c, err := startChild("redis-server", dir, addr, cmd)
	if err != nil {
		return "", nil, err
	}
	var once sync.Once
	return addr, func() {
		once.Do(func() {
			_ = c.stop()
			_ = os.RemoveAll(dir)
		})
	}, nil
}

// mustStartRedis is startRedis, then pingRedis: it exits the bench if
// Redis cannot be had, and returns its address and what stops it.
func mustStartRedis() (string, func()) {
	addr, stop, err := startRedis()
	if err != nil {
		fail(fmt.Errorf("the fleet clients need Redis (REDIS_ADDR, or redis-server on the PATH): %w", err))
	}
	if err := pingRedis(addr); err != nil {
		stop()
		fail(err)
	}
	return addr, stop
}

// pingRedis checks that addr answers.
func pingRedis(addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// fallbacks counts a fleet process's calls to Redis that went alone
// (fleet.Observer.OnFallback), and the first of them: a run whose script
// calls per request fall under 1 paced some of its requests alone, and
// report says when and why on stderr.
type fallbacks struct {
	origin time.Time
	mu     sync.Mutex
	n      int
	first  string
	errs   map[string]int
	opened time.Time     // when the breaker last opened; zero while it is closed
	open   time.Duration // how long the breaker was open in all
	opens  int
}

// changed hears the Fleet's breaker open (available false) and close.
func (fb *fallbacks) changed(available bool, _ error) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	switch {
	case !available && fb.opened.IsZero():
		fb.opened = time.Now()
		fb.opens++
	case available && !fb.opened.IsZero():
		fb.open += time.Since(fb.opened)
		fb.opened = time.Time{}
	}
}

// watch counts f's fallbacks from the run's origin on.
func (fb *fallbacks) watch(f *fleet.Fleet) {
	f.Observe(fleet.Observer{OnFallback: func(op string, err error) {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		fb.n++
		if fb.first == "" {
			fb.first = fmt.Sprintf("%s at %.2f s: %v", op, time.Since(fb.origin).Seconds(), err)
		}
		fb.errs[fmt.Sprint(err)]++
	}})
}

// report prints the count of the process's fallbacks, if any, with the
// first and the count of each error.
func (fb *fallbacks) report(process string) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.n == 0 {
		return
	}
	if !fb.opened.IsZero() {
		fb.open += time.Since(fb.opened)
	}
	fmt.Fprintf(os.Stderr, "bench: fleet %s went alone %d times, its breaker opened %d times for %.1f s in all (the first: %s; by error: %v)\n",
		process, fb.n, fb.opens, fb.open.Seconds(), fb.first, fb.errs)
}
