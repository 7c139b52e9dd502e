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

// book books a send at the earliest instant from now on that keeps at
// most n sends in any interval of length per, and returns it.
func (w *windowLog) book(now time.Time, n int, per time.Duration) time.Time {
	t := now.UnixNano()
	if len(w.entries) > 0 {
		t = max(t, w.entries[len(w.entries)-1].at)
	}
	// The sends in (t-per, t] must be at most n-1 before this one: drop
	// from the oldest, moving t past each entry dropped, until they are.
	p := int64(per)
	drop, left := 0, w.total
	for drop < len(w.entries) && (w.entries[drop].at <= t-p || left > n-1) {
		if e := w.entries[drop]; e.at > t-p {
			t = e.at + p // the earliest instant that leaves e out
		}
		left -= w.entries[drop].count
		drop++
	}
	if drop > 0 {
		// Move the entries left to the front: the array is reused, not
		// outgrown by appends at its end (the entries hold no pointers).
		w.entries = w.entries[:copy(w.entries, w.entries[drop:])]
	}
	w.total = left
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

// cancel gives back a send booked at at, if it was the last booked: it no
// longer counts against the window. The sends after it are still booked no
// earlier than it was (bookings stay monotonic); a booking that is not the
// last stays counted, which only delays later sends.
func (w *windowLog) cancel(at time.Time) {
	k := len(w.entries) - 1
	if k < 0 || w.entries[k].at != at.UnixNano() || w.entries[k].count == 0 {
		return
	}
	w.entries[k].count--
	w.total--
}

// A Window is a key's exact window quota (WithWindow): at most n sends in
// any interval of length per. It books each attempt's send in its log and
// has the attempt wait for it.
type Window struct {
	mu  sync.Mutex
	log windowLog
}

// Admit returns when the window lets the attempt send: it books the
// attempt's place in the window, at most n in any per, and waits for it;
// a wait refused or given up gives the place back.
func (win *Window) Admit(w *gate.Waiter, n int, per time.Duration) error {
	now := time.Now()
	win.mu.Lock()
	at := win.log.book(now, n, per)
	win.mu.Unlock()
	wait := at.Sub(now)
	if wait <= 0 {
		return nil
	}
	return w.For(wait, now, gate.Rate, false, func() {
		win.mu.Lock()
		win.log.cancel(at)
		win.mu.Unlock()
	})
}

// Busy reports whether forgetting the window at now (Unix nanoseconds)
// would lose a send that still counts. A window locked at that moment is
// in use: busy.
func (win *Window) Busy(now int64) bool {
	if !win.mu.TryLock() {
		return true
	}
	defer win.mu.Unlock()
	return win.log.matters(now)
}
