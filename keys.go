package polite

import (
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/internal/statuspage"
	"github.com/politehttp/polite/politestatus"
)

// KeyStatus is what a [Transport] knows of one key at a moment (see
// [Transport.Keys]).
type KeyStatus struct {
	// Key is the key (see [WithKey]).
	Key string
	// Rate is the rate the key's requests are paced at, in requests per
	// second: its token bucket's ([WithRate], or its controller's once
	// the server has throttled it), or the pace of the quota the server
	// reports (its limit over its window, or what is left of it spread
	// until its reset; for a server that names the buckets its routes
	// count against, the slowest of them), whichever is slower. 0 when
	// nothing paces the key.
	Rate float64
	// Limit is the server's limit for the key as polite knows it, in
	// requests per second: the quota the server states (the key's own,
	// or else the lowest of its routes' buckets), or else the
	// estimate of the key's controller (its rate at the last throttle).
	// 0 when neither is known.
	Limit float64
	// Costs are the key's quotas in units other than requests (see
	// [WithCost]), one a unit whose limit is known.
	Costs []CostStatus
	// Waiting is how many of the key's calls wait in line, by priority,
	// highest first: one entry for each priority that has calls waiting
	// (see [Priority]), nil when none waits. It counts the calls that wait
	// in a line: for the key's pacing or its server's pause, a place in
	// its [WithWindow], the server's quotas and costs, and a place in
	// flight ([WithMaxInFlight]); not those that wait for the fleet's
	// booking, for the [WithGlobalRate] bucket (every key's), or for a
	// retry's backoff. Each line is counted under its own lock, one
	// after another, so that a call moving between two may be missed or
	// counted twice. Calls pay nothing for it: it is counted when the
	// status is read.
	Waiting []PriorityCount
	// State is where the key's pacing stands: "starting" while its first
	// contact paces it (no limit known yet); else its controller's state,
	// "unthrottled" (no throttle yet), "climbing" (back toward a limit not
	// measured yet), "finding" (toward a limit found higher, or stated)
	// or "holding" (just under the limit it measured); "off" without a
	// controller ([AdaptiveOff]).
	State string
	// Stated reports that Limit is a quota the server states, not the
	// controller's estimate.
	Stated bool
	// Paused is when the server's pause of the key (a Retry-After) ends;
	// zero if the key is not paused.
	Paused time.Time
	// Calls is how many calls hold the key now: waiting, in flight, or
	// between attempts.
	Calls int
	// Sent, Refused and Failed count the key's attempts since polite
	// made its state: those sent, those the server throttled, and those
	// polite failed in the caller's hands before sending them (a
	// [*ThrottledError], a [*CostError], a context done while waiting).
	// They wrap at 2³²: take differences between two readings.
	Sent, Refused, Failed uint32
}

// PriorityCount is how many of a key's calls wait at one priority (see
// [KeyStatus.Waiting]).
type PriorityCount struct {
	Priority Priority
	Calls    int
}

// CostStatus is what a [Transport] knows of a key's quota in a unit other
// than requests (see [KeyStatus]).
type CostStatus struct {
	Unit   string        // the unit, as [Quota.Unit] names it
	Limit  float64       // the server's limit (as stated, or the least it can be)
	Window time.Duration // the time the quota takes to refill its limit; 0 for one renewed whole at a reset
	Left   float64       // what the quota holds now, as the key's requests count it; below 0: owed
}

// Keys returns the keys the Transport holds state for, with their status,
// in no particular order. Each status is read when the iteration reaches
// it, with no lock held while the caller's loop runs, so the iteration may
// miss keys made or see keys forgotten meanwhile. The keys are those used
// lately (see [WithIdleTimeout]): every key used, while a controller
// ([WithAdaptive]) or [WithRate] may pace it; under AdaptiveOff without
// WithRate, only keys whose server said something worth keeping (a quota,
// a pause), or that [WithMaxInFlight] or [WithWindow] needed.
func (t *Transport) Keys() iter.Seq[KeyStatus] {
	return func(yield func(KeyStatus) bool) {
		for s := range t.eng.Statuses() {
			ks := KeyStatus{Key: s.Key, Rate: s.Rate, Limit: s.Limit, Stated: s.Stated, Paused: s.Paused,
				Calls: s.Calls, Sent: s.Sent, Refused: s.Refused, Failed: s.Failed, State: state(&s)}
			for _, c := range s.Costs {
				ks.Costs = append(ks.Costs, CostStatus(c))
			}
			for _, c := range s.Waiting {
				ks.Waiting = append(ks.Waiting, PriorityCount{Priority: Priority(c.Priority), Calls: c.N})
			}
			if !yield(ks) {
				return
			}
		}
	}
}

// state names where a key's pacing stands (see KeyStatus.State).
func state(s *engine.Status) string {
	switch {
	case !s.Controlled:
		return "off"
	case s.Starting:
		return "starting"
	}
	return s.State.String()
}

// StatusHandler returns the Transport's status page: an HTTP handler,
// for the program's debug mux, that serves an HTML page of its own (no
// external assets), refreshing itself each second, with the keys that wait
// most, a chart of each one's rate, limit, sends and refusals over the
// last minutes, and a line that says in words why it waits; and the same
// as JSON (?format=json, a [politestatus.Page]). ?n= is how many keys to
// show (50 by default), ?q= what their names hold; ?history=0 leaves the
// samples out, for a reader that charts nothing.
//
// It costs a call nothing while nobody reads it: the history is sampled
// when the page is read, at most once a second, into fixed rings (five
// minutes each, for the Transport and the 64 keys shown last), and
// a page walks the keys reading counters, taking no key's lock but for the
// keys it shows. It shows keys and figures, never a URL: a key is a
// host unless [WithKey] makes it more. Mount it where only the program's
// operators reach it, as net/http/pprof.
func (t *Transport) StatusHandler() http.Handler {
	return &statuspage.Handler{Book: t.statusBook}
}

// Status returns what the Transport's status page shows at now (see
// [Transport.StatusHandler]): the n keys that wait most (50 if n is 0)
// among those whose name holds search, with their history. Times in the
// reason lines are in the local zone.
func (t *Transport) Status(now time.Time, n int, search string) politestatus.Page {
	return t.statusBook().Page(now, n, search, true)
}

// statusBook returns the status page's history, made on the first read.
func (t *Transport) statusBook() *statuspage.Book {
	if b := t.book.Load(); b != nil {
		return b
	}
	t.book.CompareAndSwap(nil, statuspage.New(t.eng, priorityName))
	return t.book.Load()
}

// priorityName names a priority on the status page: its class
// ("interactive"), or "priority 5" between classes.
func priorityName(p int) string {
	switch pr := Priority(p); pr {
	case PriorityCritical, PriorityInteractive, PriorityDefault, PriorityBatch, PriorityBackground:
		return pr.String()
	}
	return "priority " + strconv.Itoa(p)
}
