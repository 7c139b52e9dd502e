package quota

// How a quota's count moves, answer by answer: whether it is a window's,
// renewed whole, or a bucket's that refills as it goes, and the bound of
// a window's renewal that its answers' resets give (see Quota.Sync).

import (
	"time"

	"github.com/politehttp/polite/internal/signals"
)

// count follows the count the server reports, remaining, read at now
// from the answer to the request Sending numbered sent (0 if unknown): it
// reports whether the count rose, that is, whether the server renewed or
// refilled it since the least count read before the request went. In a
// window, the count only falls until the window renews whole; a bucket
// gives back as it goes, and a count that rose before it fell by half the
// limit (but in the window of the first answer, if that found the count
// at half the limit or more: it may have been spent before it, or joined
// near its end) marks the quota as one that refills
// (refilled), whose counts of seconds to its reset bound nothing worth
// counting down. It requires q.mu held.
func (q *Quota) count(now time.Time, remaining float64, sent uint64, throttled bool) (rose bool) {
	switch {
	case q.opened.IsZero():
		q.opened, q.passed = now, 0
		q.low, q.top, q.lowSent = remaining, remaining, q.sends.Load()
		// A first count under half the limit is no fresh window's: the
		// first rise is judged as any other (a bucket whose burst is
		// below its limit, as tollbooth's).
		q.judged = q.known && remaining < q.limit/2
	case sent > q.lowSent && (remaining > q.low || remaining == q.low && !throttled):
		// Sent after the least count was read, and not below it: within
		// a window, the server would have counted it (or refused it, at
		// none left).
		// The first window may have been half spent before the first
		// answer, or joined near its end: only a whole window tells.
		if q.known && q.top-q.low < q.limit/2 && q.judged {
			q.refilled = true
		}
		q.judged = true
		q.renews = q.renews || q.known && q.top-q.low >= q.limit/2 && remaining-q.low >= q.limit/2
		q.opened, q.passed = now, 0
		q.low, q.top, q.lowSent = remaining, remaining, q.sends.Load()
		return true
	case remaining < q.low:
		q.low, q.lowSent = remaining, q.sends.Load()
		q.fell = q.fell || q.top-q.low >= falls
	}
	if !throttled {
		// More accepted with no rise than the limit: no window of it
		// holds them (throttled/throttled's X-RateLimit-Limit is its
		// burst, refilled as it goes).
		if q.passed++; q.known && q.passed > q.limit {
			q.refilled = true
		}
	}
	return false
}

// bind keeps the bound of the renewal: a reset stated in whole seconds
// bounds it, it does not time it, and each answer of a window bounds it
// anew; the earliest of their bounds holds (a count of seconds rounded
// up, as "1" is, bounds it best from the window's first answer). A
// renewal (rose), or a reset that moved on by more than its rounding,
// begins a new window. It requires q.mu held.
func (q *Quota) bind(now time.Time, quota signals.Quota, rose bool) {
	reset := quota.Reset
	switch {
	case reset.IsZero():
		return
	case rose, !q.bound.After(now), reset.Sub(q.bound) > quota.Slack, q.bound.Sub(reset) > quota.Slack:
		q.bound, q.boundSent = reset, 0
	case reset.Before(q.bound):
		q.bound = reset
	}
	// The window's phase: a window that held a request the server
	// counted by q.opened ends a window later at the latest, however its
	// resets are rounded.
	if end := q.opened.Add(q.window); q.window > 0 && !q.rated && end.After(now) && end.Before(q.bound) {
		q.bound = end
	}
}

// windowed reports whether the count is taken for a window's: it fell
// with no rise between, and never refilled as it went. It requires q.mu
// held.
func (q *Quota) windowed() bool { return q.fell && !q.refilled }

// near reports whether every reset the server stated was within its
// rounding ahead (a count of seconds that reads "1" at a 1-second
// window) and the count does not refill as it goes: the window is at
// most the rounding, and the limit over the rounding is the least rate
// it allows. It requires q.mu held.
func (q *Quota) near() bool { return !q.beyond && q.windowed() }

// beyondSpread returns the rate past what is spread: ceiling, or, while
// the window is a guess (latest), the rate its first answer spread it at,
// if slower. It requires q.mu held.
func (q *Quota) beyondSpread(ceiling float64) float64 {
	if q.latest && q.spread > 0 && (ceiling <= 0 || q.spread < ceiling) {
		return q.spread
	}
	return ceiling
}

// Sending numbers a request sent now against the quota, for its answer to
// hand back to Sync: the numbers tell what went after an answer was read,
// with no clock read on the request's path.
func (q *Quota) Sending() uint64 { return q.sends.Add(1) }

// Adopt gives q the window of from (a quota a memory made: see
// Remembered), if q knows none: the key's memory kept the window of the
// bucket its server named, which the key's first answers name again.
func (q *Quota) Adopt(from *Quota) {
	w := from.Window()
	if w <= 0 {
		return
	}
	q.mu.Lock()
	if q.window == 0 {
		q.window = w
	}
	q.mu.Unlock()
}
