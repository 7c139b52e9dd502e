package control

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Gentle's tunables and their defaults. Each rule that uses one says why
// in a sentence; docs/adapting.md ("Gentle's rules") has the figures
// that chose them.
const (
	gentleHold       = 0.99        // the share of W the rate holds at: just below the limit, never on it
	gentleWait       = 4.0         // seconds a hold lasts at least: each probe costs a refusal or two
	gentleMaxWait    = 30.0        // seconds a hold lasts at most: it is as long as W has stood, and a risen limit is found within it
	gentleShortWait  = 0.75        // seconds a hold lasts at least after a drop: a limit that dropped may come back soon
	gentleShorten    = 0.10        // after a drop the hold is this share of the time since, until that is gentleWait again
	gentleDrop       = 0.5         // an event that lowers a W that stood below this share of it is a drop
	gentleVerify     = 1.0         // seconds held before the probe that verifies a W just found, and the last of the hold it counts
	gentleAfter      = 0.85        // an aftershock of a crossing lowers W to this share of it at least: its handful of requests measure nothing
	gentleBursty     = 0.5         // seconds of its limit that a server lets through at once, from which a probe a second on would measure the burst
	gentleLockout    = 2.0         // seconds after a crossing in which a server that counts refusals still refuses for it: two of its periods
	gentleLockedOut  = 0.25        // seconds the first floor's halvings were refused at least, for the floor to be what a server that counts refusals let through
	gentleDouble     = 1.0         // seconds in which a probe doubles the rate; a quarter of that while finding W
	gentleRisen      = 1.1         // a probe this far above W with no throttle has found the limit risen, and doubles four times as fast
	gentleCooldown   = time.Second // a throttle of an attempt whose sending is unknown belongs to an event this recent
	gentleMinRate    = 0.5         // requests per second, the least rate: the server is always asked again
	gentleMaxRate    = 1e9         // requests per second, the most: a probe no throttle answers neither grows on nor overflows
	gentleRound      = 8           // round trips whose least is compared with the base: a stall of the client's seldom lasts a round
	gentleFindRTTs   = 8           // least round trips in which the climb from a floor doubles: a floor far below the limit is left in round trips
	gentleInitial    = 2           // requests a key with no history sends at once: a server with a small burst refuses few
	gentleMinRound   = 0.02        // seconds, the least round of a first contact
	gentleRounds     = 30          // rounds after which a first contact no longer paces: its rate has outgrown any demand
	gentleBaseEpoch  = 10          // seconds: the base is the least round trip of the last one to two epochs this long
	gentleQueued     = 2.0         // requests' worth of added round trip, at the rate, that shows the server queueing
	gentleMinQueue   = 1000        // microseconds of added round trip that are noise at any rate
	gentleDemand     = 4.0         // while finding W, the rate is at most this many times that of the last successes
	gentleMoved      = 0.05        // a W this far from the last has moved: found anew, and, higher, still being found
	gentleFall       = 4.0         // an event while holding lowers W by this factor at most: a cut not enough shows the limit lower, not how much
	gentleGrowth     = 2.0         // once W is measured, the rate grows to this many times the rate of responses at most: an unused rate does not inflate
	gentleFloorSpan  = 1.0         // seconds at least over which the first event measures its floor: a burst is accepted in a moment
	gentleTight      = 0.9         // on a server with no burst, W is at least this share of the rate its refusals began at: a request a timer woke late is refused, a little below it none is
	gentleTightRound = 1.25        // that rate counts no more than this many times the rate of the last round of successes: callers may send less
	gentleTightLag   = 0.125       // but for all of it at the end of a climb whose crossing came back within this share of a doubling: the climb outruns its rounds, and grew 9% at most meanwhile
	gentleHeldMin    = 0.25        // seconds above the base round trip at least that show a server holding a request past its limit: more than a connection's or a collector's hiccup
	gentleHeldTimes  = 10.0        // times the base round trip at least that show it: a slow endpoint's spread is within it
	gentleHeldRTTs   = 64.0        // once a hold was the signal, the rate doubles in no fewer than this many of its round trips: it rises 1.1% while the next hold is on its way
	gentleHeldSteady = 3           // holds of requests sent while the rate stood still, more than those sent while it rose: the endpoint's own slowness, not the server's limit
)

// Gentle is polite's default send-rate controller,
// documented for its users on polite.Gentle (controllers.go); each of its
// rules, with the figures that chose it, is in docs/adapting.md. Its
// model: every congestion event is a moment when the server had nothing
// left to give, so what it accepted between two events, over the time
// between them, is its limit W when the client sent above it all along.
//
// Gentle is a state machine: a gentleState, the gentleEvents an outcome
// is read as (see Observe), and step, the one function that makes each
// transition, beginning an epoch in startEpoch. It is safe for
// concurrent use. Create it with NewGentle, or Init one in place.
type Gentle struct {
	// mu guards the fields below it. Instants are Unix nanoseconds (or
	// seconds), round trips microseconds, to keep a Gentle small: a
	// crawler holds one per host. (The fields are ordered by size, not by
	// topic, for the same reason.)
	mu     sync.Mutex
	since  int64   // when the epoch began: the last congestion event, or the first attempt before one (moved on by outages)
	ramp   int64   // when the curve of the rate began (moved on by outages, and by refusals while finding)
	frozen int64   // when refusals stopped the curve while finding; 0 if they do not
	last   int64   // the last outcome
	round  int64   // when the first success of the round of round trips in progress came
	rate   float64 // the rate to send at, before halving
	limit  float64 // W: the estimate of the server's limit
	stated float64 // the limit the server states; 0 if none

	// phase counts congestion events and the first success after each,
	// so that an attempt can tell when it was sent (see sentIn): it is
	// odd from an event to the first success after it, and moves on by 2
	// at each halving in between.
	phase atomic.Uint32
	// flags holds two facts read without mu: flagUntimed, that round
	// trips do not matter for now (see Timed), a copy of "unthrottled,
	// the endpoint's holds its own (slowEndpoint), and a round of round
	// trips has come since the key began or forgot"; and flagQuoted,
	// that the server's answers state the quota they count the key
	// against (see Quoted), which stands for good.
	flags atomic.Uint32

	event    uint32    // the phase right after the last event
	base     [2]uint32 // the least round trip of the previous epoch of round trips and of the current one
	epoch    uint32    // Unix seconds when base[1]'s epoch began
	least    uint32    // the least round trip of the round in progress
	recent   float32   // the rate at which the successes of the last complete round came
	settled  float32   // W as the last event that probed or found it measured it (see Known); 0 if none
	slot     uint32    // the quarter second, counted from the Unix epoch, that second[slot%5] counts
	dropped  uint32    // Unix seconds when a W that stood last dropped; 0 if none
	found    uint32    // Unix seconds (rounded) when W was found at about its value: a probe that confirms it keeps it
	accepted int32     // successes of attempts sent since the epoch began
	held     int32     // of them, those that came before the probe began; -1 until it does
	second   [5]uint16 // successes in each of the last five quarter seconds
	spent    int8      // halvings since the epoch began, before any success (16 at most)
	sampled  uint8     // round trips in the round in progress
	state    gentleState

	// The facts beside the state, each orthogonal to it, for it outlives
	// the state it was learnt in: fresh, of W, is carried from finding
	// into holding; crossing, of the epoch, says whether an epoch of
	// either began with the server overdrawn and whether its lockout
	// came; wary and tight, of the server, stand until a memory's limit
	// is forgotten, but for waryCounts, which stands for good (a memory
	// may have given it: see Recalled); recalled, of where W and the stated limit came from,
	// stands through queueing epochs until a throttle or an answer;
	// queued, of the round trips, is the sampler's memory of its last
	// round; slow, of the endpoint, stands for good once learnt; lag, of
	// the signal, stands until an event that a refusal makes. (spent,
	// frozen, held, dropped and steady are counts and instants of the
	// measurement, not modes.)
	fresh    bool      // W was just raised (or lowered by an aftershock) and no probe after a hold has confirmed it
	queued   bool      // the last complete round of round trips stood above the base
	crossing crossing  // whether the server was overdrawn as the epoch began (see crosses), and its lockout came
	wary     uint8     // why a probe soon after a crossing would cost: waryCounts, waryBurst
	tight    tightness // whether the server lets no burst through, as the key's first throttle showed (see tightRate)
	recalled uint8     // what a memory gave (Recall) that no answer has confirmed: recalledLimit, recalledStated
	slow     slowness  // whether a round trip far above the base is the server holding a request (see heldOut)
	steady   uint8     // holds of requests sent while the rate stood still, less those sent while it rose (see heldOut)
	lag      uint16    // milliseconds: the round trip of the hold that made the last event, the time the next one takes to tell; 0 if a refusal made it

	responses meter // all responses
}

// A gentleState is where Gentle stands in finding and keeping W. Halving
// is no state of its own: refusals before a success halve the rate in
// any state after a throttle, and a success goes on in the same state
// (see spent and frozen); nor is probing: time alone ends a hold (see
// probing).
type gentleState uint8

// The states.
const (
	// No throttle yet, or a memory's limit forgotten: the rate applies
	// to nothing, and a first contact paces the key (see StartRate).
	unthrottled gentleState = iota
	// The first throttle made W a floor (what was accepted before it):
	// the rate doubles from it every gentleFindRTTs round trips.
	climbing
	// The last event found W more than gentleMoved above the one
	// before, or the server stated it: no hold, the rate doubles every
	// quarter of gentleDouble.
	finding
	// W is measured: the rate holds at gentleHold·W, then probes above
	// it until the next event (see hold, curve).
	holding
)

// A gentleEvent is what an outcome (see Observe), a memory (see Recall)
// or the round trips bring to step.
type gentleEvent uint8

// The events.
const (
	success     gentleEvent = iota // an attempt succeeded
	outage                         // an attempt failed in a way that says nothing of the rate: a 5xx that is no throttle, a transport error
	late                           // a throttle that belongs to an event or a halving already taken
	refused                        // a throttle of an attempt sent after the last event and halving, before any success since
	congestion                     // a throttle of an attempt sent after the last event and its first success
	queueing                       // a success whose round trips show the server queueing while the rate rises (see sample)
	statedLimit                    // an answer states the server's limit
	recall                         // a memory gives a limit (see Recall)
)

// An input is what an event brings to step.
type input struct {
	n         int64         // when, Unix nanoseconds
	gap       int64         // nanoseconds since the outcome before (outage)
	measured  float64       // the smoothed rate of responses (success)
	stated    float64       // the limit stated (statedLimit)
	sent      uint32        // the phase the attempt was sent in; noSend if unknown
	phase     uint32        // the phase when the outcome came
	order     sending       // when the attempt was sent (success)
	rtt       time.Duration // the attempt's round trip; 0 if unknown (success)
	held      bool          // the success was a hold (see heldOut)
	delivered float64       // the rate the server served its queue at (queueing)
	memory    Recalled      // recall
}

// When an attempt was sent: before the last event (in flight when it
// came), after it but before its first success, or after both.
type sending int8

const (
	sentBefore     sending = -1
	sentUnanswered sending = 0
	sentAfter      sending = 1
)

// The bits of Gentle.flags.
const (
	flagUntimed uint32 = 1 << iota // round trips do not matter for now (see Timed)
	flagQuoted                     // the server states the quota it counts the key against (see Quoted)
)

// The reasons of Gentle.wary.
const (
	waryCounts = 1 << iota // the server counts refusals: refused twice in a row after an event
	waryBurst              // the server's burst is gentleBursty of its limit or more
)

// crossing says whether an epoch began with the server overdrawn (see
// Gentle.crosses) and whether the lockout of it came (see
// Gentle.lockedOut).
type crossing uint8

const (
	notCrossed crossing = iota
	crossed             // overdrawn as the epoch began: its lockout may follow, and its aftershock
	probedOver          // overdrawn by a probe: every refusal within gentleLockout is its lockout
	riddenOut           // overdrawn, and its lockout came: an aftershock may follow, no second lockout
)

// tightness says whether a server lets no burst through, as the first
// requests of a key's first contact, sent at once, showed at its first
// throttle.
type tightness uint8

const (
	tightUnknown tightness = iota // the key's first throttle has not come
	tightNo                       // more than one passed
	tightStale                    // the first throttle came after a memory's limit was forgotten: its floor is the stale rate's, and tells nothing of the burst
	tightMaybe                    // one was refused before any came back: those in flight tell (see tally)
	tightYes                      // one passed and the next was refused, not more
)

// slowness says whether a round trip far above the base (see heldOut) is
// the server holding a request past its limit, as a server that slows
// instead of refusing does, or the endpoint's own slowness.
type slowness uint8

const (
	slowServer   slowness = iota // a hold is a throttle: the server's, until it shows otherwise
	slowEndpoint                 // holds came while the rate stood still more than while it rose: they are the endpoint's, and read as successes
)

// The kinds of epoch startEpoch begins.
type epochKind uint8

const (
	measuredEpoch   epochKind = iota // after an event that measured W: a new measurement begins
	lockoutEpoch                     // after a lockout: the curve restarts, the measurement goes on
	rememberedEpoch                  // from a memory, or forgetting one: as if an event and a success since had come
)

// forgotten is the burst Observe reports when g has just forgotten a
// limit a memory gave: the key starts over.
const forgotten = -1

// noSend is NoMark as Gentle's phase counts it.
const noSend = uint32(NoMark)

// seeking reports whether W is being sought (climbing or finding): no
// hold, the rate doubles.
func (g *Gentle) seeking() bool { return g.state == climbing || g.state == finding }

// limitKnown reports whether W is measured (or stated), not a floor.
func (g *Gentle) limitKnown() bool { return g.state == finding || g.state == holding }

// moved reports whether limit moved more than gentleMoved from previous.
func moved(limit, previous float64) bool { return math.Abs(limit-previous) > gentleMoved*previous }

// The bits of Gentle.recalled.
const (
	recalledLimit  = 1 << iota // the estimate is a memory's, and no throttle has come since
	recalledStated             // the stated limit is a memory's, and no answer has stated one since
)

// wholeSeconds returns n (Unix nanoseconds) in whole seconds, rounded, as
// Gentle keeps some instants.
func wholeSeconds(n int64) uint32 {
	return uint32(max((n+int64(time.Second)/2)/int64(time.Second), 0))
}

func nanosToSeconds(n int64) float64 { return float64(n) / float64(time.Second) }
