package main

import (
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Every answer of a demo server takes between minLatency and maxLatency,
// as a real API's does: the offered load of a client that sends as fast as
// it can is then bounded by its workers, not by the machine's cores.
const (
	minLatency = 10 * time.Millisecond
	maxLatency = 20 * time.Millisecond
)

// binWidth is the width of the bins the servers count requests in, and
// the chart plots.
const binWidth = 100 * time.Millisecond

// A demoServer is one scenario's server for one client, on a loopback port
// of its own, so that clients never share a limiter.
type demoServer struct {
	sc     scenario
	origin time.Time // the run's start: the schedule counts from here
	d      time.Duration
	lim    limiter
	tally  *tally

	url  string
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

// startServer starts sc's server on a free port of 127.0.0.1, for a run
// of length d from origin.
func startServer(sc scenario, origin time.Time, d time.Duration) (*demoServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the %s server: %w", sc.name, err)
	}
	s := &demoServer{
		sc:     sc,
		origin: origin,
		d:      d,
		tally:  newTally(origin, d),
		url:    "http://" + ln.Addr().String() + "/",
		done:   make(chan struct{}),
	}
	if sc.window {
		s.lim = &fixedWindow{quota: int(math.Round(sc.rates[0]))}
	} else {
		s.lim = &bucket{sc: sc, origin: origin, d: d, tokens: demoBurst}
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed once Close is called
	}()
	return s, nil
}

// close stops the server and waits for it.
func (s *demoServer) close() error {
	err := s.srv.Close()
	<-s.done
	if err != nil {
		return fmt.Errorf("stopping the %s server: %w", s.sc.name, err)
	}
	return nil
}

// ServeHTTP answers a request as the scenario's server does: 503 during
// its outage, else what its limiter decides; counts the answer at the
// request's arrival; and takes a real API's time to send it.
func (s *demoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	status := http.StatusServiceUnavailable
	if !s.sc.downAt(now.Sub(s.origin), s.d) {
		status = s.lim.admit(now, w.Header())
	}
	s.tally.add(now, status)

	latency := minLatency + rand.N(maxLatency-minLatency)
	t := time.NewTimer(latency)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
		return
	}
	switch status {
	case http.StatusOK:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	case http.StatusTooManyRequests:
		if s.sc.window {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"message":"API rate limit exceeded","status":"429"}`+"\n")
			return
		}
		http.Error(w, "too many requests", status)
	default:
		http.Error(w, "service unavailable", status)
	}
}

// A limiter decides whether a server lets a request through.
type limiter interface {
	// admit decides on a request arriving at now, and returns
	// http.StatusOK to let it through or the status refusing it. It sets
	// the headers the server sends on h.
	admit(now time.Time, h http.Header) int
}

// A bucket is a token bucket of capacity demoBurst, full at the start,
// whose refill rate follows its scenario's schedule; it refuses with 429
// and a Retry-After in whole seconds, rounded up, as real limiters send
// it. It is safe for concurrent use.
type bucket struct {
	sc     scenario
	origin time.Time
	d      time.Duration

	mu     sync.Mutex
	tokens float64
	last   time.Duration // time since origin of the last refill
}

// admit implements limiter.
func (b *bucket) admit(now time.Time, h http.Header) int {
	ok, wait := b.take(now)
	if ok {
		return http.StatusOK
	}
	h.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	return http.StatusTooManyRequests
}

// take takes a token at now, if there is one; if not, it returns how long
// until there will be.
func (b *bucket) take(now time.Time) (ok bool, wait time.Duration) {
	elapsed := now.Sub(b.origin)
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed > b.last {
		b.tokens = min(demoBurst, b.tokens+b.sc.integral(b.last, elapsed, b.d))
		b.last = elapsed
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	rate := b.sc.rateAt(elapsed, b.d)
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// A fixedWindow allows quota requests in each second of Unix time, and
// says so as GitHub does: X-RateLimit-Limit, -Remaining, -Used and -Reset
// (the window's end in Unix seconds) on every answer, and a 429 without
// Retry-After once the window is spent. It is safe for concurrent use.
type fixedWindow struct {
	quota int

	mu    sync.Mutex
	index int64 // the current window: its start in Unix seconds
	used  int   // requests let through in it so far
}

// admit implements limiter.
func (f *fixedWindow) admit(now time.Time, h http.Header) int {
	index := now.Unix()
	f.mu.Lock()
	if index != f.index {
		f.index, f.used = index, 0
	}
	ok := f.used < f.quota
	if ok {
		f.used++
	}
	used := f.used
	f.mu.Unlock()
	h.Set("X-RateLimit-Limit", strconv.Itoa(f.quota))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(f.quota-used))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(index+1, 10))
	h.Set("X-RateLimit-Resource", "core")
	if !ok {
		return http.StatusTooManyRequests
	}
	return http.StatusOK
}

// A tally counts a server's answers by the bin of the run their request
// arrived in. Requests outside the run are not counted. It is safe for
// concurrent use.
type tally struct {
	origin time.Time
	bins   []tallyBin
	total  tallyBin
}

// A tallyBin counts answers: let through, refused by the limiter (429),
// and failed by the server (503, its outage).
type tallyBin struct {
	accepted, rejected, failed atomic.Int64
}

// newTally returns an empty tally for a run of length d from origin.
func newTally(origin time.Time, d time.Duration) *tally {
	n := int((d + binWidth - 1) / binWidth)
	return &tally{origin: origin, bins: make([]tallyBin, n)}
}

// add counts an answer of status to a request that arrived at at.
func (t *tally) add(at time.Time, status int) {
	elapsed := at.Sub(t.origin)
	if elapsed < 0 {
		return
	}
	i := int(elapsed / binWidth)
	if i >= len(t.bins) {
		return
	}
	for _, b := range []*tallyBin{&t.bins[i], &t.total} {
		switch {
		case status/100 == 2:
			b.accepted.Add(1)
		case status == http.StatusTooManyRequests:
			b.rejected.Add(1)
		default:
			b.failed.Add(1)
		}
	}
}

// counts are a tally's numbers at one moment.
type counts struct {
	accepted, rejected, failed int64
}

// sent returns every request counted.
func (c counts) sent() int64 { return c.accepted + c.rejected + c.failed }

// totals returns the counts of the whole run so far.
func (t *tally) totals() counts {
	return t.total.load()
}

// series returns the counts of every bin.
func (t *tally) series() []counts {
	out := make([]counts, len(t.bins))
	for i := range t.bins {
		out[i] = t.bins[i].load()
	}
	return out
}

// load reads b.
func (b *tallyBin) load() counts {
	return counts{accepted: b.accepted.Load(), rejected: b.rejected.Load(), failed: b.failed.Load()}
}
