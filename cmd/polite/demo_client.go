package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// The demo's clients, in the order the table and the chart list them.
const (
	clientPlain  = "plain"  // http.Client, no retries
	clientOracle = "oracle" // told the true schedule, paces at it
	clientPolite = "polite" // polite.New with its defaults
)

// clientNames returns the demo's clients in order.
func clientNames() []string {
	return []string{clientPlain, clientOracle, clientPolite}
}

// demoWorkers is the closed-loop workers of each client: each sends a GET
// as soon as its last one has returned.
const demoWorkers = 8

// drainGrace bounds how long the workers may take to return once the run
// has ended and their context is cancelled.
const drainGrace = 5 * time.Second

// A fleetConfig says how the polite client runs as a fleet: size
// Transports sharing one quota through the Redis at addr.
type fleetConfig struct {
	size int
	addr string
	ns   string // the Redis keys' namespace, new for each demo
}

// A demoRun is one client against a server of one scenario of its own.
type demoRun struct {
	sc      scenario
	client  string
	srv     *demoServer
	tr      *http.Transport
	hcs     []*http.Client // worker i sends through hcs[i%len(hcs)]
	workers int
	closers []func() error // run by close, last first
	closed  bool
}

// newRun starts sc's server for client and builds the client, for a run
// of length d from origin; fl, if not nil, makes polite a fleet.
func newRun(sc scenario, client string, origin time.Time, d time.Duration, fl *fleetConfig) (*demoRun, error) {
	srv, err := startServer(sc, origin, d)
	if err != nil {
		return nil, err
	}
	r := &demoRun{sc: sc, client: client, srv: srv, workers: demoWorkers}
	r.tr = http.DefaultTransport.(*http.Transport).Clone()
	r.tr.Proxy = nil
	r.tr.MaxIdleConns = 2 * demoWorkers
	r.tr.MaxIdleConnsPerHost = 2 * demoWorkers
	r.closers = append(r.closers, srv.close, func() error {
		r.tr.CloseIdleConnections()
		return nil
	})
	switch client {
	case clientPlain:
		r.hcs = []*http.Client{{Transport: r.tr}}
	case clientOracle:
		r.hcs = []*http.Client{{Transport: newOracle(r.tr, sc, origin, d)}}
	case clientPolite:
		if fl == nil {
			r.hcs = []*http.Client{{Transport: polite.New(r.tr)}}
			break
		}
		// N Transports, as N processes would have, each with a Redis
		// client of its own, sharing the quota; the workers are spread
		// over them, one at least each.
		r.workers = max(demoWorkers, fl.size)
		for i := range fl.size {
			rdb := redis.NewClient(&redis.Options{Addr: fl.addr})
			f := fleet.New(rdb, fleet.WithSize(fl.size), fleet.WithNamespace(fl.ns), fleet.WithMember(fmt.Sprint(i)))
			r.closers = append(r.closers, rdb.Close, f.Close) // the fleet closed before its client
			r.hcs = append(r.hcs, &http.Client{Transport: polite.New(r.tr, polite.WithFleet(f))})
		}
	default:
		_ = r.close()
		return nil, fmt.Errorf("no client %q", client)
	}
	return r, nil
}

// start starts the run's workers: each waits for the server's origin, then
// sends GET requests one after another until ctx is done. wg counts them.
func (r *demoRun) start(ctx context.Context, wg *sync.WaitGroup) {
	for i := range r.workers {
		hc := r.hcs[i%len(r.hcs)]
		wg.Go(func() {
			if sleep(ctx, time.Until(r.srv.origin)) != nil {
				return
			}
			work(ctx, hc, r.srv.url)
		})
	}
}

// close stops the run's server and frees its client. Closing it again
// does nothing.
func (r *demoRun) close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for i := len(r.closers) - 1; i >= 0; i-- {
		errs = append(errs, r.closers[i]())
	}
	return errors.Join(errs...)
}

// work sends GET url with hc in a loop until ctx is done, reading and
// closing every body.
func work(ctx context.Context, hc *http.Client, url string) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return // the URL is the demo's own: this does not happen
		}
		resp, err := hc.Do(req)
		if err != nil {
			// Not the server's answer: do not spin on a broken
			// connection.
			_ = sleep(ctx, minLatency)
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
	}
}

// sleep waits for d or until ctx is done, and returns ctx's error if it
// was done first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// An oracle is the reference client: it is told its server's true
// schedule and paces every request at it with x/time/rate (burst 1, shared
// by all workers), without retries. Through an outage it keeps pacing at
// the limit around it.
type oracle struct {
	next   http.RoundTripper
	lim    *rate.Limiter
	sc     scenario
	origin time.Time
	d      time.Duration
}

// newOracle returns the oracle for sc over a run of length d from origin,
// sending through next.
func newOracle(next http.RoundTripper, sc scenario, origin time.Time, d time.Duration) *oracle {
	return &oracle{next: next, lim: rate.NewLimiter(rate.Limit(sc.rates[0]), 1), sc: sc, origin: origin, d: d}
}

// RoundTrip waits for a turn at the current limit, then sends req once.
// If it gives up waiting, it closes req's body, as a RoundTripper must.
func (o *oracle) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := o.wait(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return o.next.RoundTrip(req)
}

// wait waits for a turn at the current limit. A turn that would fall after
// the next change of limit is not taken: the caller sleeps until the
// change and queues again at the new limit, so no turn is spaced by a
// stale one.
func (o *oracle) wait(ctx context.Context) error {
	for {
		now := time.Now()
		elapsed := now.Sub(o.origin)
		if r := rate.Limit(o.sc.rateAt(elapsed, o.d)); o.lim.Limit() != r {
			o.lim.SetLimitAt(now, r)
		}
		change, ok := o.sc.nextChange(elapsed, o.d)
		if !ok {
			return o.lim.Wait(ctx)
		}
		at := o.origin.Add(change)
		// Wait fails at once, taking no token, if the turn is after at.
		phase, cancel := context.WithDeadline(ctx, at)
		err := o.lim.Wait(phase)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if err := sleep(ctx, time.Until(at)); err != nil {
			return err
		}
	}
}

// startRedis returns the address of the Redis a fleet shares its quota
// through, and what to tell the user of it: REDIS_ADDR if it is set, or
// else a Redis in this process (miniredis), stopped by the returned func.
func startRedis(ctx context.Context, e *env) (addr, desc string, stop func(), err error) {
	if addr := e.getenv("REDIS_ADDR"); addr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := rdb.Ping(pctx).Err(); err != nil {
			return "", "", nil, fmt.Errorf("reaching the Redis at REDIS_ADDR=%s: %w", addr, err)
		}
		return addr, "Redis at " + addr + " (REDIS_ADDR)", func() {}, nil
	}
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return "", "", nil, fmt.Errorf("starting an in-process Redis: %w", err)
	}
	// miniredis's TTLs move only when told to: tick them along, although
	// polite's correctness never depends on expiry.
	done := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(binWidth)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.FastForward(binWidth)
			case <-done:
				return
			}
		}
	}()
	stop = func() {
		close(done)
		<-ticked
		m.Close()
	}
	return m.Addr(), "an in-process Redis (miniredis; set REDIS_ADDR to use a real one)", stop, nil
}
