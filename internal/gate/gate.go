// Package gate holds what every gate of polite's engine shares: the one
// path by which an attempt sleeps, is told it may not wait that long, and
// tells of its waits (Waiter), and the one queue in which attempts wait
// their turn (Queue). A gate is a mechanism that admits an attempt or says
// how long it must wait (the key's pacing, the window, the server's
// quotas, the fleet, the slots in flight); each lives in a package of its
// own, owns its state and its lock, and waits through this one.
package gate

import (
	"context"
	"time"
)

// MaxPause bounds how long a server pause is kept, so that a hostile or
// broken Retry-After cannot block a key for longer.
const MaxPause = time.Hour

// A Cause is what an attempt waits for; its values are those of polite's
// WaitCause.
type Cause uint8

// The causes of a wait.
const (
	Rate       Cause = iota + 1 // pacing: a token bucket, a window, the fleet's booking
	Pause                       // a pause the server asked for
	Quota                       // the quota the server reports
	Slot                        // a place among the requests in flight
	CrawlDelay                  // the spacing a host's robots.txt asks for
	Backoff                     // the delay before a retry
	Cost                        // the request's cost in tokens or points
)

// Who is the attempt a Listener hears of: its key, its number (1 for a
// call's first attempt), its place in a queue, its context, and what the edge that drives the
// engine keeps of it (polite's Transport: the caller's *http.Request). It
// is passed by value, so that the edge's state of a call never escapes to
// the heap through a Listener.
type Who struct {
	Key     string
	Attempt int
	Place
	Ctx  context.Context
	Edge any
}

// A Place is where an attempt goes in a Queue: its priority, and among
// the attempts of that priority, its tenant's fair share (see Queue).
type Place struct {
	Priority Priority
	// Tenant is whose work the attempt is ("" for none: the attempts of
	// no tenant share as one tenant), and Weight the share it has among
	// the tenants waiting at its priority (1 if 0).
	Tenant string
	Weight float64
	// Class is how its priority shares the turns with the others waiting
	// (see Queue).
	Class Class
	// Size is how much of the gate's quota the attempt takes, for its
	// tenant's share: 1 (a turn) if 0; the costs' queue counts a call's
	// cost, so that tenants share tokens, not calls.
	Size float64
}

// A Class is how the attempts of one priority share a gate's turns with
// those of others (see Queue): by strict order of priority, less the
// floor each lower priority keeps, or by weight.
type Class struct {
	// Floor is the share of the turns the priority keeps while higher ones
	// wait: DefaultFloor if 0 and not Strict; at most 0.95.
	Floor float64
	// Strict sets the floor to none: the priority waits for every higher
	// one, and may starve under their load.
	Strict bool
	// Weight, if positive, makes the priority share by weight with the
	// others that have one: its floor is its weight over theirs.
	Weight float64
}

// A Priority orders the attempts that wait at a gate: a higher one goes
// first. Its values are those of polite's Priority; 0 is the default.
type Priority int8

// A Listener hears what an attempt's waits come to: the edge that drives
// the engine (polite's Transport) reports them as events, and makes the
// errors its callers see. It must be safe for concurrent use.
type Listener interface {
	// Waiting tells of a wait of d the attempt is about to make, for
	// cause; server reports that the server asked for it.
	Waiting(who Who, d time.Duration, cause Cause, server bool)
	// Refused returns the error of an attempt whose wait of d is not
	// allowed (allowed is the longest that is), and tells of it.
	Refused(who Who, wait, allowed time.Duration, server bool) error
	// TooLarge returns the error of an attempt whose cost in unit is
	// larger than the server's whole limit there, and tells of it.
	TooLarge(who Who, unit string, cost, limit float64) error
	// OffLimits tells of an attempt refused because its host's robots.txt
	// is unreachable; err is the edge's own, from its fetch.
	OffLimits(who Who, err error)
}

// A Waiter is the one way an attempt waits: it refuses a wait that cannot
// end in time, tells the Listener of the waits it makes, and sleeps
// until their end, a wake or the end of its context. One serves all of a
// call's attempts (Who.Attempt says which); it is not safe for concurrent
// use.
type Waiter struct {
	// MaxServerWait is the longest pause a server may ask for that the
	// attempt waits on (polite's WithMaxRetryAfter).
	MaxServerWait time.Duration
	L             Listener
	Who
}

// Refuse returns the Listener's error if a wait of d from now is not
// allowed: it would not end before the context's deadline, or it is a
// pause the server asked for (server) longer than MaxServerWait. It
// returns nil if the wait is allowed.
func (w *Waiter) Refuse(d time.Duration, now time.Time, server bool) error {
	if d <= 0 {
		// No wait to refuse: a call whose deadline passed while it waited
		// ends with its context's error, not a refusal of a wait of 0.
		return nil
	}
	allowed := time.Duration(-1)
	if server && d > w.MaxServerWait {
		allowed = w.MaxServerWait
	}
	if deadline, ok := w.Ctx.Deadline(); ok && !now.Add(d).Before(deadline) {
		// A wait that ends as the deadline passes leaves no time to send.
		left := max(deadline.Sub(now), 0)
		if allowed < 0 || left < allowed {
			allowed = left
		}
	}
	if allowed < 0 {
		return nil
	}
	return w.L.Refused(w.Who, d, allowed, server)
}

// RefuseWait applies Refuse to a wait made of a server pause and a turn
// that run at the same time.
func (w *Waiter) RefuseWait(pause, turn time.Duration, now time.Time) error {
	if pause > w.MaxServerWait {
		return w.Refuse(pause, now, true)
	}
	return w.Refuse(max(pause, turn), now, pause >= turn && pause > 0)
}

// Judge refuses a wait of d from now in line as Refuse does, and, if it
// is allowed and not the server's, tells of it unless told says it was
// told already (a wait in line is told once, when it begins).
func (w *Waiter) Judge(d time.Duration, now time.Time, cause Cause, server bool, told *bool) error {
	if err := w.Refuse(d, now, server); err != nil {
		return err
	}
	if !server && !*told {
		w.Tell(d, cause, false)
		*told = true
	}
	return nil
}

// Tell tells the Listener of a wait of d the attempt is about to make.
func (w *Waiter) Tell(d time.Duration, cause Cause, server bool) {
	if d > 0 {
		w.L.Waiting(w.Who, d, cause, server)
	}
}

// TellPaced tells of a wait made of a server pause and a turn for a token,
// which run at the same time: d is the wait, and its cause the longer of
// the two.
func (w *Waiter) TellPaced(d, pause, turn time.Duration) {
	if pause > 0 && pause >= turn {
		w.Tell(d, Pause, true)
		return
	}
	w.Tell(d, Rate, false)
}

// Sleep waits d, or until the context is done, whichever comes first, and
// returns nil or the context's cause.
func (w *Waiter) Sleep(d time.Duration) error { return Sleep(w.Ctx, d) }

// For waits wait from now for a place the attempt has taken (giveBack
// returns it): it refuses at once a wait that cannot end in time, tells of
// it, and gives the place back if it refuses or the caller gives up.
func (w *Waiter) For(wait time.Duration, now time.Time, cause Cause, server bool, giveBack func()) error {
	waited := false
	defer func() {
		if !waited { // refused, given up, or a panic in a listener
			giveBack()
		}
	}()
	if err := w.Refuse(wait, now, server); err != nil {
		return err
	}
	w.Tell(wait, cause, server)
	if err := w.Sleep(wait); err != nil {
		return err
	}
	waited = true
	return nil
}

// Sleep waits d, or until ctx is done, whichever comes first, and then
// returns nil or the context's cause.
func Sleep(ctx context.Context, d time.Duration) error {
	return sleepOrWake(ctx, max(d, 0), nil)
}

// sleepOrWake waits for d (forever if d < 0), for a signal on wake, or
// until ctx is done, and then returns nil or the context's cause.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	if d == 0 {
		return context.Cause(ctx)
	}
	var timeout <-chan time.Time
	if d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-timeout:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
