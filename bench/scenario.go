package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// The scenarios of issue 38 (-priorities, -priorities-fleet, -tenants,
// -priorities-llm) share what is here: each runs its client twice on
// each target, told nothing of what it measures and then told it
// (withAndWithout); a run's callers go on a clock of their own (callers);
// a run against a real server starts a fresh instance of it (scenario);
// and the runs make one table (writeScenario).

// callers is a run's clock and the callers started in it, each with go.
type callers struct {
	// ctx is cancelled at the run's end, end.
	ctx  context.Context
	end  time.Time
	stop func()
	wg   sync.WaitGroup
}

// startCallers starts a run's clock at from, for d.
func startCallers(from time.Time, d time.Duration) *callers {
	c := &callers{}
	c.ctx, c.end, c.stop = runClock(from, d)
	return c
}

// goCall runs f in a caller of its own, which wait waits for.
func (c *callers) goCall(f func()) { c.wg.Go(f) }

// loop starts n callers that each call f, again as soon as it returns,
// until ctx (the run's, or one under it) is done.
func (c *callers) loop(ctx context.Context, n int, f func()) {
	for range n {
		c.goCall(func() {
			for ctx.Err() == nil {
				f()
			}
		})
	}
}

// every runs f in a caller of its own every d until the run's end, and
// returns then.
func (c *callers) every(d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for c.ctx.Err() == nil {
		select {
		case <-c.ctx.Done():
		case <-tick.C:
			c.goCall(f)
		}
	}
}

// wait waits for the run's end, then for its callers (drainGrace at
// most).
func (c *callers) wait() error {
	<-c.ctx.Done()
	c.stop()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(drainGrace):
		return fmt.Errorf("callers still busy %v after the run's end", drainGrace)
	}
}

// A scenario is one run of a scenario against a fresh instance of a
// server: callers of their own through one transport, until the run's
// end.
type scenario struct {
	*callers
	server server
	prof   profile
	inst   *instance
	tr     *http.Transport // the transport under the clients
	sent   int             // the requests the server saw, in the run or not, once finished
}

// startScenario starts a fresh instance of s at the run's limit, and the
// run's clock.
func startScenario(s server, cfg runConfig) (*scenario, error) {
	prof := s.profile(cfg.limit)
	inst, err := s.start(serverConfig{limit: cfg.limit, duration: cfg.duration, profile: prof})
	if err != nil {
		return nil, err
	}
	return &scenario{callers: startCallers(inst.origin, cfg.duration), server: s, prof: prof, inst: inst, tr: newTransport(32)}, nil
}

// finish waits for the run's end and its callers, stops the server, and
// returns the server's counts of the run.
func (sc *scenario) finish(cfg runConfig) (result, error) {
	err := sc.wait()
	sc.tr.CloseIdleConnections()
	arrivals, stopErr := sc.inst.stop()
	if err := errors.Join(err, stopErr); err != nil {
		return result{}, err
	}
	sc.sent = len(arrivals)
	return summarize(sc.server.name, "polite", sc.prof, sc.inst.origin, cfg.duration, arrivals, nil), nil
}

// backlog starts n callers that each call the server through hc with ctx, no
// deadline, again as soon as its last call ends, until ctx is done; each
// call's outcome goes to done.
func (sc *scenario) backlog(ctx context.Context, n int, hc *http.Client, done func(ok bool, err error)) {
	sc.loop(ctx, n, func() { done(call(ctx, hc, sc.inst.url, 0)) })
}

// scenarioServers returns the servers a scenario runs on: those of
// -servers if it was given, else tollbooth, nginx and HAProxy.
func scenarioServers(list string, srvs []server) []server {
	if list != "" {
		return srvs
	}
	out, err := pick("tollbooth,nginx,haproxy", servers(), serverName)
	if err != nil {
		panic(err) // the names are the bench's own
	}
	return out
}

// writeScenario prints a scenario's table on stdout after its heading: the
// header, then a row a run, its cells as row makes them; row returns a
// failed run's leading cells (what ran) and its error, which goes in the
// last column. The columns numeric tells are aligned right. It returns the
// exit status: 1 if a run failed.
func writeScenario[R any](heading string, header []string, numeric func(int) bool, results []R, row func(R) ([]string, error)) int {
	fmt.Printf("%s\n\n", heading)
	table := [][]string{header}
	status := 0
	for _, r := range results {
		cells, err := row(r)
		if err != nil {
			lead := cells
			cells = make([]string, len(header))
			copy(cells, lead)
			cells[len(cells)-1] = note("error: " + err.Error())
			status = 1
		}
		table = append(table, cells)
	}
	writeMarkdown(os.Stdout, table, numeric)
	return status
}

// runClock starts a run's clock at from: it returns a context cancelled at
// from+d (a plain cancel, not a deadline: no call fails for the run's
// end), that end, and what stops the clock (the context is cancelled then
// too).
func runClock(from time.Time, d time.Duration) (ctx context.Context, end time.Time, stop func()) {
	end = from.Add(d)
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(time.Until(end), cancel)
	return ctx, end, func() {
		timer.Stop()
		cancel()
	}
}

// withAndWithout runs a scenario on each of targets (the servers', or the
// fake's, names), first with base told nothing of what the scenario
// measures, then told it (told): its clients are named base+" (no
// "+what+")" and base+" ("+what+")". It tells each run's progress on
// stderr: done returns what a run came to, or the error it failed with.
func withAndWithout[R any](targets []string, base, what string, run func(i int, told bool, client string) R, done func(R) (string, error)) []R {
	var results []R
	for i, target := range targets {
		for _, told := range []bool{false, true} {
			client := base + " (no " + what + ")"
			if told {
				client = base + " (" + what + ")"
			}
			fmt.Fprintf(os.Stderr, "%s × %s: ", target, client)
			r := run(i, told, client)
			if line, err := done(r); err != nil {
				fmt.Fprintf(os.Stderr, "error: %v\n", err)
			} else {
				fmt.Fprintln(os.Stderr, line)
			}
			results = append(results, r)
		}
	}
	return results
}

// serverNames returns the names of srvs.
func serverNames(srvs []server) []string {
	ns := make([]string, len(srvs))
	for i, s := range srvs {
		ns[i] = s.name
	}
	return ns
}
