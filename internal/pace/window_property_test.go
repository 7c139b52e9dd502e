package pace

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/politehttp/polite/internal/proptest"
)

// TestPropertyWindow drives a windowLog (WithWindow) through random
// bookings and clock moves. The sends it lets go are never more than n
// in any interval of length per; bookings are never before now nor
// before the one before them; a window with no booking in the last per
// lets a send go at once; and the earliest instant it tells is the one a
// booking then takes.
func TestPropertyWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 20).Draw(t, "n")
		per := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Hour)).Draw(t, "per"))
		var (
			w      windowLog
			now    = proptest.Start()
			sent   []time.Time // the bookings, in booking order
			lastAt time.Time   // the last booking
		)
		t.Repeat(map[string]func(*rapid.T){
			"wait": func(t *rapid.T) { now = now.Add(proptest.DrawGap(t, per/time.Duration(n))) },
			"book": func(t *rapid.T) {
				idle := lastAt.IsZero() || !now.Before(lastAt.Add(per))
				at := w.book(now, n, per)
				if at.Before(now) || at.Before(lastAt) {
					t.Fatalf("booked at %v, before now %v or the last booking %v", at, now, lastAt)
				}
				if idle && !at.Equal(now) {
					t.Fatalf("nothing booked in the last %v, yet booked %v after now", per, at.Sub(now))
				}
				sent, lastAt = append(sent, at), at
			},
			"earliest, then book": func(t *rapid.T) {
				told, _, _ := w.earliest(now, n, per)
				at := w.book(now, n, per)
				if at.UnixNano() != told {
					t.Fatalf("told %v, then booked %v", time.Unix(0, told), at)
				}
				sent, lastAt = append(sent, at), at
			},
			"": func(t *rapid.T) {
				if got := proptest.MaxInWindow(slices.Clone(sent), per); got > n {
					t.Fatalf("%d sends in an interval of %v, at most %d: %v", got, per, n, sent)
				}
				if w.total < 0 || len(w.entries) > windowSlices+1 {
					t.Fatalf("log counts %d sends in %d entries", w.total, len(w.entries))
				}
			},
		})
	})
}
