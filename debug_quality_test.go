//go:build qualitydebug

// A tool for tuning controllers: go test -tags qualitydebug -run TestDebugQuality
// with QS (scenario name part), QC (client) and QSEED (the seed, 1 if unset) set prints
// the scenario second by second.

package polite_test

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestDebugQuality(t *testing.T) {
	name, client := os.Getenv("QS"), os.Getenv("QC")
	seed, _ := strconv.ParseUint(cmp.Or(os.Getenv("QSEED"), "1"), 10, 64)
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
			r = sc.run(t, client, seed)
			debugServer = nil
			if true {
				break
			}
		}
		fmt.Printf("%s %s: util %.3f rej %.4f settle %v\n", sc.name, client, r.utilization, r.rejected, r.converge)
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
