package fleetapi

import (
	"context"
	"time"
)

// A Fleet is pacing state shared by the Transports of many processes that
// call one API, so that together they keep to one quota (see
// [github.com/politehttp/polite.WithFleet]). Package
// [github.com/politehttp/polite/fleet] implements it on Redis; the core
// knows nothing of the store.
//
// Its methods are safe for concurrent use. They must return promptly:
// a store that cannot answer within its own short timeout returns an
// error, and the Transport then paces on its own (it fails open).
type Fleet interface {
	// Reserve books the next send for key under the limits of r, for the
	// whole fleet (with r.Owed sends made without it before), and returns
	// how long after the call the sender is to wait before it sends. A
	// booking that would need a wait longer than r.MaxWait is not made:
	// the grant says so and gives the wait.
	Reserve(ctx context.Context, key string, r Request) (Grant, error)

	// Pause holds every process's sends to key for d from now (a pause
	// never shortens a longer one), and makes the sends after it resume
	// at r's rate, without a burst.
	Pause(ctx context.Context, key string, d time.Duration, r Request) error

	// Throttled tells the fleet's shared controller that the server
	// throttled a send booked under generation gen: a congestion event
	// if the send was booked after a success of a send booked since the
	// last event; none if it was booked before the last event (the
	// throttles of one overload, in any process, count once); and, in
	// between, a sign that the server still refuses at the new rate,
	// which halves it.
	Throttled(ctx context.Context, key string, gen uint64) error

	// SharesController reports whether the fleet runs a controller shared
	// by its processes, for keys with no configured or stated rate (see
	// [Request.Adaptive]); if not, each process's own controller paces it
	// as if it were alone, and the fleet shares the server's pauses.
	SharesController() bool

	// Paused returns how long key stays paused, as this process last
	// heard from the fleet, without asking the store: a send booked
	// before a pause that another process set checks it before it goes.
	Paused(key string) time.Duration

	// Adjust tells the fleet of changes to key's quotas in units other
	// than requests since their sends were booked (see [Request.Costs]):
	// what the sends gave back (the part of their cost they did not use,
	// or the whole of it when the server throttled them), and the most
	// each quota can hold now, as the server last said. It must not block:
	// the fleet may tell the store later, in batches.
	Adjust(key string, a []Adjust)

	// Size returns how many processes share the fleet, at least 1: the
	// Transport divides the fleet's rates by it when the store cannot
	// answer and it paces on its own.
	Size() int
}

// Congestion is implemented by a [Fleet] whose shared controller tells
// its processes of a congestion event as it happens (package
// [github.com/politehttp/polite/fleet] does, on the key's channel). A send
// the shared controller booked under generation gen, asleep until its
// slot, asks Congested before it goes; if an event came since, it books
// again, at the rate the event cut to, rather than go at the rate it was
// booked at (the event let the queue of such sends go). A Fleet without it
// lets such sends go at their slots.
type Congestion interface {
	// Congested reports whether key's shared controller has had a
	// congestion event since generation gen, as this process last heard,
	// without asking the store.
	Congested(key string, gen uint64) bool
}

// Overtaking is implemented by a [Fleet] that books a send of a higher
// priority ahead of the sends of lower priorities booked before it, in
// any process ([Request.Priority]; package
// [github.com/politehttp/polite/fleet] does): those sends, asleep until
// their slots, go that much later, so that the fleet keeps to its quota.
// A send the Fleet granted, at its slot, asks Overtaken before it goes,
// and waits on by what it returns; it asks again after that wait, since
// more may have overtaken it meanwhile.
type Overtaking interface {
	// Overtaken returns how much later than its slot the send of key
	// granted g, at priority p, must go: the slots that the sends of a
	// higher priority booked since took ahead of it, as this process last
	// heard, without asking the store. It returns the whole delay since
	// the booking, not the part since the last call.
	Overtaken(key string, p int8, g Grant) time.Duration
}

// Inspector is implemented by a [Fleet] that can say what its store holds
// for keys (package [github.com/politehttp/polite/fleet] does, reading
// Redis): a Transport's status page shows it beside what the process
// knows (see [github.com/politehttp/polite.Transport.StatusHandler]). It
// is called only when the page is read, for the keys it shows.
type Inspector interface {
	// Inspect returns what the store holds for each of keys, in the same
	// order, in one round trip where the store allows; an error if the
	// store cannot answer within ctx.
	Inspect(ctx context.Context, keys []string) ([]KeyState, error)
}

// KeyState is what a fleet's store holds for one key (see [Inspector]).
type KeyState struct {
	// Known reports that the store holds state for the key; the other
	// fields are zero if not.
	Known bool
	// Members is how many processes sent to the key lately, as the store
	// counts them; 0 if it does not.
	Members int
	// Limit is the shared controller's estimate of the server's limit, in
	// requests per second (see [Fleet.SharesController]); 0 if it has
	// none.
	Limit float64
	// Next is when the next send the fleet books may go: later than now
	// while the fleet's sends are booked ahead. Zero if the store holds
	// none.
	Next time.Time
	// Paused is when the fleet-wide pause of the key ends; zero if none.
	Paused time.Time
}

// Request is what a Transport asks of its [Fleet] for one send: the
// limits that hold for the whole fleet.
type Request struct {
	// PerSecond and Burst are the key's token bucket, fleet-wide (as
	// [github.com/politehttp/polite.WithRate] sets it, or the quota the
	// server states). PerSecond 0 means no pacing.
	PerSecond float64
	Burst     int
	// Window is the key's exact window quota
	// ([github.com/politehttp/polite.WithWindow]): at most Window.N sends
	// in any interval of Window.Per. N 0 means none.
	Window Window
	// MaxWait is the longest wait the sender accepts; a negative MaxWait
	// accepts any.
	MaxWait time.Duration
	// Adaptive asks the fleet to pace by its shared controller too, once
	// a throttle has measured the server's limit (see [Fleet.Throttled]):
	// the lower of its rate and PerSecond applies.
	Adaptive bool
	// Accepted are this process's sends to the key that succeeded since
	// its last request, by the generation each was booked under
	// ([Grant.Gen]): the shared controller counts them, and tells by the
	// generation whether a success answers a send made before its last
	// congestion event or after it.
	Accepted []Accepted
	// Owed is how many sends this process made to the key on its own
	// that the fleet has not counted: while the fleet could not answer (at
	// most Burst: a bucket forgets what came before it last filled), and,
	// paced by its own controller, in the second before the fleet paced
	// the key at a rate (a quota the server stated after its first
	// answers). The booking books that many more sends of the key's
	// bucket, at most a second's at PerSecond or Burst, so that the fleet's
	// schedule counts them, and the fleet does not let a burst through on
	// top of them, nor spend a window the server counted them in again.
	Owed int
	// NotBefore is the earliest, from now, the send may go: with Owed,
	// the process's own pacing of the sends it made while the fleet could
	// not answer, some of which may still be asleep until their slot.
	NotBefore time.Duration
	// Costs are what the send costs in units other than requests (see
	// [github.com/politehttp/polite.WithCost]), in each unit whose quota
	// is known: booked with the send, all or none, first come first served
	// across the fleet.
	Costs []Cost
	// Priority is the call's priority, as
	// [github.com/politehttp/polite.Priority] numbers it (0 is the
	// default; a higher one goes first). A fleet that implements
	// [Overtaking] books a send of a higher priority ahead of the sends of
	// lower ones booked before it, in any process; one that does not books
	// every send in order of arrival.
	Priority int8
}

// Cost is what a send costs in one unit other than requests, and the
// quota of that unit for the whole fleet: Limit units, refilled every Per.
type Cost struct {
	Unit   string // as [github.com/politehttp/polite.Quota.Unit] names it
	Amount float64
	Limit  float64
	Per    time.Duration
}

// Adjust is a change of a fleet's quota in one unit other than requests
// (see [Fleet.Adjust]): Limit units refilled every Per.
type Adjust struct {
	Unit  string
	Limit float64
	Per   time.Duration
	// GiveBack is what sends booked before gave back: the part of their
	// cost they did not use, or all of it when the server throttled them.
	// Below 0, they cost more than they took.
	GiveBack float64
	// AtMost, if Bounded, is the most the quota can hold now, as the
	// server last said.
	AtMost  float64
	Bounded bool
	// Read, if not zero, is when the server read the quota AtMost
	// states: the moment the request it answered was sent, at the
	// earliest. The fleet takes the bound less what it booked for sends
	// after then, which the server had not counted yet. Zero: the bound
	// stands as it is.
	Read time.Time
}

// Grant is a [Fleet]'s answer to a [Request].
type Grant struct {
	// Granted reports whether the send was booked. When it was not, Wait
	// is the wait it would have needed.
	Granted bool
	// Later reports that nothing was booked yet, though the sender could
	// wait that long: the fleet's shared controller, whose rate may rise
	// meanwhile, would have booked the send far ahead. The sender asks
	// again after Wait.
	Later bool
	// Wait is how long the sender waits before it sends.
	Wait time.Duration
	// Paused is how long the key stays paused, as a server asked: the part
	// of Wait that is the server's.
	Paused time.Duration
	// Members is how many processes sent to the key lately, 0 if unknown.
	Members int
	// Gen is the shared controller's generation the send is booked under:
	// a throttle of the send reports it to [Fleet.Throttled].
	Gen uint64
	// At and Overtakes say where the send stands in the key's schedule,
	// for [Overtaking]: its slot on the store's own clock (in µs; not
	// this process's clock), and how many sends had overtaken others in
	// the key's schedule when it was booked. A Fleet that does not
	// implement Overtaking leaves them 0.
	At        int64
	Overtakes uint64
}

// Accepted counts the successes of sends booked under one generation of
// a fleet's shared controller (see [Request.Accepted]).
type Accepted struct {
	Gen uint64 // the generation the sends were booked under ([Grant.Gen])
	N   int    // how many of them succeeded
}

// Window is an exact window quota: at most N requests in any interval of
// length Per.
type Window struct {
	N   int
	Per time.Duration
}
