package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/signals"
)

var epoch = time.Unix(1_700_000_000, 0)

// at returns the instant d after epoch.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// drain reserves n places at now and returns their waits.
func drain(q *Quota, now time.Time, n int) []time.Duration {
	var waits []time.Duration
	for range n {
		w, _, _ := q.Reserve(now, 1, false)
		waits = append(waits, w)
	}
	return waits
}

func TestQuotaPacesWhatIsLeftOverTheTimeLeft(t *testing.T) {
	var q Quota
	q.Sync(epoch, signals.Quota{Remaining: 10, Reset: at(10 * time.Second)}, 0, false)
	waits := drain(&q, epoch, 3)
	gap := 1 / (1 - Margin) // seconds
	assert.InDelta(t, 0, waits[0].Seconds(), 1e-9)
	assert.InDelta(t, gap, waits[1].Seconds(), 1e-3, "10 left in 10s: about one a second")
	// Reserved at the same instant, the third counts 9 left over the 10
	// seconds less the second's place: evenly spaced, as if each had
	// come in its turn.
	assert.InDelta(t, gap+(10-gap)/9/(1-Margin), waits[2].Seconds(), 1e-3)
}

func TestQuotaSpentWaitsForTheReset(t *testing.T) {
	var q Quota
	q.Sync(epoch, signals.Quota{Remaining: 0, Reset: at(5 * time.Second)}, 0, false)
	wait, spent, took := q.Reserve(epoch, 1, false)
	assert.Equal(t, 5*time.Second, wait)
	assert.True(t, spent)
	assert.False(t, took)
	wait, spent, _ = q.Reserve(at(5*time.Second), 1, false)
	assert.Zero(t, wait, "renewed: nothing known, nothing paced")
	assert.False(t, spent)
}

func TestQuotaCountsRequestsInFlight(t *testing.T) {
	var q Quota
	drain(&q, epoch, 3) // three requests out when the answer to an earlier one says 3 left
	assert.Equal(t, 3, q.inflight)
	q.Sync(epoch, signals.Quota{Remaining: 3, Reset: at(10 * time.Second)}, 0, false)
	_, spent, _ := q.Reserve(epoch, 1, false)
	assert.True(t, spent, "the three in flight will take them")
	q.Answered()
	assert.Equal(t, 2, q.inflight)
}

// In a fleet of 4, what a process counts left is the server's count less
// its own sends in flight; the other three have about as many out each,
// which the server has not counted yet either. The process stops when
// theirs would take what is left: otherwise the fleet's last sends of a
// window are refused (a fixed window of 5 s on the bench: 1.6-1.7% of
// a fleet's requests refused, 0.4-0.5% since).
func TestQuotaInAFleetCountsTheOthersInFlight(t *testing.T) {
	for _, c := range []struct {
		remaining float64
		spent     bool
	}{{8, true}, {9, false}} {
		var q Quota
		for range 2 { // two of this process's out before anything is known
			q.Reserve(epoch, 0.25, true)
		}
		q.Sync(epoch, signals.Quota{Remaining: c.remaining, Reset: at(10 * time.Second)}, 0, false)
		_, spent, _ := q.Reserve(epoch, 0.25, true)
		assert.Equal(t, c.spent, spent, "%v left by the server's count, 2 of this process's and about 6 of the others' out", c.remaining)
	}
	var alone Quota
	drain(&alone, epoch, 2)
	alone.Sync(epoch, signals.Quota{Remaining: 3, Reset: at(10 * time.Second)}, 0, false)
	_, spent, _ := alone.Reserve(epoch, 1, false)
	assert.False(t, spent, "alone, its own two are all that is out")
}

func TestQuotaCeilingIsTheServersLimit(t *testing.T) {
	var q Quota
	// Plenty left, but the server's limit is 10 a second.
	q.Sync(epoch, signals.Quota{Limit: 100, Window: 10 * time.Second, Remaining: 1000, Reset: at(time.Second)}, 0, false)
	waits := drain(&q, epoch, 3)
	gap := 0.1 / (1 - Margin)
	assert.InDelta(t, gap, waits[1].Seconds(), 1e-9)
	assert.InDelta(t, 2*gap, waits[2].Seconds(), 1e-9)
	// The ceiling outlives the reset.
	waits = drain(&q, at(2*time.Second), 2)
	assert.InDelta(t, gap, (waits[1] - waits[0]).Seconds(), 1e-9)
}

// A reset known to the second may come up to a second early or late:
// pacing spends what is left by the earliest; once it is spent nothing goes
// until the reset, and if the server still says spent then, until the
// latest.
func TestQuotaAimsBeforeASlackReset(t *testing.T) {
	var q Quota
	q.Sync(epoch, signals.Quota{Remaining: 9, Reset: at(10 * time.Second), Slack: time.Second}, 0, false)
	waits := drain(&q, epoch, 2)
	assert.InDelta(t, 9.0/9/(1-Margin), waits[1].Seconds(), 1e-3)
	drain(&q, epoch, 7)
	wait, spent, _ := q.Reserve(epoch, 1, false)
	assert.True(t, spent)
	assert.Equal(t, 10*time.Second, wait, "until the reset")

	q.Sync(at(10*time.Second), signals.Quota{Remaining: 0, Reset: at(10 * time.Second), Slack: time.Second}, 0, false)
	wait, spent, _ = q.Reserve(at(10*time.Second), 1, false)
	assert.True(t, spent)
	assert.Equal(t, time.Second, wait, "still spent at the reset: until the latest")
}

// A window within the rounding of its reset (one second, stated in whole
// seconds) paces at the limit over the window, and what is left of it is
// not counted down: a token bucket's level, or a second's count, says too
// little.
func TestQuotaShortWindowPacesAtItsLimit(t *testing.T) {
	var q Quota
	q.Sync(epoch, signals.Quota{Limit: 100, Remaining: 3, Reset: at(time.Second), Slack: time.Second, Window: time.Second}, 0, false)
	waits := drain(&q, epoch, 10)
	gap := 0.01 / (1 - Margin)
	for i, w := range waits {
		assert.InDelta(t, float64(i)*gap, w.Seconds(), 1e-6, "request %d", i)
	}

	// Unstated, the window is the step of a reset that stayed put to the
	// next; a reset never far against its rounding is not counted down.
	q = Quota{}
	for i, d := range []time.Duration{0, 100, 200, 800, 900, 950} {
		now := at(d * time.Millisecond)
		reset := at(time.Duration(1+i/3) * time.Second)
		q.Sync(now, signals.Quota{Limit: 100, Remaining: 0, Reset: reset, Slack: time.Second}, 0, false)
	}
	assert.Equal(t, time.Second, q.window)
	wait, spent, _ := q.Reserve(at(950*time.Millisecond), 1, false)
	assert.False(t, spent, "a spent 1-second window says too little to hold the key")
	assert.Zero(t, wait)
}

// A reset in whole seconds that moves with every response (a token
// bucket's time to refill, rounded up) ends no window: its count rises
// again before it has fallen by half (the bucket refills as it goes), so
// that its limit (a burst, for such a server) gives no ceiling, and what
// is left is not counted down.
func TestQuotaMovingResetsEndNoWindow(t *testing.T) {
	var q Quota
	for i, remaining := range []float64{10, 9, 8, 7, 6, 10, 9, 10} {
		now := at(time.Duration(i) * 10 * time.Millisecond)
		q.Sync(now, signals.Quota{Limit: 11, Remaining: remaining, Reset: now.Add(time.Second), Slack: time.Second}, q.Sending(), false)
		if i == 4 {
			assert.InDelta(t, 11*(1-Margin), q.FleetPace(), 1e-9, "fallen by 4 with no rise: at most the limit over a second")
		}
	}
	assert.Zero(t, q.window)
	assert.True(t, q.refilled)
	assert.Zero(t, q.FleetPace())
	assert.Equal(t, []time.Duration{0, 0, 0}, drain(&q, epoch, 3))
}

// A count of seconds to the reset that reads "1" at every answer (a
// fixed window of a second opened by the first request after the last
// one expired, as fastify's rate-limit plugin keeps it) bounds the
// window: once the count has fallen with no rise, the limit over a
// second paces the key, what is left is counted down, and the earliest
// bound of the window's answers holds.
func TestQuotaOneSecondResetsBoundTheWindow(t *testing.T) {
	var q Quota
	answer := func(d time.Duration, remaining float64, throttled bool) {
		now := at(d)
		q.Sync(now, signals.Quota{Limit: 100, Remaining: remaining, Reset: now.Add(time.Second), Slack: time.Second}, q.Sending(), throttled)
	}
	answer(0, 99, false) // the window opened with this request
	assert.Zero(t, q.FleetPace(), "one answer: a window or a bucket")
	for i := range 5 {
		answer(time.Duration(i+1)*time.Millisecond, float64(98-i), false)
	}
	assert.Equal(t, at(time.Second), q.resetAt, "the first answer's bound holds")
	waits := drain(&q, at(5*time.Millisecond), 3)
	assert.InDelta(t, 0.01/(1-Margin), waits[1].Seconds(), 1e-3, "the limit over a second, less the margin")
	answer(995*time.Millisecond, 0, false)
	_, spent, _ := q.Reserve(at(995*time.Millisecond), 1, false)
	assert.False(t, spent, "not held for a renewal before one was seen whole: a sliding window's count comes back as it goes")
	answer(1010*time.Millisecond, 99, false) // a new window
	assert.False(t, q.refilled, "it fell by all of its limit before it rose")
	assert.True(t, q.renews)
	assert.Equal(t, at(2010*time.Millisecond), q.resetAt)
	answer(1990*time.Millisecond, 0, false)
	wait, spent, _ := q.Reserve(at(1990*time.Millisecond), 1, false)
	assert.True(t, spent)
	assert.Equal(t, 20*time.Millisecond, wait, "spent until the window's first answer's bound, not a second from now")
}

// A window is learnt from the step between resets that stay put; the
// shortest step is the window (a window without requests, or truncated
// resets, make longer ones), and the limit over it paces the key once the
// quota is renewed.
func TestQuotaLearnsTheWindow(t *testing.T) {
	var q Quota
	step := func(d time.Duration, remaining float64, reset time.Duration) {
		q.Sync(at(d), signals.Quota{Limit: 60, Remaining: remaining, Reset: at(reset), Slack: time.Second}, 0, false)
	}
	step(0, 31, 4*time.Second)
	step(time.Second, 30, 4*time.Second)
	step(5*time.Second, 59, 15*time.Second)
	assert.Zero(t, q.window, "one response is not enough: its Date may be a second off")
	step(6*time.Second, 58, 15*time.Second)
	assert.Equal(t, 11*time.Second, q.window)
	step(16*time.Second, 59, 25*time.Second)
	step(16500*time.Millisecond, 58, 26*time.Second) // a Date a second off
	step(17*time.Second, 57, 25*time.Second)
	step(17500*time.Millisecond, 56, 25*time.Second)
	assert.Equal(t, 10*time.Second, q.window, "the shortest step, and no step of a second")
	step(46*time.Second, 59, 55*time.Second)
	step(47*time.Second, 58, 55*time.Second)
	assert.Equal(t, 10*time.Second, q.window, "a longer step after an idle spell")
	q.Exhaust(at(60 * time.Second))
	waits := drain(&q, at(60*time.Second), 2)
	assert.InDelta(t, 10.0/60/(1-Margin), waits[1].Seconds(), 1e-6)
}

func TestQuotaReleaseGivesBack(t *testing.T) {
	var q Quota
	q.Sync(epoch, signals.Quota{Remaining: 1, Reset: at(10 * time.Second)}, 0, false)
	_, _, took := q.Reserve(epoch, 1, false)
	assert.True(t, took)
	_, spent, _ := q.Reserve(epoch, 1, false)
	assert.True(t, spent)
	q.Release(took)
	_, spent, _ = q.Reserve(epoch, 1, false)
	assert.False(t, spent)
}

func TestQuotaHostileOrBrokenResets(t *testing.T) {
	var q Quota
	// Spent until a reset ten years out: held an hour at most.
	q.Sync(epoch, signals.Quota{Remaining: 0, Reset: at(10 * 365 * 24 * time.Hour)}, 0, false)
	wait, spent, _ := q.Reserve(epoch, 1, false)
	assert.True(t, spent)
	assert.Equal(t, gate.MaxPause, wait)

	// Spent with a reset already past: a one-second hint, not a licence.
	q = Quota{}
	q.Sync(epoch, signals.Quota{Remaining: 0, Reset: at(-time.Minute)}, 0, false)
	wait, spent, _ = q.Reserve(epoch, 1, false)
	assert.True(t, spent)
	assert.Equal(t, hint, wait)

	// signals.Quota left but no reset: nothing to pace by.
	q = Quota{}
	q.Sync(epoch, signals.Quota{Remaining: 5}, 0, false)
	assert.Equal(t, []time.Duration{0, 0, 0}, drain(&q, epoch, 3))
}

func TestQuotaExhaust(t *testing.T) {
	var q Quota
	q.Sync(epoch, signals.Quota{Remaining: 50, Reset: at(time.Minute)}, 0, false)
	q.Exhaust(at(10 * time.Second))
	wait, spent, _ := q.Reserve(epoch, 1, false)
	assert.True(t, spent)
	assert.Equal(t, 10*time.Second, wait)
	assert.Equal(t, 10*time.Second, q.Peek(epoch))
}

// A bucket that refills (OpenAI's), spent: its reset is when it is full
// again, and a request may go when one unit is back, not at the reset, nor
// after a hint's second.
func TestQuotaOfABucketSpentWaitsForOneUnit(t *testing.T) {
	var q Quota
	q.Sync(epoch, signals.Quota{Limit: 100, Remaining: 0, Reset: at(30 * time.Second), Refill: true}, 0, false)
	wait, spent, _ := q.Reserve(epoch, 1, false)
	assert.True(t, spent)
	assert.Equal(t, 300*time.Millisecond, wait, "30 s for 100: one back in 300 ms")
	q.Sync(epoch, signals.Quota{Limit: 100, Remaining: 40, Reset: at(18 * time.Second), Refill: true}, 0, false)
	assert.Zero(t, q.SpentUntil(), "some left: not counted down to the time it is full")
}

// A quota spent in another unit holds the requests until it renews, or a
// hint's while if it states no renewal ahead; the requests' own figures
// stay unknown.
func TestQuotaSpentElsewhereHoldsOnly(t *testing.T) {
	for _, c := range []struct {
		renews time.Time
		want   time.Duration
	}{{at(300 * time.Millisecond), 300 * time.Millisecond}, {time.Time{}, hint}, {at(-time.Second), hint}} {
		var q Quota
		q.SpentElsewhere(epoch, c.renews)
		wait, spent, _ := q.Reserve(epoch, 1, false)
		assert.True(t, spent)
		assert.Equal(t, c.want, wait)
		limit, _ := q.Status(epoch, 1)
		assert.Zero(t, limit, "no limit of the requests' learnt")
	}
}

// The last place of a window, spread over the time left to its reset,
// spaces the next request a second on; once an answer shows the window
// renewed, that spacing is dropped: the new window's places go from now.
func TestQuotaRenewedDropsTheLastWindowsSpacing(t *testing.T) {
	var q Quota
	// A window's count, falling answer by answer to 1 left, a second
	// before its reset.
	for left := 10; left >= 1; left-- {
		q.Sync(epoch, signals.Quota{Limit: 10, Remaining: float64(left), Reset: at(time.Second)}, q.Sending(), false)
	}
	wait, spent, _ := q.Reserve(epoch, 1, false)
	assert.Zero(t, wait)
	assert.False(t, spent)
	sent := q.Sending()
	assert.GreaterOrEqual(t, q.Peek(epoch), 900*time.Millisecond, "the one left, spread over the second left")
	q.Answered()
	now := at(10 * time.Millisecond)
	q.Sync(now, signals.Quota{Limit: 10, Remaining: 9, Reset: now.Add(time.Second)}, sent, false)
	assert.Zero(t, q.Peek(now), "renewed: the new window's first place is now")
}
