package quota

import (
	"time"

	"github.com/politehttp/polite/internal/gate"
)

// Status returns the server's limit as the quota states it (its rate, in
// requests a second; 0 if unknown) and the rate it paces at now, at share
// of it: its rate less the margin, or what is left spread until the
// reset, if slower (0 if it paces nothing).
func (q *Quota) Status(now time.Time, share float64) (limit, paced float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	limit = q.rateLocked()
	paced = limit * (1 - Margin)
	if spread, ok := q.spreadLocked(now, share); ok && (paced == 0 || spread < paced) {
		paced = spread
	}
	return limit, paced
}

// Left returns what the quota holds as its server last counted it, less
// the requests sent since, and when it renews: false if its server counts
// nothing down (a limit stated alone), or it renewed since.
func (q *Quota) Left(now time.Time) (left float64, reset time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.resetAt.IsZero() || !q.resetAt.After(now) {
		return 0, time.Time{}, false
	}
	return q.left, q.resetAt, true
}

// Waiting adds to counts how many attempts wait in the quota's line at
// each priority (see gate.Queue.Counts), and returns counts.
func (q *Quota) Waiting(counts []gate.Count) []gate.Count {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queue.Counts(counts)
}
