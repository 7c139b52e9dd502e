// Command bench measures HTTP clients against real third-party server-side
// rate limiters (Go libraries in process, nginx and HAProxy as child
// processes) and synthetic servers, all on 127.0.0.1, and prints a markdown
// table: one row per server and client. See README.md.
//
// With -llm it runs the LLM bench instead: clients of a fake LLM API
// (OpenAI's, Anthropic's and Azure OpenAI's limits and headers) served on
// 127.0.0.1, which count requests and tokens a minute.
//
// Usage:
//
//	go run . [-duration 8s] [-servers a,b] [-clients a,b] [-workers 16]
//	         [-limit 100] [-check] [-json FILE] [-headers]
//	go run . -llm [-dialects a,b] [-clients a,b] [-period 1m] [-duration 4m]
//	         [-workers 64] [-deadline 2m] [-too-large] [-check] [-json FILE]
//	go run . -priorities|-priorities-fleet|-tenants [-duration 8s] [-servers a,b] [-warm]
//	         [-limit 100] [-deadline 10s] [-fleet 4]
//	go run . -priorities-llm [-period 10s] [-duration 60s] [-deadline 10s]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	duration := flag.Duration("duration", 8*time.Second, "length of each run")
	serverList := flag.String("servers", "", "comma-separated servers to run (default all): "+names(servers(), serverName))
	clientList := flag.String("clients", "", "comma-separated clients to run (default all): "+names(clients(), clientName)+"; with -llm: "+names(llmClients(), llmClientName))
	workers := flag.Int("workers", 16, "closed-loop workers per run")
	deadline := flag.Duration("deadline", 10*time.Second, "each call's deadline (0: none)")
	fleetSize := flag.Int("fleet", 4, "the processes (Transports, each with its own Redis client) of the fleet clients")
	limit := flag.Float64("limit", 100, "the servers' limit L, requests per second")
	share := flag.Float64("share", 1, "the part of the limit the oracle paces at, 0 to 1 (how a perfect pacer below the limit fares); below 1, polite-fleet-told is told that part of L with a burst of 1")
	check := flag.Bool("check", false, "exit 1 if a polite (polite-memory, polite-fleet) row has utilization < 0.7 or rejected > 5%, a call failed locally on a steady server, or a run failed")
	jsonPath := flag.String("json", "", "also write the results as JSON to this file")
	timeline := flag.Bool("timeline", false, "print each run's server counts (ok/refused) in bins of 250ms on stderr")
	trace := flag.Bool("trace", false, "print every attempt of the polite client, with its key's rate and limit, on stderr")
	headers := flag.Bool("headers", false, "print the headers of one allowed and one refused response from each server, and exit")
	llm := flag.Bool("llm", false, "run the LLM bench: -clients of the fake LLM API on loopback (see README.md); -duration, -workers and -deadline default to 4 periods, 64 and 2 periods")
	dialects := flag.String("dialects", "", "with -llm: comma-separated dialects of the fake (default all): "+names(llmDialects(), dialectName))
	period := flag.Duration("period", time.Minute, "with -llm: the fake's \"minute\", the time its quotas refill in (its latencies scale with it)")
	tooLarge := flag.Bool("too-large", true, "with -llm: 1% of requests larger than the server's token limit")
	priorities := flag.Bool("priorities", false, "run the priority scenario (a backlog of batch calls, an interactive call every 200 ms) on -servers (default tollbooth,nginx,haproxy), with and without priorities")
	prioritiesFleet := flag.Bool("priorities-fleet", false, "run the priority scenario across a fleet of -fleet processes (the batch calls through all but the last, the interactive ones through the last) on -servers (default tollbooth,nginx,haproxy), with and without priorities")
	tenants := flag.Bool("tenants", false, "run the tenant scenario (three tenants of weights 1:2:5, backlogged, the last idle from the run's middle) on -servers (default tollbooth,nginx,haproxy), without and with the tenants told")
	warm := flag.Bool("warm", false, "with -priorities or -priorities-fleet: each run's process (fleet) restarts with the memory of one before it (polite-memory's or polite-fleet-memory's, after 20 s against the same server): its limit known, no first contact")
	prioritiesLLM := flag.Bool("priorities-llm", false, "run the LLM priority scenario (chat calls and a batch backlog on one token quota of the fake OpenAI API), with and without priorities; -period defaults to 10s")
	flag.Parse()

	if *prioritiesLLM {
		os.Exit(benchPrioritiesLLM(*period, *duration, *deadline))
	}
	if *llm {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["servers"] || set["headers"] || set["limit"] || set["share"] || set["trace"] {
			fail(errors.New("-llm takes no -servers, -headers, -limit, -share or -trace"))
		}
		cfg := llmConfig{period: *period, duration: *duration, workers: *workers, deadline: *deadline, fleet: *fleetSize, tooLarge: *tooLarge, seed: 1}
		if !set["duration"] {
			cfg.duration = 4 * cfg.period
		}
		if !set["workers"] {
			cfg.workers = 64
		}
		if !set["deadline"] {
			cfg.deadline = 2 * cfg.period
		}
		if cfg.period < time.Second || cfg.duration <= cfg.period || cfg.workers < 1 || cfg.fleet < 1 || cfg.deadline < 0 {
			fail(errors.New("with -llm, need -period >= 1s, -duration > -period, -workers >= 1, -fleet >= 1 and -deadline >= 0"))
		}
		os.Exit(llmMain(llmOptions{dialects: *dialects, clients: *clientList, cfg: cfg, check: *check, timeline: *timeline, jsonPath: *jsonPath}))
	}

	cfg := runConfig{limit: *limit, duration: *duration, workers: *workers, deadline: *deadline, fleet: *fleetSize, trace: *trace, share: *share}
	if *limit < 1 || *duration < 100*time.Millisecond || *workers < 1 || *fleetSize < 1 || *deadline < 0 || !(*share > 0 && *share <= 1) {
		fail(errors.New("need -limit >= 1, -duration >= 100ms, -workers >= 1, -fleet >= 1, -deadline >= 0 and 0 < -share <= 1"))
	}
	srvs, err := pick(*serverList, servers(), serverName)
	if err != nil {
		fail(err)
	}
	cls, err := pick(*clientList, clients(), clientName)
	if err != nil {
		fail(err)
	}
	switch {
	case *priorities:
		os.Exit(benchPriorities(scenarioServers(*serverList, srvs), cfg, *warm))
	case *prioritiesFleet:
		os.Exit(benchPrioritiesFleet(scenarioServers(*serverList, srvs), cfg, *warm))
	case *tenants:
		os.Exit(benchTenants(scenarioServers(*serverList, srvs), cfg))
	}
	if *headers {
		if err := printSamples(os.Stdout, srvs, cfg); err != nil {
			fail(err)
		}
		return
	}
	if needsRedis(cls) {
		addr, stop := mustStartRedis()
		cfg.redis = addr
		status := bench(srvs, cls, cfg, *check, *timeline, *jsonPath)
		stop()
		os.Exit(status)
	}
	os.Exit(bench(srvs, cls, cfg, *check, *timeline, *jsonPath))
}

// fail reports a usage or setup error and exits with status 2.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(2)
}

// bench runs every pair, prints the table, and returns the exit status.
func bench(srvs []server, cls []client, cfg runConfig, check, timeline bool, jsonPath string) int {
	total := len(srvs) * len(cls)
	fmt.Fprintf(os.Stderr, "bench: %d runs of %v, about %v\n", total, cfg.duration,
		(time.Duration(total) * cfg.duration).Round(time.Second))
	var results []result
	i := 0
	for _, s := range srvs {
		var missing error
		for _, c := range cls {
			i++
			if missing != nil {
				results = append(results, result{Server: s.name, Client: c.name, Skipped: missing.Error()})
				continue
			}
			fmt.Fprintf(os.Stderr, "[%d/%d] %s × %s: ", i, total, s.name, c.name)
			r, err := run(s, c, cfg)
			switch {
			case errors.Is(err, errMissing):
				missing = err
				fmt.Fprintf(os.Stderr, "skipped: %v\n", err)
				r = result{Server: s.name, Client: c.name, Skipped: err.Error()}
			case err != nil:
				fmt.Fprintf(os.Stderr, "error: %v\n", err)
				r = result{Server: s.name, Client: c.name, Err: err.Error()}
			default:
				fmt.Fprintf(os.Stderr, "utilization %.2f, rejected %s, %d calls, %d failed locally\n",
					r.Utilization, percent(r.Rejected), r.Calls, r.Local)
				if timeline {
					fmt.Fprintf(os.Stderr, "  ok/refused per 250ms:%s\n", r.timeline())
				}
			}
			results = append(results, r)
		}
	}
	writeTable(os.Stdout, results, cfg)
	status := 0
	if jsonPath != "" {
		if err := writeJSON(jsonPath, results, cfg); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			status = 1
		}
	}
	if check {
		if bad := failures(results, steadyServers(srvs, cfg.limit)); len(bad) > 0 {
			fmt.Fprintln(os.Stderr, "bench: -check failed:")
			for _, b := range bad {
				fmt.Fprintln(os.Stderr, "  "+b)
			}
			status = 1
		}
	}
	return status
}

// pick returns the items of all named in the comma-separated list, in the
// order of all, or all of them if list is empty.
func pick[T any](list string, all []T, name func(T) string) ([]T, error) {
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	want := map[string]bool{}
	for n := range strings.SplitSeq(list, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []T
	for _, t := range all {
		if want[name(t)] {
			out = append(out, t)
			delete(want, name(t))
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown name %q (known: %s)", n, names(all, name))
	}
	return out, nil
}

// namedClient returns the client of all named name, one of the bench's
// own names.
func namedClient(all []client, name string) client {
	cs, err := pick(name, all, clientName)
	if err != nil {
		panic(err) // a name of the bench's own
	}
	return cs[0]
}

// names returns the names of all, comma-separated.
func names[T any](all []T, name func(T) string) string {
	ns := make([]string, len(all))
	for i, t := range all {
		ns[i] = name(t)
	}
	return strings.Join(ns, ",")
}

func serverName(s server) string { return s.name }
func clientName(c client) string { return c.name }
