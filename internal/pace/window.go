package pace

import (
	"sync"
	"time"

	"github.com/politehttp/polite/internal/gate"
)

// windowSlices is how many parts of a window's length a windowLog tells
// apart: the sends within one part are merged into one entry.
const windowSlices = 256

// windowLog is a key's log of send instants under WithWindow: it books
// each send at the earliest instant that leaves at most n sends in any
// interval of length per, counting the send. Bookings are monotonic (a
// send is booked no earlier than the one before it), so only the window
// that ends at the booking need be checked.
//
// Memory is bounded: the sends booked less than per/windowSlices after
// the first send of the newest entry are merged into it, which counts
// them at the latest of their instants. Counting a send later than it was
// sent can only delay the sends after it, by at most per/windowSlices;
// never allow one more. Entries older than the newest by per or more can
// no longer matter and are dropped, so a log holds at most windowSlices+1
// entries.
type windowLog struct {
	entries []windowEntry // oldest first
	total   int           // the sends the entries count
	until   int64         // Unix nanoseconds when the newest booking leaves the window: the log matters until then
}

// matters reports whether forgetting the log at now (Unix nanoseconds)
// would lose a send that still counts.
func (w *windowLog) matters(now int64) bool { return w.total > 0 && now < w.until }

// windowEntry counts the sends booked from first to at, Unix nanoseconds.
type windowEntry struct {
	first, at int64
	count     int
}

// earliest returns the earliest instant from now on, Unix nanoseconds,
// that keeps at most n sends in any interval of length per, counting one
// more; and how many of the oldest entries no longer count then, and the
// sends the others count.
func (w *windowLog) earliest(now time.Time, n int, per time.Duration) (t int64, drop, left int) {
	t = now.UnixNano()
	if len(w.entries) > 0 {
		t = max(t, w.entries[len(w.entries)-1].at)
	}
	// The sends in (t-per, t] must be at most n-1 before this one: drop
	// from the oldest, moving t past each entry dropped, until they are.
	p := int64(per)
	left = w.total
	for drop < len(w.entries) && (w.entries[drop].at <= t-p || left > n-1) {
		if e := w.entries[drop]; e.at > t-p {
			t = e.at + p // the earliest instant that leaves e out
		}
		left -= w.entries[drop].count
		drop++
	}
	return t, drop, left
}

// book books a send at the earliest instant from now on that keeps at
// most n sends in any interval of length per, and returns it.
func (w *windowLog) book(now time.Time, n int, per time.Duration) time.Time {
	t, drop, left := w.earliest(now, n, per)
	if drop > 0 {
		// Move the entries left to the front: the array is reused, not
		// outgrown by appends at its end (the entries hold no pointers).
		w.entries = w.entries[:copy(w.entries, w.entries[drop:])]
	}
	w.total = left
	p := int64(per)
	if k := len(w.entries) - 1; k >= 0 && t-w.entries[k].first < p/windowSlices {
		w.entries[k].at = t
		w.entries[k].count++
	} else {
		w.entries = append(w.entries, windowEntry{first: t, at: t, count: 1})
	}
	w.total++
	w.until = t + p
	return time.Unix(0, t)
}

// A Window is a key's exact window quota (WithWindow): at most n sends in
// any interval of length per. The attempts that must wait for a place
// wait in line, by priority, then arrival (gate.Queue); only the head
// books one, once it is due, and sends at once.
type Window struct {
	mu    sync.Mutex
	log   windowLog
	queue gate.Queue[struct{}]
}

// Admit returns when the window lets the attempt send, at most n in any
// per, and books its send. An attempt that finds the window full, or
// others waiting, waits its turn in line; it is judged for its deadline
// by its place (the attempts ahead of it at n per per). Each booked an
// instant ahead as it came, in order of arrival: an interactive call
// behind a batch backlog booked behind the whole of it.
func (win *Window) Admit(w *gate.Waiter, n int, per time.Duration) error {
	var t *gate.Ticket[struct{}]
	defer func() {
		if t != nil { // refused, given up, or a panic in a listener: give the place up
			win.mu.Lock()
			win.queue.Leave(t)
			win.mu.Unlock()
		}
	}()
	told := false
	for {
		now := time.Now()
		win.mu.Lock()
		at, _, _ := win.log.earliest(now, n, per)
		wait := time.Duration(at - now.UnixNano())
		if t == nil && (win.queue.Len() > 0 || wait > 0) {
			var ahead int
			t, ahead = win.queue.PushBack(struct{}{}, w.Place)
			wait += time.Duration(int64(per) / int64(n) * int64(ahead))
			win.mu.Unlock()
			if err := w.Judge(wait, now, gate.Rate, false, &told); err != nil {
				return err
			}
			continue
		}
		if t != nil && !win.queue.IsHead(t) {
			win.mu.Unlock()
			if err := t.Wait(w, -1); err != nil {
				return err
			}
			continue
		}
		if wait > 0 {
			// The head, before its place: it sleeps to it, booking
			// nothing, so that an attempt of a higher priority that
			// comes meanwhile goes first.
			win.mu.Unlock()
			if err := w.Judge(wait, now, gate.Rate, false, &told); err != nil {
				return err
			}
			if err := t.Wait(w, wait); err != nil {
				return err
			}
			continue
		}
		// Booked as it sends, not at the instant it was due: counted
		// earlier than the server sees it, a send would let the one a
		// window after it go too soon.
		win.log.book(now, n, per)
		if t != nil {
			win.queue.Served(t) // the next may book too
			t = nil
		}
		win.mu.Unlock()
		return nil
	}
}

// Busy reports whether forgetting the window at now (Unix nanoseconds)
// would lose a send that still counts. A window locked at that moment is
// in use: busy.
func (win *Window) Busy(now int64) bool {
	if !win.mu.TryLock() {
		return true
	}
	defer win.mu.Unlock()
	return win.queue.Len() > 0 || win.log.matters(now)
}

// Waiting adds to counts how many attempts wait in line for a place in
// the window at each priority (see gate.Queue.Counts), and returns
// counts.
func (win *Window) Waiting(counts []gate.Count) []gate.Count {
	win.mu.Lock()
	defer win.mu.Unlock()
	return win.queue.Counts(counts)
}
