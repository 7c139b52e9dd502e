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

// A scenario is one run of a scenario of issue 38 (priorities, tenants)
// against a fresh instance of a server: callers of their own, started
// with go, through one polite Transport, until the run's end.
type scenario struct {
	server server
	prof   profile
	inst   *instance
	tr     *http.Transport // the transport under polite
	// ctx is cancelled at the run's end, end.
	ctx  context.Context
	end  time.Time
	stop func()
	wg   sync.WaitGroup
}

// startScenario starts a fresh instance of s at the run's limit, and the
// run's clock.
func startScenario(s server, cfg runConfig) (*scenario, error) {
	prof := s.profile(cfg.limit)
	inst, err := s.start(serverConfig{limit: cfg.limit, duration: cfg.duration, profile: prof})
	if err != nil {
		return nil, err
	}
	sc := &scenario{server: s, prof: prof, inst: inst, tr: newTransport(32)}
	sc.ctx, sc.end, sc.stop = runClock(inst.origin, cfg.duration)
	return sc, nil
}

// goCall runs f in a caller of its own, which finish waits for.
func (sc *scenario) goCall(f func()) { sc.wg.Go(f) }

// finish waits for the run's end, then for its callers (drainGrace at
// most), stops the server, and returns the server's counts of the run.
func (sc *scenario) finish(cfg runConfig) (result, error) {
	<-sc.ctx.Done()
	sc.stop()
	done := make(chan struct{})
	go func() {
		sc.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-time.After(drainGrace):
		err = fmt.Errorf("callers still busy %v after the run's end", drainGrace)
	}
	sc.tr.CloseIdleConnections()
	arrivals, stopErr := sc.inst.stop()
	if err := errors.Join(err, stopErr); err != nil {
		return result{}, err
	}
	return summarize(sc.server.name, "polite", sc.prof, sc.inst.origin, cfg.duration, arrivals, nil), nil
}

// backlog starts n callers that each call the server through hc with ctx, no
// deadline, again as soon as its last call ends, until ctx is done; each
// call's outcome goes to done (nil: not told).
func (sc *scenario) backlog(ctx context.Context, n int, hc *http.Client, done func(ok bool, err error)) {
	for range n {
		sc.goCall(func() {
			for ctx.Err() == nil {
				ok, err := call(ctx, hc, sc.inst.url, 0)
				if done != nil {
					done(ok, err)
				}
			}
		})
	}
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

// A scenarioRow is one row of a scenario's table: its cells, or, for a
// run that failed, its leading cells (what ran) and the error.
type scenarioRow struct {
	cells []string
	err   error
}

// writeScenario prints a scenario's table on stdout after its heading: the
// header, then a row a run, a failed run's error in the last column; the
// columns numeric tells are aligned right. It returns the exit status: 1
// if a run failed.
func writeScenario(heading string, header []string, numeric func(int) bool, rows []scenarioRow) int {
	fmt.Printf("%s\n\n", heading)
	table := [][]string{header}
	status := 0
	for _, r := range rows {
		cells := r.cells
		if r.err != nil {
			cells = make([]string, len(header))
			copy(cells, r.cells)
			cells[len(cells)-1] = note("error: " + r.err.Error())
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
