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
// The attempts that must wait, for their turn in the quota's pacing or for
// its renewal once spent, wait in line, by priority, then arrival
// (gate.Queue), and so does any that comes while they wait: only the head
// takes a place, once its turn has come (or sleeps to the renewal), and
// each that takes one lets the next try. Two ways this was not so, both
// found by the bench against tollbooth under a batch backlog: the
// attempts that found the quota spent slept to the reset and raced for
// the new window (an interactive call waited 4.3 s, the median of 78);
// and the attempts paced within the quota each booked the instant it
// would go as it came, so that the key's pacing, a little faster than the
// quota's spacing, piled bookings up in order of arrival, and an
// interactive call booked behind them (0.85-1.04 s at the 99th
// percentile).
func (q *Quota) Admit(w *gate.Waiter, share float64, fleet bool) error {
	var t *gate.Ticket[struct{}]
	defer func() {
		if t != nil { // refused, given up, or a panic in a listener: give the place up
			q.mu.Lock()
			q.queue.Leave(t)
			q.mu.Unlock()
		}
	}()
	var due time.Time // the instant of its turn the head slept to, zero if none
	told := false
	for {
		now := time.Now()
		q.mu.Lock()
		turn, spent, _ := q.reserveLocked(now, share, fleet, false)
		if t == nil && (q.queue.Len() > 0 || turn > 0) {
			var ahead int
			t, ahead = q.queue.PushBack(struct{}{}, w.Place)
			// Judged by its place: its turn, after the turns of the
			// attempts ahead of it at the quota's rate (the spacing of
			// the last place taken can be far slower: a window's end,
			// spread thin, refused calls a renewal would have served).
			wait := turn
			if r := q.paceLocked(false) * share; r > 0 && ahead > 0 {
				wait += time.Duration(float64(ahead) / r * float64(time.Second))
			}
			q.mu.Unlock()
			if err := w.Judge(wait, now, gate.Quota, spent, &told); err != nil {
				return err
			}
			continue
		}
		if t != nil && !q.queue.IsHead(t) {
			due = time.Time{} // a higher priority took the turn it slept for
			q.mu.Unlock()
			if err := t.Wait(w, -1); err != nil {
				return err
			}
			continue
		}
		if turn > 0 && !spent {
			// The head, before its turn: it sleeps to it, taking nothing,
			// so that an attempt of a higher priority that comes
			// meanwhile goes first.
			due = now.Add(turn)
			q.mu.Unlock()
			if err := w.Judge(turn, now, gate.Quota, false, &told); err != nil {
				return err
			}
			if err := t.Wait(w, turn); err != nil {
				return err
			}
			continue
		}
		at := now
		if !due.IsZero() && due.Equal(q.next) && !due.After(now) {
			// Its turn, unchanged since it slept to it: taken at the
			// instant it was due, so that the time a sleeper takes to
			// wake is not lost to the quota's rate.
			at = due
		}
		wait, spent, took := q.reserveLocked(at, share, fleet, true)
		q.mu.Unlock()
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
			due = time.Time{}
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
		if wait -= now.Sub(at); wait > 0 {
			if err := w.For(wait, now, gate.Quota, false, func() { q.Release(took) }); err != nil {
				return err
			}
		}
		return nil
	}
}

// SpentHolds reports whether a count read spent holds the quota's
// requests until its reset, as Admit holds them: a window's does; a
// bucket's whose stated window is no longer than its reset's rounding
// (tollbooth: "X-Rate-Limit-Duration: 1", its reset always "1") does not,
// its rate paces it; nor does a count that comes back as it goes (its
// reset near against its rounding) until it has been seen renewed whole.
func (q *Quota) SpentHolds() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.resetAt.IsZero() && (!q.loose || q.renews)
}
