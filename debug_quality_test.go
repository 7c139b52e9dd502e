//go:build qualitydebug

// A tool for tuning controllers: go test -tags qualitydebug -run
// TestDebugQuality with QS (a scenario's name, or part of it), QC (a
// client, polite if unset; oracle@NN is the oracle pacing at NN% of the
// limit), QL (the run's length, 8s if unset) and QSEED
// (the seed, 1 if unset) prints the run's figures and its timeline. With
// QSEEDS=N it prints instead the mean, least and most utilization and the
// mean refused share over seeds 1 to N; QLOADED (a duration) runs the
// scenarios on a loaded machine, as the loaded variants of the quality
// tests do (each way a further delay of that mean, 10 ms of latency).

package polite_test

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
)

func TestDebugQuality(t *testing.T) {
	name, client := os.Getenv("QS"), cmp.Or(os.Getenv("QC"), "polite")
	seed, _ := strconv.ParseUint(cmp.Or(os.Getenv("QSEED"), "1"), 10, 64)
	length, err := time.ParseDuration(cmp.Or(os.Getenv("QL"), "8s"))
	if name == "" || err != nil {
		t.Skip("debug only: set QS")
	}
	loaded, _ := time.ParseDuration(cmp.Or(os.Getenv("QLOADED"), "0s"))
	scenarios := append(benchScenarios(length), lastMileScenarios(length)...)
	if workers, _ := strconv.Atoi(os.Getenv("QW")); workers > 0 { // a backlog of so many callers
		for i := range scenarios {
			scenarios[i].workers = workers
		}
	}
	if loaded > 0 {
		for i := range scenarios {
			scenarios[i].loaded, scenarios[i].latency = loaded, 10*time.Millisecond
		}
	}
	if seeds := os.Getenv("QSEEDS"); seeds != "" { // the mean over seeds 1 to QSEEDS
		n, _ := strconv.Atoi(seeds)
		for _, sc := range scenarios {
			if !strings.Contains(name, sc.name) {
				continue
			}
			for _, c := range strings.Split(client, ",") {
				var u, r float64
				least, most := 1e9, 0.0
				for seed := range uint64(n) {
					res := sc.run(t, c, seed+1)
					u, r = u+res.utilization/float64(n), r+res.rejected/float64(n)
					least, most = min(least, res.utilization), max(most, res.utilization)
				}
				fmt.Printf("%s × %s, %d seeds, loaded %v: utilization %.3f (%.3f-%.3f), rejected %.2f%%\n",
					sc.name, c, n, loaded, u, least, most, 100*r)
			}
		}
		return
	}
	scenarios = append(scenarios, githubSixty)
	for _, v := range qualityVariants {
		scenarios = append(scenarios, v.scenario)
	}
	for _, sc := range scenarios {
		if !strings.Contains(sc.name, name) {
			continue
		}
		for _, c := range strings.Split(client, ",") {
			r := sc.run(t, c, seed)
			fmt.Printf("%s × %s: utilization %.3f, rejected %.2f%%, attempts/call %.2f, p99 %v, p99 ok %v, failed locally %d, timed out %d, settle %v\n",
				sc.name, c, r.utilization, 100*r.rejected, r.amplify, r.p99, r.p99ok, r.local, r.timedOut, r.converge)
			fmt.Printf("  ok/refused per 250ms:%s\n", r.timeline())
		}
	}
}

// TestDebugQualityStatus runs polite on the scenario QS (8 s) and prints
// its key's status every QEVERY (100ms if unset) with the server's counts;
// QC=polite-memory or polite-memory-stale restarts it from a memory.
func TestDebugQualityStatus(t *testing.T) {
	name := os.Getenv("QS")
	if name == "" {
		t.Skip("debug only: set QS")
	}
	every, _ := time.ParseDuration(cmp.Or(os.Getenv("QEVERY"), "100ms"))
	length, _ := time.ParseDuration(cmp.Or(os.Getenv("QL"), "8s"))
	all := append(benchScenarios(length), lastMileScenarios(length)...)
	for _, v := range qualityVariants {
		all = append(all, v.scenario)
	}
	for _, sc := range all {
		if sc.name != name {
			continue
		}
		synctest.Test(t, func(t *testing.T) {
			opts := []polite.Option{polite.WithSeed(1)}
			switch os.Getenv("QC") {
			case "polite-memory":
				opts = append(opts, polite.WithMemory(sc.learn(t, 1, 1)))
			case "polite-memory-stale":
				opts = append(opts, polite.WithMemory(sc.learn(t, 1, cmp.Or(sc.stale, 2))))
			}
			time.Sleep(phase(1))
			start := time.Now()
			srv := sc.server(start, sc.schedule, 1)
			tr := polite.New(srv, opts...)
			done := make(chan struct{})
			go func() {
				defer close(done)
				sc.drive(t, tr, start)
			}()
			last := [2]int{}
			for time.Since(start) < sc.length {
				time.Sleep(every)
				srv.mu.Lock()
				var a, r int
				for i := range srv.accepted {
					a, r = a+srv.accepted[i], r+srv.rejected[i]
				}
				srv.mu.Unlock()
				for k := range tr.Keys() {
					fmt.Printf("%6v ok %3d refused %2d  rate %7.2f limit %7.2f\n", time.Since(start).Round(time.Millisecond), a-last[0], r-last[1], k.Rate, k.Limit)
				}
				last = [2]int{a, r}
			}
			<-done
		})
	}
}

// TestDebugProbes runs TestProbesGrowSparserAsTheLimitStands's HAProxy
// scenario QTRIES times (100 if unset; seeds 1 to 8 in turn) and prints
// how many runs refused how many from 60 to 120 s, where the test allows
// 10: its outliers are one run in 50 to 100, too rare for the test itself.
func TestDebugProbes(t *testing.T) {
	tries, _ := strconv.Atoi(cmp.Or(os.Getenv("QTRIES"), "0"))
	if tries == 0 {
		t.Skip("debug only: set QTRIES")
	}
	sc := scenario{name: "haproxy", limiter: func() limiter { return &haproxyRate{} },
		schedule: []step{{0, qualityLimit}, {120 * time.Second, 2 * qualityLimit}}, length: 120 * time.Second}
	runs := map[int]int{}
	for try := range tries {
		runs[sc.run(t, "polite", uint64(try%8+1)).refused(60*time.Second, 120*time.Second)]++
	}
	for late := range 1000 {
		if runs[late] > 0 {
			fmt.Printf("%3d refused from 60 to 120 s: %d runs\n", late, runs[late])
		}
	}
}
