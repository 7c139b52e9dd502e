package quota

import (
	"time"

	"github.com/politehttp/polite/internal/gate"
)

// Admit returns when the quota lets the attempt go: evenly paced while
// quota is left, after its reset once it is spent. share is the part of
// the quota this process spends (see Reserve), fleet whether a fleet paces
// the quota's rate. Admitted, the attempt counts as in flight until
// Answered.
//
// The attempts that find the quota spent wait in line, by priority, then
// arrival (gate.Queue), and so does any that comes while they wait: the
// head sleeps until the reset, and each one that takes a place lets the
// next try. Unqueued, they woke together at the reset, and the places of
// the new window went to whichever the scheduler ran first: an
// interactive call behind a batch backlog lost that race for several
// windows (4.3 s, the median of 78 against tollbooth on the bench).
func (q *Quota) Admit(w *gate.Waiter, share float64, fleet bool) error {
	var t *gate.Ticket[struct{}]
	defer func() {
		if t != nil { // refused, given up, or a panic in a listener: give the place up
			q.mu.Lock()
			q.queue.Leave(t)
			q.mu.Unlock()
		}
	}()
	for {
		q.mu.Lock()
		if t == nil && q.queue.Len() > 0 {
			t, _ = q.queue.PushBack(struct{}{}, w.Place) // behind those that wait for the renewal
		}
		if t != nil && !q.queue.IsHead(t) {
			q.mu.Unlock()
			if err := t.Wait(w, -1); err != nil {
				return err
			}
			continue
		}
		q.mu.Unlock()
		now := time.Now()
		wait, spent, took := q.Reserve(now, share, fleet)
		if spent {
			if err := w.Refuse(wait, now, true); err != nil {
				return err
			}
			q.mu.Lock()
			if t == nil {
				t, _ = q.queue.PushBack(struct{}{}, w.Place)
			}
			head := q.queue.IsHead(t)
			q.mu.Unlock()
			if head {
				w.Tell(wait, gate.Quota, true)
				wait = max(wait, time.Nanosecond)
			} else {
				wait = -1 // a higher priority came: until it has its place
			}
			if err := t.Wait(w, wait); err != nil {
				return err
			}
			continue // renewed: take a place now
		}
		if t != nil {
			q.mu.Lock()
			q.queue.Served(t) // the next may take a place too
			t = nil
			q.mu.Unlock()
		}
		if wait > 0 {
			if err := w.For(wait, now, gate.Quota, false, func() { q.Release(took) }); err != nil {
				return err
			}
		}
		return nil
	}
}
