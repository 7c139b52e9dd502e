// Package control holds polite's send-rate controllers: Gentle, the
// default, which measures a server's limit and holds just below it; Cubic,
// the AWS SDKs' adaptive mode number for number; and AIMD. A key's
// controller hears the outcome of every attempt and says the rate its
// bucket paces at. The engine reaches a controller only through
// [Controller]: its first contact, its recall from a memory and what it
// knows worth remembering are the controller's to say.
//
// The package knows nothing of HTTP: an outcome is a success, a throttle
// or a failure that says nothing of the rate.
package control

import (
	"math"
	"sync"
	"time"
)

// An Outcome is what an attempt says of the server's rate.
type Outcome int8

// The outcomes.
const (
	OK        Outcome = iota // the server answered, and did not throttle
	Throttled                // the server throttled: 429, 503 with Retry-After, a spent quota's 403
	Failed                   // a 5xx that is no throttle, or a transport error: nothing of the rate
)

// A State is where a controller stands in finding and keeping a server's
// limit, for a key's status (see [Controller.State]).
type State uint8

// The states.
const (
	// Unthrottled: no throttle yet (or a memory's limit forgotten); the
	// controller's rate applies to nothing.
	Unthrottled State = iota
	// Climbing: a throttle lowered the rate, which grows back toward a
	// limit not measured yet.
	Climbing
	// Finding: the limit was found higher than before, or the server
	// stated it; the rate grows fast toward it.
	Finding
	// Holding: the limit is measured; the rate holds just under it, and
	// probes above it now and then.
	Holding
)

// String returns the state's name in lower case ("holding").
func (s State) String() string {
	switch s {
	case Unthrottled:
		return "unthrottled"
	case Climbing:
		return "climbing"
	case Finding:
		return "finding"
	case Holding:
		return "holding"
	}
	return "unknown"
}

// A Mark is what a controller says of the moment an attempt is sent (see
// [Controller.Sending]), handed back with the attempt's outcome.
type Mark uint32

// NoMark stands for an attempt whose sending is unknown: a throttle within
// a second of the last event, or before a success since, belongs to it.
const NoMark Mark = math.MaxUint32

// A Rate is what a controller says after an outcome: the rate to send at,
// in requests per second, how many requests the key's bucket may hold, and
// whether they apply (controllers limit nothing until the server first
// throttles). Forgot reports that the controller has just forgotten a
// limit a memory gave: the key starts over, as one with no history. Held
// reports that a success was read as a throttle (a server holding the
// request past its limit: see Gentle's heldOut), which a memory may keep
// as it keeps a throttle's.
type Rate struct {
	PerSecond float64
	Burst     int
	Enabled   bool
	Forgot    bool
	Held      bool
}

// A Controller sets a key's send rate from the outcomes of its attempts.
// Its methods are safe for concurrent use.
type Controller interface {
	// Observe feeds the outcome o of one attempt that ended at now, the
	// limit the server states (requests per second; 0 if none), what
	// Sending said as the attempt was sent (NoMark if unknown) and its
	// round trip (0 if unknown), and returns the rate to send at.
	Observe(now time.Time, o Outcome, stated float64, sent Mark, rtt time.Duration) Rate

	// Sending returns what an attempt sent now hands back to Observe;
	// NoMark for a controller that does not tell attempts apart.
	Sending() Mark

	// Timed reports whether the round trips of attempts matter to the
	// controller: the engine reads the clock for them only then.
	Timed() bool

	// Quoted tells the controller that an answer stated the quota the
	// server counts the key's requests, or their costs, against: a
	// server that refuses past what it says is left, whose round trips
	// say nothing of its limit. The engine calls it before Observe for
	// each such answer.
	Quoted()

	// ServerLimit returns the server's limit as the controller knows it
	// (stated, or measured by throttles), in requests per second; 0 while
	// it is unknown. A call is refused a wait only if it cannot end in
	// time at this rate, not at the controller's own, which may be lower
	// for a while.
	ServerLimit() float64

	// Estimate returns the controller's estimate of the server's limit
	// for a key's status: its rate at the last throttle, or what it
	// measured; 0 until the first throttle.
	Estimate() float64

	// State returns where the controller stands, for a key's status, and
	// since when: when it last measured the limit (or was throttled, for
	// a controller that measures none); zero if never.
	State() (State, time.Time)

	// StartRate returns the rate at which a key with no history is paced
	// at now, its first contact, and the burst its bucket holds; false
	// once the first contact is over, or for a controller that has none.
	StartRate(now time.Time) (perSecond float64, burst int, ok bool)

	// Grown returns the rate at now where the controller's rate grows
	// with time alone (Gentle finding the limit), so that calls waiting
	// for a token see it grow though few answers come back; false
	// otherwise.
	Grown(now time.Time) (float64, bool)

	// Recall starts the controller at now from a limit a memory kept (see
	// [Recalled]) and returns the rate to start at; false for a
	// controller that does not recall.
	Recall(now time.Time, r Recalled) (float64, bool)

	// Known returns what the controller knows of the server's limit that
	// is worth remembering at now: 0 if nothing.
	Known(now time.Time) Known
}

// Recalled is a limit a memory kept: Limit requests per second (stated
// reports that the server stated it), which had stood that long; NoBurst
// and CountsRefusals report what the server showed of itself (see Known).
type Recalled struct {
	Limit          float64
	Stated         bool
	Stood          time.Duration
	NoBurst        bool
	CountsRefusals bool
}

// Known is what a controller knows worth remembering: the server's limit
// (0 if unknown), whether the server stated it, how long a measured
// limit has stood, in whole seconds, and whether the server lets no burst
// through (of the first two requests of a first contact, sent at once,
// one passed and the other was refused), which the rules for such a
// server need and a first contact alone shows; and whether it counts the
// requests it refuses against its limit (refused twice in a row after a
// crossing), which a process whose remembered limit proves stale may
// never see: it crosses the limit too gently to be refused twice.
type Known struct {
	Limit          float64
	Stated         bool
	Stood          uint32
	NoBurst        bool
	CountsRefusals bool
}

// plain is what Cubic and AIMD share: the methods of a controller that
// tells no attempts apart, times no round trips, opens no first contact,
// grows only with outcomes, and remembers nothing; and the state that
// says the rate, with its lock.
type plain struct {
	mu      sync.Mutex // guards the fields below and those of the controller
	enabled bool       // whether the rate applies: from the first throttle on
	rate    float64    // the rate to send at, in requests per second
}

// Rate returns the rate to send at, in requests per second.
func (p *plain) Rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate
}

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (p *plain) Enabled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enabled
}

// Sending returns NoMark.
func (*plain) Sending() Mark { return NoMark }

// Timed reports false.
func (*plain) Timed() bool { return false }

// Quoted does nothing: no round trip matters to a plain controller.
func (*plain) Quoted() {}

// StartRate reports false.
func (*plain) StartRate(time.Time) (float64, int, bool) { return 0, 0, false }

// Grown reports false.
func (*plain) Grown(time.Time) (float64, bool) { return 0, false }

// Recall reports false.
func (*plain) Recall(time.Time, Recalled) (float64, bool) { return 0, false }

// Known returns nothing.
func (*plain) Known(time.Time) Known { return Known{} }
