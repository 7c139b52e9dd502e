package polite

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// A Fleet is pacing state shared by the Transports of many processes that
// call one API, so that together they keep to one quota (see [WithFleet]).
// Package github.com/politehttp/polite/fleet implements it on Redis; the
// core knows nothing of the store.
//
// Its methods are safe for concurrent use. They must return promptly:
// a store that cannot answer within its own short timeout returns an
// error, and the Transport then paces on its own (it fails open).
type Fleet interface {
	// Reserve books the next send for key under the limits of r, for the
	// whole fleet, and returns how long after the call the sender is to
	// wait before it sends. A booking that would need a wait longer
	// than r.MaxWait is not made: the grant says so and gives the wait.
	Reserve(ctx context.Context, key string, r FleetRequest) (FleetGrant, error)

	// Pause holds every process's sends to key for d from now (a pause
	// never shortens a longer one), and makes the sends after it resume
	// at r's rate, without a burst.
	Pause(ctx context.Context, key string, d time.Duration, r FleetRequest) error

	// Throttled tells the fleet's shared controller that the server
	// throttled a send booked under generation gen: a congestion event,
	// unless one came since that booking (the throttles of one overload,
	// in any process, count once).
	Throttled(ctx context.Context, key string, gen uint64) error

	// SharesController reports whether the fleet runs a controller shared
	// by its processes, for keys with no configured or stated rate (see
	// FleetRequest.Adaptive); if not, each process's own controller paces
	// it as if it were alone, and the fleet shares the server's pauses.
	SharesController() bool

	// Paused returns how long key stays paused, as this process last
	// heard from the fleet, without asking the store: a send booked
	// before a pause that another process set checks it before it goes.
	Paused(key string) time.Duration

	// Size returns how many processes share the fleet, at least 1: the
	// Transport divides the fleet's rates by it when the store cannot
	// answer and it paces on its own.
	Size() int
}

// FleetRequest is what a Transport asks of its [Fleet] for one send: the
// limits that hold for the whole fleet.
type FleetRequest struct {
	// PerSecond and Burst are the key's token bucket, fleet-wide (as
	// [WithRate] sets it, or the quota the server states). PerSecond 0
	// means no pacing.
	PerSecond float64
	Burst     int
	// Window is the key's exact window quota ([WithWindow]): at most
	// Window.N sends in any interval of Window.Per. N 0 means none.
	Window Window
	// MaxWait is the longest wait the sender accepts; a negative MaxWait
	// accepts any.
	MaxWait time.Duration
	// Adaptive asks the fleet to pace by its shared controller too, once
	// a throttle has measured the server's limit (see [Fleet.Throttled]):
	// the lower of its rate and PerSecond applies.
	Adaptive bool
	// Accepted is how many of this process's sends to the key succeeded
	// since its last request: the shared controller counts them.
	Accepted int
}

// FleetGrant is a [Fleet]'s answer to a [FleetRequest].
type FleetGrant struct {
	// Granted reports whether the send was booked. When it was not, Wait
	// is the wait it would have needed.
	Granted bool
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
}

// Window is an exact window quota: at most N requests in any interval of
// length Per.
type Window struct {
	N   int
	Per time.Duration
}

// fleetGlobalKey is the key of the WithGlobalRate bucket in the fleet.
const fleetGlobalKey = "\x00global"

// WithFleet shares the Transport's pacing with every other Transport
// configured with the same fleet store, in this process or another, so
// that together they keep to one quota. Under WithFleet:
//
//   - [WithRate], [WithGlobalRate] and [WithWindow] are fleet-wide: every
//     process configured with WithRate(100, 10) means 100 a second for the
//     whole fleet, booked in the store, one round trip per attempt (fewer
//     where the store leases several sends at once);
//   - a pause a server asks for (a Retry-After that holds the key, a quota
//     spent until its reset) seen by one process holds every process's
//     calls to that key: the next they make, and those already booked
//     that the store tells of it ([Fleet.Paused]);
//   - the rate of a quota the server states in its headers (its limit
//     over its window) paces the fleet, fleet-wide, as WithRate does;
//   - with neither, each process's own controller ([WithAdaptive]) paces
//     it as if it were alone, and the fleet shares the server's pauses;
//     or, if the fleet shares a controller ([Fleet.SharesController]),
//     that one paces the fleet: its state lives in the store, one per
//     key, so that a throttle seen by several processes at once counts
//     once and a rise one process finds is used by all. It works as
//     [Gentle] does: it measures the server's limit from the successes
//     of every process between congestion events, holds just below it,
//     and probes above it now and then.
//
// When the store cannot answer, the Transport fails open: it paces each
// key on its own at the fleet's rate divided by the fleet's size
// ([Fleet.Size]), honours the pauses it saw, and goes back to the store
// when it answers again. No call fails or waits because of the store.
//
// Default: nil, each Transport paces alone.
func WithFleet(f Fleet) Option {
	return func(c *config) { c.fleet = f }
}

// WithWindow keeps each key (see [WithKey]) to at most n requests in any
// interval of length per, as APIs that state "100 per minute" enforce it.
// It composes with [WithRate] and the server's signals: a request waits
// for all of them. The window counts attempts as they are sent, retries
// included, and spaces the n+1-th from the first by per plus a guard of
// 50ms, which absorbs the jitter between sending and arrival.
//
// A Transport keeps each key's window in memory: at most 257 entries, the
// sends of each 1/256 of per merged into one that counts them at the
// latest of their instants, so that it never allows n+1 and delays a
// send by at most per/256 beyond the exact instant. Under [WithFleet] the
// window is fleet-wide and exact.
//
// Default: none. n < 1 or per <= 0 means none.
func WithWindow(n int, per time.Duration) Option {
	return func(c *config) {
		if n < 1 || per <= 0 {
			c.window = Window{}
			return
		}
		c.window = Window{N: n, Per: per}
	}
}

// windowGuard is added to a window's length: the sends are spaced by it
// more than the window asks, so that jitter between sending and arrival
// cannot put n+1 of them into one interval at the server.
const windowGuard = 50 * time.Millisecond

// admitFleets returns when the fleet lets the call send: to its key, and
// under WithGlobalRate to any key.
func (c *call) admitFleets() error {
	ks := c.need()
	perSecond, burst := c.fleetRate()
	// A shared controller paces when nothing else does: a configured or
	// stated rate is the server's, and the fleet keeps to it.
	shared := perSecond == 0 && c.t.keys.adaptive != AdaptiveOff && c.t.cfg.fleet.SharesController()
	c.fleetShared = shared
	r := FleetRequest{PerSecond: perSecond, Burst: burst, Adaptive: shared}
	if c.t.cfg.window.N > 0 {
		r.Window = Window{N: c.t.cfg.window.N, Per: c.t.cfg.window.Per + windowGuard}
	}
	if r.Adaptive {
		ks.mu.Lock()
		if x := ks.extra; x != nil {
			r.Accepted, x.fleetAccepted = x.fleetAccepted, 0
		}
		ks.mu.Unlock()
	}
	if err := c.admitFleet(c.key, ks, r); err != nil {
		return err
	}
	if perSecond == 0 && !shared {
		// Nothing configured or stated, and no shared controller: the
		// key's own controller paces this process as if it were alone.
		if err := c.admitOn(ks); err != nil {
			return err
		}
	}
	if g := c.t.global; g != nil {
		return c.admitFleet(fleetGlobalKey, g, FleetRequest{PerSecond: c.t.cfg.globalRate, Burst: c.t.cfg.globalBurst})
	}
	return nil
}

// tellFleet tells the fleet's shared controller the outcome o of the
// call's attempt, if that controller paced it: a success is counted (with
// the key's next request), a throttle is a congestion event unless one
// came since the attempt was booked.
func (c *call) tellFleet(ks *keyState, o outcome) {
	if !c.fleetShared {
		return
	}
	switch o {
	case outcomeOK:
		ks.mu.Lock()
		ks.extraLocked().fleetAccepted++
		ks.mu.Unlock()
	case outcomeThrottled:
		// An error leaves the event to the processes that can tell it.
		_ = c.t.cfg.fleet.Throttled(c.ctx, c.key, c.fleetGen)
	}
}

// admitFleet returns when the fleet lets the call send to key, which the
// local state ks stands for: at once, after the wait the fleet booked, or,
// when the fleet cannot answer, after ks's own fallback pacing. A send
// that waited for its slot checks, before it goes, that no pause began
// meanwhile (one this process saw, or that the fleet published); if one
// did, it waits for it and books again.
func (c *call) admitFleet(key string, ks *keyState, r FleetRequest) error {
	for {
		again, err := c.bookFleet(key, ks, r)
		if !again || err != nil {
			return err
		}
		r.Accepted = 0 // told with the first booking
	}
}

// bookFleet makes one booking for admitFleet and waits for it; again
// reports that a pause began meanwhile and the call must book again.
func (c *call) bookFleet(key string, ks *keyState, r FleetRequest) (again bool, err error) {
	f := c.t.cfg.fleet
	perSecond, burst := r.PerSecond, r.Burst
	r.MaxWait = -1
	now := time.Now()
	if deadline, ok := c.ctx.Deadline(); ok {
		r.MaxWait = max(deadline.Sub(now), 0)
	}
	g, err := f.Reserve(c.ctx, key, r)
	if err != nil {
		if r.Accepted > 0 { // not told: the next booking tells them
			ks.mu.Lock()
			ks.extraLocked().fleetAccepted += r.Accepted
			ks.mu.Unlock()
		}
		if c.ctx.Err() != nil {
			return false, context.Cause(c.ctx)
		}
		members := c.members(ks)
		return false, c.admitFallback(ks, perSecond/float64(members), max(burst/members, 1))
	}
	if g.Members > 0 {
		ks.mu.Lock()
		ks.extraLocked().members = g.Members
		ks.mu.Unlock()
	}
	if key != fleetGlobalKey {
		c.fleetGen = g.Gen
	}
	server := g.Paused > 0 && g.Paused >= g.Wait
	if g.Paused > c.t.cfg.maxRetryAfter {
		return false, c.refuse(g.Paused, now, true)
	}
	if !g.Granted {
		if err := c.refuse(g.Wait, now, server); err != nil {
			return false, err
		}
		err := &ThrottledError{Key: c.key, Wait: g.Wait, Allowed: max(r.MaxWait, 0), Server: server}
		e := c.event(nil, err)
		e.Delay, e.Server = g.Wait, server
		c.t.refused(e, err)
		return false, err
	}
	if g.Wait <= 0 {
		return false, nil
	}
	c.waiting(g.Wait, pauseCause(g.Paused, g.Wait))
	if err := sleep(c.ctx, g.Wait); err != nil {
		return false, err
	}
	now = time.Now()
	ks.mu.Lock()
	paused := ks.pauseNowLocked(now)
	ks.mu.Unlock()
	if key != fleetGlobalKey {
		paused = max(paused, f.Paused(key))
	}
	if paused <= 0 {
		return false, nil
	}
	if err := c.waitFor(paused, now, WaitPause, true, func() {}); err != nil {
		return false, err
	}
	return true, nil
}

// admitFallback paces the call on the key's own, while the fleet cannot
// answer: it waits for any pause this process saw, and for a token of a
// bucket of perSecond (0: none) and burst kept for that.
func (c *call) admitFallback(ks *keyState, perSecond float64, burst int) error {
	ks.mu.Lock()
	// The clock is read under the lock: a rate.Limiter given instants out
	// of order refills twice over the overlap.
	now := time.Now()
	pause := ks.pauseNowLocked(now)
	var res *rate.Reservation
	if perSecond > 0 {
		x := ks.extraLocked()
		limit, b := rate.Limit(perSecond), max(burst, 1)
		if x.fallback == nil {
			x.fallback = rate.NewLimiter(limit, b)
		} else if x.fallback.Limit() != limit || x.fallback.Burst() != b {
			x.fallback.SetLimitAt(now, limit)
			x.fallback.SetBurstAt(now, b)
		}
		res = x.fallback.ReserveN(now.Add(pause), 1)
	}
	ks.mu.Unlock()
	wait := pause
	if res != nil {
		wait = res.DelayFrom(now)
	}
	cancel := func() {
		if res != nil {
			res.CancelAt(time.Now())
		}
	}
	if err := c.refuseWait(pause, wait, now); err != nil {
		cancel()
		return err
	}
	if wait <= 0 {
		return nil
	}
	c.waiting(wait, pauseCause(pause, wait))
	if err := sleep(c.ctx, wait); err != nil {
		cancel()
		return err
	}
	return nil
}

// fleetRate returns the fleet-wide rate and burst: the ceiling
// (WithRate), or the rate of the quota the server reports for the request
// (its limit over its window, less a margin) if that is less; 0 for none.
// Each process's own controller does not pace the fleet: it hears only its
// share of the server's answers; the fleet's shared controller paces
// instead (FleetRequest.Adaptive).
func (c *call) fleetRate() (float64, int) {
	ceiling, burst := c.t.keys.ceiling()
	perSecond := float64(ceiling)
	if ceiling == rate.Inf { // a finite number, not +Inf: no rate
		perSecond, burst = 0, 0
	}
	ks := c.ks
	if ks == nil {
		return perSecond, burst
	}
	if ks.quoted.Load() {
		if q := ks.quotaFor(c.req.URL.Path); q != nil {
			if r := q.rate(); r > 0 && (perSecond == 0 || r < perSecond) {
				perSecond, burst = r, 1
			}
		}
	}
	return perSecond, burst
}

// share returns the part of a server's quota the call's process spends: 1
// alone; in a fleet, 1 over the processes that sent to the key lately (or
// the fleet's size).
func (c *call) share(ks *keyState) float64 {
	if c.t.cfg.fleet == nil {
		return 1
	}
	return 1 / float64(c.members(ks))
}

// members returns how many processes share the key's quota, at least 1:
// the fleet's size, or the processes its store last said sent to the key,
// if more.
func (c *call) members(ks *keyState) int {
	members := c.t.cfg.fleet.Size()
	ks.mu.Lock()
	if x := ks.extra; x != nil {
		members = max(members, x.members)
	}
	ks.mu.Unlock()
	return max(members, 1)
}

// pauseFleet tells the fleet that the server asked for no request to the
// call's key until until.
func (c *call) pauseFleet(ks *keyState, until, now time.Time) {
	f := c.t.cfg.fleet
	if f == nil || !until.After(now) {
		return
	}
	perSecond, burst := c.fleetRate()
	// An error leaves the pause to this process: the others learn of it
	// from the server.
	_ = f.Pause(c.ctx, c.key, until.Sub(now), FleetRequest{PerSecond: perSecond, Burst: burst})
}
