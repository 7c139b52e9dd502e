package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/politehttp/polite"
)

// drainGrace bounds how long the workers may take to return once the run
// has ended and their context is cancelled.
const drainGrace = 5 * time.Second

// runConfig is the work every pair of server and client is given.
type runConfig struct {
	limit    float64       // L, requests per second
	duration time.Duration // length of each run
	workers  int           // closed-loop workers, each calling GET in a loop
	deadline time.Duration // each call's deadline, as its caller sets it; none if 0
	fleet    int           // the processes of a fleet client
	redis    string        // the Redis of the fleet clients
	trace    bool          // print every attempt of the polite client, with its key's status
	share    float64       // the part of the limit the oracle paces at (1: all of it)
}

// workerStats is what one worker saw of its completed calls.
type workerStats struct {
	durations []time.Duration // of every call completed before the run's end
	ok        []time.Duration // of those that ended in a 2xx
	failed    int             // calls that ended in an error or a non-2xx
	local     int             // of those, calls the client failed without the server's answer (see isLocal)
	timedOut  int             // of those, calls that ran into their deadline
}

// run runs one client against a fresh instance of one server for
// cfg.duration and measures both sides.
func run(s server, c client, cfg runConfig) (result, error) {
	var mem memoryConfig
	if c.learn > 0 {
		var err error
		if mem, err = learn(s, c, cfg); err != nil {
			return result{}, fmt.Errorf("the process before: %w", err)
		}
		defer mem.file.Close()
	}
	prof := s.profile(cfg.limit)
	inst, err := s.start(serverConfig{limit: cfg.limit, duration: cfg.duration, profile: prof})
	if err != nil {
		return result{}, err
	}
	var joined *joinCount
	if c.join {
		joined = &joinCount{At: cfg.duration / 2}
	}
	stats, err := runClient(c, inst, prof, cfg, mem, joined)
	arrivals, stopErr := inst.stop()
	if err := errors.Join(err, stopErr); err != nil {
		return result{}, err
	}
	r := summarize(s.name, c.name, prof, inst.origin, cfg.duration, arrivals, stats)
	if c.learn > 0 {
		r.FirstSecond = firstSecond(r, prof, cfg.duration)
	}
	r.Joined = joined
	return r, nil
}

// memoryConfig is what a client that restarts (client.learn) starts from.
type memoryConfig struct {
	file      *polite.FileMemory // the memory the process before left
	namespace string             // the fleet's namespace in Redis, which its Memory is in
}

// runClient builds c for a run against inst and runs its workers, closing
// what the client registered (its fleet, its memories) at the end.
func runClient(c client, inst *instance, prof profile, cfg runConfig, mem memoryConfig, joined *joinCount) ([]workerStats, error) {
	tr := newTransport(cfg.workers)
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- { // the last registered first
			closers[i]()
		}
	}()
	hc := c.build(tr, clientConfig{profile: prof, origin: inst.origin, duration: cfg.duration, trace: cfg.trace,
		fleet: cfg.fleet, redis: cfg.redis, share: cfg.share, memory: mem.file, namespace: mem.namespace, joined: joined,
		cleanup: func(f func()) { closers = append(closers, f) }})
	return drive(hc, tr, inst, cfg)
}

// learnFor is how long the process before a client with memory runs
// (client.learn): long enough for polite to have found the limit of
// every server of the bench, and seen its probes confirm it for 16 s
// (so that the process after holds it 16 s before its first probe, as
// the process before would have: a limit that has stood is probed less
// often).
const learnFor = 20 * time.Second

// learn runs c against a fresh instance of s, its limit c.learn times the
// run's, for learnFor, with a FileMemory in a temporary file (and, for a
// fleet, a fleet namespace of its own), and returns that memory reopened
// from its file, and the namespace: the process (or the fleet) before a
// restart. The instance is stopped first, so that the run's own starts
// cold, as after a restart that took a while.
func learn(s server, c client, cfg runConfig) (memoryConfig, error) {
	dir, err := os.MkdirTemp("", "polite-bench-memory")
	if err != nil {
		return memoryConfig{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "memory")
	before, err := polite.OpenFileMemory(path)
	if err != nil {
		return memoryConfig{}, err
	}
	mem := memoryConfig{file: before, namespace: fmt.Sprintf("bench-%d", time.Now().UnixNano())}
	learning := cfg
	learning.limit, learning.duration = c.learn*cfg.limit, learnFor
	prof := s.profile(learning.limit)
	inst, err := s.start(serverConfig{limit: learning.limit, duration: learnFor, profile: prof})
	if err != nil {
		before.Close()
		return memoryConfig{}, err
	}
	_, err = runClient(c, inst, prof, learning, mem, nil)
	_, stopErr := inst.stop()
	if err := errors.Join(err, stopErr, before.Close()); err != nil {
		return memoryConfig{}, err
	}
	if mem.file, err = polite.OpenFileMemory(path); err != nil {
		mem.file.Close()
		return memoryConfig{}, err
	}
	return mem, nil
}

// firstSecond returns the utilization of the first second of r.
func firstSecond(r result, p profile, d time.Duration) float64 {
	ok := 0
	for _, b := range r.Timeline[:min(len(r.Timeline), int(time.Second/timelineBin))] {
		ok += b.OK
	}
	return ratio(float64(ok), p.allowance(min(d, time.Second)))
}

// drive runs cfg.workers closed-loop workers through hc against inst for
// cfg.duration from inst's origin, and returns what each saw; tr is hc's
// transport, whose idle connections it closes at the end.
func drive(hc *http.Client, tr *http.Transport, inst *instance, cfg runConfig) ([]workerStats, error) {
	end := inst.origin.Add(cfg.duration)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopTimer := time.AfterFunc(time.Until(end), cancel)
	defer stopTimer.Stop()

	stats := make([]workerStats, cfg.workers)
	var wg sync.WaitGroup
	for i := range stats {
		wg.Go(func() { stats[i] = work(ctx, hc, inst.url, end, cfg.deadline) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	<-ctx.Done()
	select {
	case <-done:
		tr.CloseIdleConnections()
		return stats, nil
	case <-time.After(drainGrace):
		// Stopping the server fails their connections; any still busy
		// after that are left behind, and their stats are not read.
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("workers still busy %v after the run's end", drainGrace)
	}
}

// work calls GET url with hc in a loop until ctx is cancelled, each call
// with a deadline of its own (none if deadline is 0), and returns what it
// saw of the calls that completed before end.
func work(ctx context.Context, hc *http.Client, url string, end time.Time, deadline time.Duration) workerStats {
	var s workerStats
	for ctx.Err() == nil {
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if deadline > 0 {
			callCtx, cancel = context.WithTimeout(ctx, deadline)
		}
		req, err := http.NewRequestWithContext(callCtx, http.MethodGet, url, nil)
		if err != nil {
			panic(err) // the URL is the bench's own
		}
		began := time.Now()
		resp, err := hc.Do(req)
		ok := false
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			_ = resp.Body.Close()
			ok = resp.StatusCode/100 == 2
		}
		finished := time.Now()
		cancel()
		if !finished.Before(end) {
			break
		}
		took := finished.Sub(began)
		s.durations = append(s.durations, took)
		switch {
		case ok:
			s.ok = append(s.ok, took)
		default:
			s.failed++
			if isLocal(err) {
				s.local++
			}
			if errors.Is(err, context.DeadlineExceeded) {
				s.timedOut++
			}
		}
	}
	return s
}

// isLocal reports whether a call's error is one its client returned
// without an answer from the server to it: polite's refusal of a wait
// (*polite.ThrottledError), its empty retry budget, a robots.txt that
// keeps a host off limits, and the oracle's refusal of a wait that would
// pass the deadline.
func isLocal(err error) bool {
	var throttled *polite.ThrottledError
	return errors.As(err, &throttled) || errors.Is(err, polite.ErrRetryBudgetExhausted) ||
		errors.Is(err, polite.ErrRobotsUnreachable) || errors.Is(err, errOracleRefused)
}
