package polite_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A limit that probes keep confirming is probed ever less often: the rate
// holds as long as the limit has stood, 4 seconds at first and 30 at most,
// so that a limit that stood a minute costs a refusal or two every 30
// seconds, not every 4; and a limit that rises after standing that long is
// still found, within the 30 seconds of a hold and the probe's climb.
// HAProxy (refusals counted) is run 8 times: before a refusal soon after
// a crossing (a probe's, or a hold's) was taken for its lockout (see
// Gentle.lockedOut), the estimate spiralled down to 0.4 to 0.9 of L in 16
// runs of 100 and climbed back at probes 4 s apart: 18 to 47 refused in a
// stretch of 40 to 60 s, and in 60 to 120 s 14 to 47 where it came late.
// Since, over 800 runs: 5 to 23 refused in 5 to 45 s (above 16 in 8,
// where a first contact's finding was followed by a refusal that measured
// half the limit: no lockout), 2 to 10 in 60 to 120 s; a probe of HAProxy
// costs up to 5 (the crossing, the requests in flight, the lockout after),
// the others' 1 to 3. One run in 50 to 100 still refused 11 to 60 late,
// where a refusal a few requests after a probe's lockout measured half
// the limit and the probes that followed spiralled down (see
// Gentle.lockedOut); since every refusal within a probe's lockout is its
// lockout, 3 to 8 over 700 runs (2026-12-05). In short mode, HAProxy runs
// once.
func TestProbesGrowSparserAsTheLimitStands(t *testing.T) {
	for _, sc := range []scenario{
		{name: "throttled", limiter: func() limiter { return &throttledGCRA{maxBurst: 9} }},
		{name: "nginx", limiter: func() limiter { return &nginxLimitReq{burst: 10} }},
		{name: "haproxy", limiter: func() limiter { return &haproxyRate{} }},
	} {
		runs, perProbe := 1, 3
		if sc.name == "haproxy" {
			runs, perProbe = 8, 5
			if testing.Short() {
				runs = 1
			}
		}
		for seed := range uint64(runs) {
			t.Run(sc.name, func(t *testing.T) {
				sc.schedule = []step{{0, qualityLimit}, {120 * time.Second, 2 * qualityLimit}}
				sc.length = 180 * time.Second
				r := sc.run(t, "polite", seed+1)
				early, late := r.refused(5*time.Second, 45*time.Second), r.refused(60*time.Second, 120*time.Second)
				t.Logf("refused: %d in 5-45 s, %d in 60-120 s; the rise to 2L found in %v", early, late, r.converge[0])
				// Every 4 s, a probe of the 60 s would refuse 15 times one or two
				// requests; every 30 s, twice.
				assert.LessOrEqual(t, early, 24, "refused while the limit was new: no lockout")
				assert.LessOrEqual(t, late, 2*perProbe, "refused while the limit stood a minute and more: two probes")
				assert.Greater(t, float64(early)/40, float64(late)/60, "refused more often while the limit was new")
				assert.Positive(t, late, "the limit is still probed")
				assert.LessOrEqual(t, r.converge[0], 35*time.Second, "the rise is found within a hold of 30 s and the climb")
				assert.Zero(t, r.local, "calls failed locally")
			})
		}
	}
}
