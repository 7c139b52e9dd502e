package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/politehttp/polite"
	"golang.org/x/time/rate"
)

// A client is one HTTP client under test.
type client struct {
	name string
	// build returns the client for one run, sending through tr.
	build func(tr http.RoundTripper, cfg clientConfig) *http.Client
	// learn, if not 0, makes the run a restart: the client runs for
	// learnFor against another instance of the server, its limit learn
	// times the run's (2: the limit has halved since), and is built again
	// for the run, from what that one left: clientConfig.memory (a
	// FileMemory), or clientConfig.namespace (the fleet's Redis). See
	// run.
	learn float64
	// join makes the last process of a fleet client join half-way
	// through the run (clientConfig.joined); see buildFleetJoining.
	join bool
}

// clientConfig is what a client may know of a run. Only the oracle looks.
type clientConfig struct {
	profile   profile            // the server's limit over the run
	origin    time.Time          // when the run, and the server's schedule, began
	duration  time.Duration      // length of the run
	fleet     int                // the processes of a fleet client
	redis     string             // the Redis a fleet client shares its quota through
	cleanup   func(func())       // registers what to close when the run ends
	trace     bool               // print the polite client's attempts (see tracer)
	share     float64            // the part of the limit the oracle paces at; 0 or 1: all of it
	memory    *polite.FileMemory // what the process before left, for a client that learns (client.learn)
	namespace string             // the fleet's namespace, for a fleet client that learns; "" for a fresh one
	joined    *joinCount         // what the process that joins the fleet half-way counts (client.join); nil if none
}

// clients returns every client, in the order the table lists them.
func clients() []client {
	return append([]client{
		{name: "oracle", build: buildOracle},
		{name: "polite", build: func(tr http.RoundTripper, cfg clientConfig) *http.Client {
			if cfg.trace {
				return &http.Client{Transport: tracer(tr, cfg.origin)}
			}
			return &http.Client{Transport: polite.New(tr)}
		}},
		{name: "polite-memory", learn: 1, build: withMemory},
		{name: "polite-memory-stale", learn: 2, build: withMemory},
		{name: "polite-cubic", build: func(tr http.RoundTripper, _ clientConfig) *http.Client {
			return &http.Client{Transport: polite.New(tr, polite.WithAdaptive(polite.AdaptiveCubic))}
		}},
		{name: "polite-off", build: func(tr http.RoundTripper, _ clientConfig) *http.Client {
			return &http.Client{Transport: polite.New(tr, polite.WithAdaptive(polite.AdaptiveOff))}
		}},
		{name: "retryablehttp", build: func(tr http.RoundTripper, _ clientConfig) *http.Client {
			c := retryablehttp.NewClient()
			c.Logger = nil
			c.HTTPClient = &http.Client{Transport: tr}
			return c.StandardClient()
		}},
		{name: "plain", build: func(tr http.RoundTripper, _ clientConfig) *http.Client {
			return &http.Client{Transport: tr}
		}},
	}, fleetClients()...)
}

// withMemory returns polite with defaults and the memory the process
// before left.
func withMemory(tr http.RoundTripper, cfg clientConfig) *http.Client {
	return &http.Client{Transport: polite.New(tr, polite.WithMemory(cfg.memory), polite.WithKey(hostname))}
}

// hostname keys requests by the host's name, without its port, for
// the clients with memory and the process before them: each instance of
// a server listens on a port of its own, where a real API's address is
// the same after a restart.
func hostname(r *http.Request) string { return r.URL.Hostname() }

// newTransport returns a fresh transport that keeps an idle connection for
// each of workers.
func newTransport(workers int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 2 * workers
	tr.MaxIdleConnsPerHost = workers
	return tr
}

// buildOracle returns the oracle: it is told the server's true limit and
// its schedule, and paces every request at it with x/time/rate (burst 1,
// shared by all workers), without retries. Through an outage it keeps
// pacing at the limit around it.
func buildOracle(tr http.RoundTripper, cfg clientConfig) *http.Client {
	first := cfg.profile.rateAt(0, cfg.duration)
	return &http.Client{Transport: &oracle{
		next:  tr,
		lim:   rate.NewLimiter(rate.Limit(first), 1),
		cfg:   cfg,
		share: cfg.share,
	}}
}

// oracle is the oracle client's RoundTripper.
type oracle struct {
	next  http.RoundTripper
	lim   *rate.Limiter
	cfg   clientConfig
	share float64 // the part of the limit it paces at; 0 means all of it
}

// errOracleRefused is the oracle's error for a call whose turn would come
// after its deadline.
var errOracleRefused = errors.New("oracle: the turn would come after the deadline")

// RoundTrip waits for the limiter, at the rate the schedule has now, then
// sends req once.
func (o *oracle) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := o.wait(req.Context()); err != nil {
		return nil, err
	}
	return o.next.RoundTrip(req)
}

// wait waits for a turn at the current rate. A turn that would fall after
// the next change of rate is not taken: the caller sleeps until the change
// and queues again at the new rate, so no turn is spaced by a stale rate.
func (o *oracle) wait(ctx context.Context) error {
	for {
		now := time.Now()
		elapsed := now.Sub(o.cfg.origin)
		r := rate.Limit(o.cfg.profile.rateAt(elapsed, o.cfg.duration))
		if o.share > 0 {
			r *= rate.Limit(o.share)
		}
		if o.lim.Limit() != r {
			o.lim.SetLimitAt(now, r)
		}
		change, ok := o.cfg.profile.nextChange(elapsed, o.cfg.duration)
		if !ok {
			return o.refused(ctx, o.lim.Wait(ctx))
		}
		at := o.cfg.origin.Add(change)
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
		if deadline, ok := ctx.Deadline(); ok && deadline.Before(at) {
			return o.refused(ctx, err) // the call's own deadline, not the change of rate
		}
		t := time.NewTimer(time.Until(at))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// refused returns err, marked as the oracle's refusal when the limiter
// refused a wait that would pass the call's deadline.
func (o *oracle) refused(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: %w", errOracleRefused, err)
}

// tracer returns a polite Transport with defaults that prints each attempt
// on stderr: the time since origin, its status (or error), and what the
// Transport then knows of the key (its rate and the server's limit), for
// reading how the controller follows a server.
func tracer(tr http.RoundTripper, origin time.Time) *polite.Transport {
	opt, set := traceHooks("", origin)
	t := polite.New(tr, opt)
	set(t)
	return t
}

// traceHooks returns the hooks of a traced Transport (see tracer), its
// lines marked with who (a fleet's process; "" for none), and the func
// that tells them the Transport they hook.
func traceHooks(who string, origin time.Time) (polite.Option, func(*polite.Transport)) {
	var t atomic.Pointer[polite.Transport]
	var mu sync.Mutex
	return polite.WithHooks(polite.Hooks{OnAttempt: func(e polite.Event) {
		var rate, limit float64
		if tr := t.Load(); tr != nil {
			for s := range tr.Keys() {
				rate, limit = s.Rate, s.Limit
			}
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stderr, "trace %8.4f %s attempt %d priority %d status %d err %v delay %v rate %.1f limit %.1f\n",
			time.Since(origin).Seconds(), who, e.Attempt, e.Priority, e.StatusCode, e.Err, e.Delay, rate, limit)
	}}), t.Store
}
