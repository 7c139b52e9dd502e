package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite"
)

// The priority scenario (issue 38): one key, a backlog of batch calls
// that never empties (each of priorityBacklog callers sends a batch call
// again as soon as its last one ends: at L = 100 a second, 100 s of work
// waits at any moment), and an interactive call every
// interactiveEvery, each with the run's deadline (10 s by default), as a
// person waits on it. The batch calls have no deadline: a batch job has
// none. Two clients: polite with every call at the default priority
// (first come, first served: the interactive call waits behind the
// backlog, and is refused at once for its deadline), and polite with the
// interactive calls at PriorityInteractive and the batch ones at
// PriorityBatch.
const (
	priorityBacklog  = 10000
	interactiveEvery = 200 * time.Millisecond
)

// priorityResult is one run of the priority scenario.
type priorityResult struct {
	server, client        string
	utilization, rejected float64
	interactive, failed   int             // interactive calls that ended in the run, and of them those that failed
	waits                 []time.Duration // of the interactive calls that succeeded, sorted
	batch                 int             // batch calls that succeeded in the run
	sent                  int             // requests the server saw
	scriptCalls           float64         // Redis script calls per request the server saw (a fleet's; 0 alone)
	err                   error
}

// benchPriorities runs the priority scenario on each server with each of
// its two clients, prints a table, and returns the exit status.
func benchPriorities(srvs []server, cfg runConfig) int {
	results := eachPriorityRun(srvs, "polite", func(s server, prioritized bool) priorityResult {
		return runPriorities(s, prioritized, cfg)
	})
	fmt.Printf("%v per run, L = %v requests/s, a backlog of %d batch calls, an interactive call every %v (deadline %v)\n\n",
		cfg.duration, cfg.limit, priorityBacklog, interactiveEvery, cfg.deadline)
	return printPriorities(results, cfg, false)
}

// eachPriorityRun runs the priority scenario on each server with client,
// first with every call at the default priority, then with priorities,
// telling of each run on stderr.
func eachPriorityRun(srvs []server, client string, run func(s server, prioritized bool) priorityResult) []priorityResult {
	var results []priorityResult
	for _, s := range srvs {
		for _, prioritized := range []bool{false, true} {
			name := client + " (no priorities)"
			if prioritized {
				name = client + " (priorities)"
			}
			fmt.Fprintf(os.Stderr, "%s × %s: ", s.name, name)
			r := run(s, prioritized)
			r.server, r.client = s.name, name
			if r.err != nil {
				fmt.Fprintf(os.Stderr, "error: %v\n", r.err)
			} else {
				fmt.Fprintf(os.Stderr, "utilization %.2f, %d interactive calls, %d failed\n", r.utilization, r.interactive, r.failed)
			}
			results = append(results, r)
		}
	}
	return results
}

// printPriorities prints the table of the priority scenario's results,
// with the Redis script calls per request if calls, and returns the exit
// status: 1 if a run failed.
func printPriorities(results []priorityResult, cfg runConfig, calls bool) int {
	head, rule, empty := "", "", ""
	if calls {
		head, rule, empty = " script calls/request |", " -------------------: |", " |"
	}
	fmt.Println("| server | client | utilization | rejected | interactive calls | failed | wait p50 | wait p99 | wait max | batch/s |" + head)
	fmt.Println("| ------ | ------ | ----------: | -------: | ----------------: | -----: | -------: | -------: | -------: | ------: |" + rule)
	status := 0
	for _, r := range results {
		if r.err != nil {
			fmt.Printf("| %s | %s | | | | | | | | error: %v |%s\n", r.server, r.client, r.err, empty)
			status = 1
			continue
		}
		fmt.Printf("| %s | %s | %.2f | %s | %d | %d | %s | %s | %s | %.1f |", r.server, r.client, r.utilization,
			percent(r.rejected), r.interactive, r.failed, quantile(r.waits, 0.5), quantile(r.waits, 0.99),
			quantile(r.waits, 1), float64(r.batch)/cfg.duration.Seconds())
		if calls {
			fmt.Printf(" %.2f |", r.scriptCalls)
		}
		fmt.Println()
	}
	return status
}

// quantile returns the q-quantile of sorted durations, rounded, or "-".
func quantile(sorted []time.Duration, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return sorted[i].Round(time.Millisecond).String()
}

// runPriorities runs the priority scenario once against a fresh instance
// of s: prioritized, the interactive and batch calls say their
// priorities; otherwise every call has the default one.
func runPriorities(s server, prioritized bool, cfg runConfig) priorityResult {
	return runPrioritiesWith(s, prioritized, cfg, priorityBacklog, func(tr http.RoundTripper, _ time.Time) (batch, interactive *http.Client, done func()) {
		hc := &http.Client{Transport: polite.New(tr)}
		return hc, hc, func() {}
	})
}

// priorityClients returns the clients of a run of the priority scenario,
// sending through tr: that of the batch calls and that of the interactive
// ones (one client, or the processes of a fleet), and what closes them at
// the run's end. origin is the run's start.
type priorityClients func(tr http.RoundTripper, origin time.Time) (batch, interactive *http.Client, done func())

// runPrioritiesWith is runPriorities with the clients clients returns,
// and backlog batch callers.
func runPrioritiesWith(s server, prioritized bool, cfg runConfig, backlog int, clients priorityClients) priorityResult {
	prof := s.profile(cfg.limit)
	inst, err := s.start(serverConfig{limit: cfg.limit, duration: cfg.duration, profile: prof})
	if err != nil {
		return priorityResult{err: err}
	}
	tr := newTransport(32)
	batchHC, interactiveHC, closeClients := clients(tr, inst.origin)
	defer closeClients()
	end := inst.origin.Add(cfg.duration)
	ctx, cancel := context.WithCancel(context.Background())
	stopTimer := time.AfterFunc(time.Until(end), cancel)

	batchCtx, interactiveCtx := ctx, ctx
	if prioritized {
		batchCtx = polite.ContextWithPriority(ctx, polite.PriorityBatch)
		interactiveCtx = polite.ContextWithPriority(ctx, polite.PriorityInteractive)
	}
	var batch atomic.Int64
	var wg sync.WaitGroup
	for range backlog {
		wg.Go(func() {
			for ctx.Err() == nil {
				if ok, _ := call(batchCtx, batchHC, inst.url, 0); ok && time.Now().Before(end) {
					batch.Add(1)
				}
			}
		})
	}
	var mu sync.Mutex
	var r priorityResult
	tick := time.NewTicker(interactiveEvery)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			wg.Go(func() {
				began := time.Now()
				ok, err := call(interactiveCtx, interactiveHC, inst.url, cfg.deadline)
				finished := time.Now()
				if !finished.Before(end) && errors.Is(err, context.Canceled) {
					return // cut by the run's end, not refused
				}
				mu.Lock()
				defer mu.Unlock()
				r.interactive++
				if !ok {
					r.failed++
					return
				}
				r.waits = append(r.waits, finished.Sub(began))
			})
		}
	}
	tick.Stop()
	stopTimer.Stop()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainGrace):
		r.err = fmt.Errorf("callers still busy %v after the run's end", drainGrace)
	}
	tr.CloseIdleConnections()
	arrivals, stopErr := inst.stop()
	if err := errors.Join(r.err, stopErr); err != nil {
		return priorityResult{err: err}
	}
	sum := summarize(s.name, "polite", prof, inst.origin, cfg.duration, arrivals, nil)
	r.utilization, r.rejected, r.batch, r.sent = sum.Utilization, sum.Rejected, int(batch.Load()), len(arrivals)
	slices.Sort(r.waits)
	return r
}

// call sends GET url through hc with ctx, and a deadline of its own (none
// if 0), and reports whether it ended in a 2xx.
func call(ctx context.Context, hc *http.Client, url string, deadline time.Duration) (bool, error) {
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		panic(err) // the URL is the bench's own
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	return resp.StatusCode/100 == 2, nil
}
