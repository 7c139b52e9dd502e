//go:build qualitydebug

// A tool for tuning controllers: go test -tags qualitydebug -run TestDebugQuality
// with QS (scenario name part) and QC (client) set prints the scenario second by second.

package polite_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestDebugQuality(t *testing.T) {
	name, client := os.Getenv("QS"), os.Getenv("QC")
	if name == "" {
		t.Skip("debug only")
	}
	for _, sc := range append(qualityScenarios, debugScenarios...) {
		if !strings.Contains(sc.name, name) {
			continue
		}
		var srv *limitServer
		var r result
		for range 40 {
			debugServer = func(s *limitServer) { srv = s }
			r = sc.run(t, client)
			debugServer = nil
			if r.rejected > 0.02 {
				break
			}
		}
		fmt.Printf("%s %s: util %.3f rej %.4f\n", sc.name, client, r.utilization, r.rejected)
		for s := 0; s+10 <= len(srv.accepted); s += 10 {
			a, rj := 0, 0
			var bins []string
			for b := s; b < s+10; b++ {
				a += srv.accepted[b]
				rj += srv.rejected[b]
				bins = append(bins, fmt.Sprintf("%d/%d", srv.accepted[b], srv.rejected[b]))
			}
			fmt.Printf("%3ds %4d %4d  %s\n", s/10, a, rj, strings.Join(bins, " "))
		}
		return
	}
}

var debugScenarios = []scenario{
	{name: "slow token bucket", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 10}}, length: 120 * time.Second, steady: 20 * time.Second, workers: 4, latency: 200 * time.Millisecond},
	{name: "slow fixed window", limiter: func() limiter { return &fixedWindow{} },
		schedule: []step{{0, 10}}, length: 120 * time.Second, steady: 20 * time.Second, workers: 4, latency: 200 * time.Millisecond},
	{name: "fast token bucket", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 1000}}, length: 30 * time.Second, steady: 10 * time.Second, workers: 64, latency: 20 * time.Millisecond},
	{name: "fast fixed window", limiter: func() limiter { return &fixedWindow{} },
		schedule: []step{{0, 1000}}, length: 30 * time.Second, steady: 10 * time.Second, workers: 64, latency: 20 * time.Millisecond},
	{name: "few workers", limiter: func() limiter { return &gcra{} },
		schedule: []step{{0, 100}}, length: 60 * time.Second, steady: 10 * time.Second, workers: 2, latency: 20 * time.Millisecond},
}
