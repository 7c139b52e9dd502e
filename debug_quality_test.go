//go:build qualitydebug

// A tool for tuning controllers: go test -tags qualitydebug -run
// TestDebugQuality with QS (a scenario's name, or part of it), QC (a
// client, polite if unset), QL (the run's length, 8s if unset) and QSEED
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
	"time"
)

func TestDebugQuality(t *testing.T) {
	name, client := os.Getenv("QS"), cmp.Or(os.Getenv("QC"), "polite")
	seed, _ := strconv.ParseUint(cmp.Or(os.Getenv("QSEED"), "1"), 10, 64)
	length, err := time.ParseDuration(cmp.Or(os.Getenv("QL"), "8s"))
	if name == "" || err != nil {
		t.Skip("debug only: set QS")
	}
	loaded, _ := time.ParseDuration(cmp.Or(os.Getenv("QLOADED"), "0s"))
	scenarios := benchScenarios(length)
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
