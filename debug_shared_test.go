//go:build qualitydebug

package polite_test

// TestDebugSharedTokenQuota with QP (processes, 2 if unset) and QNOCOST
// (set: the processes pace requests alone, no costs) runs QP Transports,
// none told of the others, 16 callers among them, against one fake
// OpenAI API whose token quota refills 2,000 a second (its minute scaled
// to a second; each request asks 200 and uses 150; 100 ms to answer), for
// 30 s of fake time, five times, and prints what each process got every
// 5 s, the calls failed in the callers' hands and their waits (see
// runSharedTokenQuota, and docs/cost.md, "Processes that share a quota
// unseen"):
//
//	QP=2 go test -tags qualitydebug -run 'TestDebugSharedTokenQuota$' -v .

import (
	"cmp"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestDebugSharedTokenQuota(t *testing.T) {
	procs, _ := strconv.Atoi(cmp.Or(os.Getenv("QP"), "2"))
	for run := range 5 {
		later, _ := time.ParseDuration(cmp.Or(os.Getenv("QLATER"), "0s"))
		r := runSharedTokenQuota(t, max(procs, 1), os.Getenv("QNOCOST") == "", later)
		t.Logf("run %d: answered per process every 5 s %v; %d calls, %d failed (first: %v), %d of %d attempts refused; wait p50 %v, p99 %v, most %v",
			run, r.answered, r.calls, r.failed, r.first, r.refused, r.attempts, r.waits[len(r.waits)/2], r.waits[len(r.waits)*99/100], r.waits[len(r.waits)-1])
	}
}
