//go:build qualitydebug

// A tool for tuning controllers: go test -tags qualitydebug -run TestDebugQuality
// with QS (scenario name part) and QC (client) set prints the scenario second by second.

package polite_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestDebugQuality(t *testing.T) {
	name, client := os.Getenv("QS"), os.Getenv("QC")
	if name == "" {
		t.Skip("debug only")
	}
	for _, sc := range append(qualityScenarios, qualityVariants...) {
		if !strings.Contains(sc.name, name) {
			continue
		}
		var srv *limitServer
		var r result
		for range 40 {
			debugServer = func(s *limitServer) { srv = s }
			r = sc.run(t, client)
			debugServer = nil
			if true {
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
