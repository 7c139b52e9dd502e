package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The priority scenario across a fleet (issue 38): a backlog of batch
// calls and interactive calls as in the priority scenario, on one key, but
// the batch calls go through the fleet's first N−1 processes in turn and
// the interactive ones through its last, which sends nothing else: an
// interactive call meets the batch backlog only in the fleet's booking in
// Redis. Each process is a polite Transport with the defaults, its own
// Redis client and Fleet (as the fleet clients' processes).
//
// The backlog is the priority scenario's 10,000 callers: each process's
// calls wait in its key's line and book in Redis one at a time. (Before
// that line, every waiting call booked, and 10,000 of them on the bench's
// 2 cores overwhelmed the fleet, with or without priorities: 90-99.7%
// refused, in a run of 2026-12-06; 300 were the most it held.)
const fleetPriorityBacklog = priorityBacklog

// benchPrioritiesFleet runs the priority scenario across a fleet of
// cfg.fleet processes on each server, without priorities and with them,
// prints a table with the Redis script calls per request, and returns the
// exit status.
func benchPrioritiesFleet(srvs []server, cfg runConfig, warm bool) int {
	if cfg.fleet < 2 {
		fail(fmt.Errorf("-priorities-fleet needs -fleet >= 2 (a process of interactive calls, and the batch's), not %d", cfg.fleet))
	}
	addr, stop := mustStartRedis()
	defer stop()
	cfg.redis = addr
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	name := fmt.Sprintf("polite-fleet of %d", cfg.fleet)
	if warm {
		name = fmt.Sprintf("polite-fleet-memory of %d", cfg.fleet)
	}
	results := eachPriorityRun(srvs, name, func(s server, prioritized bool) priorityResult {
		var mem memoryConfig
		if warm {
			var err error
			if mem, err = learn(s, namedClient(fleetClients(), "polite-fleet-memory"), cfg); err != nil {
				return priorityResult{err: fmt.Errorf("the fleet before: %w", err)}
			}
			mem.file.Close() // the fleet's memory is in Redis, in mem.namespace
		}
		before, err := scriptCalls(rdb)
		if err != nil {
			return priorityResult{err: err}
		}
		r := runPriorities(s, prioritized, cfg, fleetPriorityBacklog, func(tr http.RoundTripper, origin time.Time) (batch, interactive *http.Client, done func()) {
			return prioritiesFleet(tr, origin, cfg, mem.namespace)
		})
		after, err := scriptCalls(rdb)
		if err == nil && r.sent > 0 {
			r.scriptCalls = float64(after-before) / float64(r.sent)
		}
		return r
	})
	heading := "%v per run, L = %v requests/s, a fleet of %d processes: a backlog of %d batch calls through %d of them, an interactive call every %v (deadline %v) through the last"
	if warm {
		heading += "; each fleet restarted with the memory in Redis of a fleet before it"
	}
	return printPriorities(fmt.Sprintf(heading, cfg.duration, cfg.limit, cfg.fleet, fleetPriorityBacklog, cfg.fleet-1, interactiveEvery, cfg.deadline), results, cfg, true)
}

// prioritiesFleet returns the clients of a run of the scenario: the batch
// calls spread over the fleet's first cfg.fleet−1 processes, the
// interactive calls through its last; and what closes them.
func prioritiesFleet(tr http.RoundTripper, origin time.Time, cfg runConfig, remembered string) (batch, interactive *http.Client, done func()) {
	var closers []func()
	cc := clientConfig{origin: origin, duration: cfg.duration, fleet: cfg.fleet, redis: cfg.redis, trace: cfg.trace,
		cleanup: func(f func()) { closers = append(closers, f) }}
	ns := fmt.Sprintf("bench-priorities-%d", time.Now().UnixNano())
	if remembered != "" {
		ns = remembered
	}
	rts := make([]http.RoundTripper, cfg.fleet)
	for i := range rts {
		rts[i] = fleetProcess(i, ns, tr, cc, nil, remembered != "")
	}
	return &http.Client{Transport: &spread{rts: rts[:len(rts)-1]}}, &http.Client{Transport: rts[len(rts)-1]}, func() {
		for i := len(closers) - 1; i >= 0; i-- { // each Fleet before its client
			closers[i]()
		}
	}
}

// scriptCalls returns the script calls Redis has served (EVALSHA and
// EVAL, as INFO commandstats counts them).
func scriptCalls(rdb *redis.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		c, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redis INFO commandstats: %q: %w", line, err)
		}
		n += c
	}
	return n, nil
}
