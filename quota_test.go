package polite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// drain reserves n places at now and returns their waits.
func drain(q *serverQuota, now time.Time, n int) []time.Duration {
	var waits []time.Duration
	for range n {
		w, _, _ := q.reserve(now)
		waits = append(waits, w)
	}
	return waits
}

func TestQuotaPacesWhatIsLeftOverTheTimeLeft(t *testing.T) {
	var q serverQuota
	q.sync(epoch, Quota{Remaining: 10, Reset: at(10 * time.Second)})
	waits := drain(&q, epoch, 3)
	gap := 1 / (1 - quotaMargin) // seconds
	assert.InDelta(t, 0, waits[0].Seconds(), 1e-9)
	assert.InDelta(t, gap, waits[1].Seconds(), 1e-3, "10 left in 10s: about one a second")
	// Reserved at the same instant, the third counts 9 left over the same
	// 10 seconds.
	assert.InDelta(t, gap+gap*10/9, waits[2].Seconds(), 1e-3)
}

func TestQuotaSpentWaitsForTheReset(t *testing.T) {
	var q serverQuota
	q.sync(epoch, Quota{Remaining: 0, Reset: at(5 * time.Second)})
	wait, spent, took := q.reserve(epoch)
	assert.Equal(t, 5*time.Second, wait)
	assert.True(t, spent)
	assert.False(t, took)
	wait, spent, _ = q.reserve(at(5 * time.Second))
	assert.Zero(t, wait, "renewed: nothing known, nothing paced")
	assert.False(t, spent)
}

func TestQuotaCountsRequestsInFlight(t *testing.T) {
	var q serverQuota
	q.sent()
	q.sent()
	q.sent() // three requests out when the answer to an earlier one says 3 left
	q.sync(epoch, Quota{Remaining: 3, Reset: at(10 * time.Second)})
	_, spent, _ := q.reserve(epoch)
	assert.True(t, spent, "the three in flight will take them")
	q.answered()
	assert.Equal(t, 2, q.inflight)
}

func TestQuotaCeilingIsTheServersLimit(t *testing.T) {
	var q serverQuota
	// Plenty left, but the server's limit is 10 a second.
	q.sync(epoch, Quota{Limit: 100, Window: 10 * time.Second, Remaining: 1000, Reset: at(time.Second)})
	waits := drain(&q, epoch, 3)
	assert.InDelta(t, 0.1, waits[1].Seconds(), 1e-9)
	assert.InDelta(t, 0.2, waits[2].Seconds(), 1e-9)
	// The ceiling outlives the reset.
	waits = drain(&q, at(2*time.Second), 2)
	assert.InDelta(t, 0.1, (waits[1] - waits[0]).Seconds(), 1e-9)
}

func TestQuotaAimsBeforeASlackReset(t *testing.T) {
	// A reset known to the second may be up to a second late: pacing aims
	// half a second before it.
	var q serverQuota
	q.sync(epoch, Quota{Remaining: 9, Reset: at(10 * time.Second), Slack: time.Second})
	waits := drain(&q, epoch, 2)
	assert.InDelta(t, 9.5/9/(1-quotaMargin), waits[1].Seconds(), 1e-3)
}

func TestQuotaReleaseGivesBack(t *testing.T) {
	var q serverQuota
	q.sync(epoch, Quota{Remaining: 1, Reset: at(10 * time.Second)})
	_, _, took := q.reserve(epoch)
	assert.True(t, took)
	_, spent, _ := q.reserve(epoch)
	assert.True(t, spent)
	q.release()
	_, spent, _ = q.reserve(epoch)
	assert.False(t, spent)
}

func TestQuotaHostileOrBrokenResets(t *testing.T) {
	var q serverQuota
	// Spent until a reset ten years out: held an hour at most.
	q.sync(epoch, Quota{Remaining: 0, Reset: at(10 * 365 * 24 * time.Hour)})
	wait, spent, _ := q.reserve(epoch)
	assert.True(t, spent)
	assert.Equal(t, maxPause, wait)

	// Spent with a reset already past: a one-second hint, not a licence.
	q = serverQuota{}
	q.sync(epoch, Quota{Remaining: 0, Reset: at(-time.Minute)})
	wait, spent, _ = q.reserve(epoch)
	assert.True(t, spent)
	assert.Equal(t, quotaHint, wait)

	// Quota left but no reset: nothing to pace by.
	q = serverQuota{}
	q.sync(epoch, Quota{Remaining: 5})
	assert.Equal(t, []time.Duration{0, 0, 0}, drain(&q, epoch, 3))
}

func TestQuotaExhaust(t *testing.T) {
	var q serverQuota
	q.sync(epoch, Quota{Remaining: 50, Reset: at(time.Minute)})
	q.exhaust(at(10 * time.Second))
	wait, spent, _ := q.reserve(epoch)
	assert.True(t, spent)
	assert.Equal(t, 10*time.Second, wait)
	assert.Equal(t, 10*time.Second, q.peek(epoch))
}
