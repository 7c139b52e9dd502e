package polite

import (
	"sync"
	"time"
)

// quotaMargin is the share of the server's remaining quota that pacing
// leaves unused, against the rounding of the reset time.
const quotaMargin = 0.02

// quotaHint is how long a key waits when its server reports its quota
// spent without a usable reset time (none, or one already past): a hint to
// slow down, never a licence to hammer.
const quotaHint = time.Second

// serverQuota paces the requests of a key, or of every key whose server
// names the same bucket, by what the server says is left of its quota:
// with R requests left until a reset in T, requests go evenly at most R/T
// a second (less a small margin), and none until the reset once R is
// spent. Every response resyncs it. The server's own limit (a quota per
// window) is a ceiling it never exceeds.
type serverQuota struct {
	// mu guards the fields below.
	mu       sync.Mutex
	resetAt  time.Time     // when the quota renews; zero when nothing is known
	slack    time.Duration // how much later than the true renewal resetAt may be
	left     float64       // requests that may still go before resetAt
	next     time.Time     // the earliest the next request may go
	ceiling  float64       // the server's limit per second; 0 if unknown
	inflight int           // requests sent against the quota and not answered yet
}

// sync takes what a response received at now says of the quota. The
// requests still in flight are not in the server's count yet.
func (q *serverQuota) sync(now time.Time, quota Quota) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if quota.Limit > 0 && quota.Window > 0 {
		q.ceiling = quota.Limit / quota.Window.Seconds()
	}
	switch {
	case quota.Reset.After(now):
		// A reset far ahead is a hint, not a sentence: it holds at most
		// maxPause, as a server's pause does.
		q.resetAt, q.slack = minTime(quota.Reset, now.Add(maxPause)), quota.Slack
		q.left = quota.Remaining - float64(q.inflight)
	case quota.Remaining < 1:
		q.resetAt, q.left = now.Add(quotaHint), 0
	default:
		q.resetAt, q.left = time.Time{}, 0 // no usable reset: no pacing
	}
}

// reserve takes a place for a request at now and returns how long it must
// wait for it. spent reports a wait until the quota renews, which is the
// server's to ask for, rather than even pacing; then no place is taken,
// and the caller reserves again once it has waited. A caller that does not
// send after all gives a place it took back with release.
func (q *serverQuota) reserve(now time.Time) (wait time.Duration, spent, took bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.resetAt.IsZero() || !now.Before(q.resetAt) {
		q.resetAt = time.Time{} // renewed, or never known: only the ceiling holds
		return q.space(now, q.ceiling), false, false
	}
	if q.left < 1 {
		return q.resetAt.Sub(now), true, false
	}
	// Aim to spend what is left by the likeliest true renewal, half the
	// slack before resetAt: never more than left goes before resetAt, so
	// aiming early risks a short idle wait, never a refusal.
	aim := q.resetAt.Sub(now) - q.slack/2
	if aim <= 0 {
		q.left--
		return q.space(now, q.ceiling), false, true
	}
	rate := q.left / aim.Seconds() * (1 - quotaMargin)
	if q.ceiling > 0 {
		rate = min(rate, q.ceiling)
	}
	q.left--
	return q.space(now, rate), false, true
}

// peek returns how long a request would wait at instant at, without taking
// a place: an estimate for deciding whether a retry fits before a deadline.
func (q *serverQuota) peek(at time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.left < 1 && at.Before(q.resetAt) { // spent until a reset still ahead
		return q.resetAt.Sub(at)
	}
	return max(q.next.Sub(at), 0)
}

// exhaust marks the quota spent until until, as a server's Retry-After for
// a bucket does.
func (q *serverQuota) exhaust(until time.Time) {
	q.mu.Lock()
	if until.After(q.resetAt) || q.left >= 1 {
		q.resetAt, q.left = until, 0
	}
	q.mu.Unlock()
}

// space returns the wait for the next slot at rate per second, and takes
// it. A rate of 0 spaces nothing. It requires q.mu held.
func (q *serverQuota) space(now time.Time, rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	slot := q.next
	if slot.Before(now) {
		slot = now
	}
	q.next = slot.Add(time.Duration(float64(time.Second) / rate))
	return slot.Sub(now)
}

// release gives back a place that reserve took for a request that was not
// sent.
func (q *serverQuota) release() {
	q.mu.Lock()
	q.left++
	q.mu.Unlock()
}

// sent counts a request in flight; answered counts its end.
func (q *serverQuota) sent() {
	q.mu.Lock()
	q.inflight++
	q.mu.Unlock()
}

func (q *serverQuota) answered() {
	q.mu.Lock()
	q.inflight = max(q.inflight-1, 0)
	q.mu.Unlock()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
