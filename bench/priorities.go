package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
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
	// slowInteractive is the wait past which -trace prints an interactive
	// call, with when it began.
	slowInteractive = 100 * time.Millisecond
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
// its two clients, prints a table, and returns the exit status. Warm, each
// run's process restarts with the memory of a process before it (learn,
// the bench's polite-memory client): the key's limit is known, and the
// run has no first contact.
func benchPriorities(srvs []server, cfg runConfig, warm bool) int {
	name := "polite"
	if warm {
		name = "polite-memory"
	}
	results := eachPriorityRun(srvs, name, func(s server, prioritized bool) priorityResult {
		procs := onePolite
		if cfg.trace {
			procs = onePoliteTraced
		}
		if warm {
			mem, err := learn(s, namedClient(clients(), "polite-memory"), cfg)
			if err != nil {
				return priorityResult{err: fmt.Errorf("the process before: %w", err)}
			}
			defer mem.file.Close()
			procs = func(tr http.RoundTripper, _ time.Time) (batch, interactive *http.Client, done func()) {
				hc := withMemory(tr, clientConfig{memory: mem.file})
				return hc, hc, func() {}
			}
		}
		return runPriorities(s, prioritized, cfg, priorityBacklog, procs)
	})
	heading := "%v per run, L = %v requests/s, a backlog of %d batch calls, an interactive call every %v (deadline %v)"
	if warm {
		heading += ", each process restarted with the memory of one before it"
	}
	return printPriorities(fmt.Sprintf(heading, cfg.duration, cfg.limit, priorityBacklog, interactiveEvery, cfg.deadline), results, cfg, false)
}

// eachPriorityRun runs the priority scenario on each server with client,
// first with every call at the default priority, then with priorities
// (withAndWithout).
func eachPriorityRun(srvs []server, client string, run func(s server, prioritized bool) priorityResult) []priorityResult {
	return withAndWithout(serverNames(srvs), client, "priorities", func(i int, prioritized bool, name string) priorityResult {
		r := run(srvs[i], prioritized)
		r.server, r.client = srvs[i].name, name
		return r
	}, func(r priorityResult) (string, error) {
		return fmt.Sprintf("utilization %.2f, %d interactive calls, %d failed", r.utilization, r.interactive, r.failed), r.err
	})
}

// printPriorities prints the table of the priority scenario's results
// after heading, with the Redis script calls per request if calls, and
// returns the exit status: 1 if a run failed.
func printPriorities(heading string, results []priorityResult, cfg runConfig, calls bool) int {
	header := []string{"server", "client", "utilization", "rejected", "interactive calls", "failed", "wait p50", "wait p99", "wait max", "batch/s"}
	if calls {
		header = append(header, "script calls/request")
	}
	return writeScenario(heading, header, func(i int) bool { return i >= 2 }, results, func(r priorityResult) ([]string, error) {
		cells := []string{r.server, r.client}
		if r.err != nil {
			return cells, r.err
		}
		cells = append(cells, fmt.Sprintf("%.2f", r.utilization), percent(r.rejected), strconv.Itoa(r.interactive),
			strconv.Itoa(r.failed), quantile(r.waits, 0.5), quantile(r.waits, 0.99), quantile(r.waits, 1),
			fmt.Sprintf("%.1f", float64(r.batch)/cfg.duration.Seconds()))
		if calls {
			cells = append(cells, fmt.Sprintf("%.2f", r.scriptCalls))
		}
		return cells, nil
	})
}

// quantile returns the q-quantile of sorted durations, rounded, or "-".
func quantile(sorted []time.Duration, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return sorted[i].Round(time.Millisecond).String()
}

// priorityClients returns the clients of a run of the priority scenario,
// sending through tr: that of the batch calls and that of the interactive
// ones (one client, or the processes of a fleet), and what closes them at
// the run's end. origin is the run's start.
type priorityClients func(tr http.RoundTripper, origin time.Time) (batch, interactive *http.Client, done func())

// onePolite is the priority scenario's clients in one process: one polite
// Transport with the defaults for the batch and the interactive calls.
func onePolite(tr http.RoundTripper, _ time.Time) (batch, interactive *http.Client, done func()) {
	hc := &http.Client{Transport: polite.New(tr)}
	return hc, hc, func() {}
}

// onePoliteTraced is onePolite, its attempts printed on stderr (tracer).
func onePoliteTraced(tr http.RoundTripper, origin time.Time) (batch, interactive *http.Client, done func()) {
	hc := &http.Client{Transport: tracer(tr, origin)}
	return hc, hc, func() {}
}

// priorityContexts returns the contexts of a run's batch and interactive
// calls, under ctx: prioritized, at PriorityBatch and
// PriorityInteractive; otherwise both ctx, at the default priority.
func priorityContexts(ctx context.Context, prioritized bool) (batch, interactive context.Context) {
	if !prioritized {
		return ctx, ctx
	}
	return polite.ContextWithPriority(ctx, polite.PriorityBatch), polite.ContextWithPriority(ctx, polite.PriorityInteractive)
}

// runPriorities runs the priority scenario once against a fresh instance
// of s, with backlog batch callers and the clients clients returns:
// prioritized, the interactive and batch calls say their priorities;
// otherwise every call has the default one.
func runPriorities(s server, prioritized bool, cfg runConfig, backlog int, clients priorityClients) priorityResult {
	sc, err := startScenario(s, cfg)
	if err != nil {
		return priorityResult{err: err}
	}
	batchHC, interactiveHC, closeClients := clients(sc.tr, sc.inst.origin)
	defer closeClients()
	batchCtx, interactiveCtx := priorityContexts(sc.ctx, prioritized)
	var batch atomic.Int64
	sc.backlog(batchCtx, backlog, batchHC, func(ok bool, _ error) {
		if ok && time.Now().Before(sc.end) {
			batch.Add(1)
		}
	})
	var mu sync.Mutex
	var r priorityResult
	sc.every(interactiveEvery, func() {
		began := time.Now()
		ok, err := call(interactiveCtx, interactiveHC, sc.inst.url, cfg.deadline)
		finished := time.Now()
		if !finished.Before(sc.end) && errors.Is(err, context.Canceled) {
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
		if cfg.trace && finished.Sub(began) > slowInteractive {
			fmt.Fprintf(os.Stderr, "trace %8.4f slow interactive call: waited %v\n", began.Sub(sc.inst.origin).Seconds(), finished.Sub(began).Round(time.Millisecond))
		}
	})
	sum, err := sc.finish(cfg)
	if err != nil {
		return priorityResult{err: err}
	}
	r.utilization, r.rejected, r.batch, r.sent = sum.Utilization, sum.Rejected, int(batch.Load()), sc.sent
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
