package polite

import (
	"context"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/control"
)

// addAccepted returns a with n more successes of sends booked under gen,
// in order of generation. It keeps at most maxAccepted generations: the
// oldest two are told as one, under the older (a success told as older
// than it is counts for less, never for more).
func addAccepted(a []fleetapi.Accepted, gen uint64, n int) []fleetapi.Accepted {
	i := len(a)
	for i > 0 && a[i-1].Gen > gen {
		i--
	}
	if i > 0 && a[i-1].Gen == gen {
		a[i-1].N += n
		return a
	}
	a = slices.Insert(a, i, fleetapi.Accepted{Gen: gen, N: n})
	if len(a) > maxAccepted {
		a[0].N += a[1].N
		a = slices.Delete(a, 1, 2)
	}
	return a
}

// maxAccepted bounds the generations a key's untold successes are kept
// under (see addAccepted).
const maxAccepted = 4

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
//     that the store tells of it ([fleetapi.Fleet.Paused]);
//   - the rate of a quota the server states in its headers (its limit
//     over its window) paces the fleet, fleet-wide, as WithRate does;
//   - with neither, each process's own controller ([WithAdaptive]) paces
//     it as if it were alone, and the fleet shares the server's pauses;
//     or, if the fleet shares a controller
//     ([fleetapi.Fleet.SharesController]; a fleet of package fleet does by
//     default), that one paces the fleet: its state lives in the store,
//     one per key, so that a throttle seen by several processes at once
//     counts once and a rise one process finds is used by all. It works
//     as [Gentle] does: it measures the server's limit from the successes
//     of every process between congestion events, holds just below it,
//     and probes above it now and then.
//
// When the store cannot answer, the Transport fails open: it paces each
// key on its own at the fleet's rate divided by the fleet's size
// ([fleetapi.Fleet.Size]), honours the pauses it saw, and goes back to the
// store when it answers again. No call fails or waits because of the
// store.
//
// Package [github.com/politehttp/polite/fleet] is such a store, on Redis;
// package [fleetapi] says what a store of another kind implements.
//
// Default: nil, each Transport paces alone.
func WithFleet(f fleetapi.Fleet) Option {
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
			c.window = fleetapi.Window{}
			return
		}
		c.window = fleetapi.Window{N: n, Per: per}
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
	costs, err := c.fleetCosts(ks)
	if err != nil {
		return err
	}
	shared := perSecond == 0 && c.t.keys.adaptive != AdaptiveOff && c.t.cfg.fleet.SharesController()
	c.fleetShared = shared
	r := fleetapi.Request{PerSecond: perSecond, Burst: burst, Adaptive: shared, Costs: costs}
	if c.t.cfg.window.N > 0 {
		r.Window = fleetapi.Window{N: c.t.cfg.window.N, Per: c.t.cfg.window.Per + windowGuard}
	}
	if r.Adaptive {
		ks.mu.Lock()
		if x := ks.extra; x != nil {
			r.Accepted, x.fleetAccepted = x.fleetAccepted, nil
		}
		ks.mu.Unlock()
	}
	if err := c.admitFleet(c.key, ks, r); err != nil {
		return err
	}
	if perSecond == 0 && !shared {
		// Nothing configured or stated, and no shared controller: the
		// key's own controller paces this process as if it were alone.
		if err := c.admitOn(ks, c.t.keys.adaptive); err != nil {
			return err
		}
		ks.mu.Lock()
		ks.extraLocked().ownSent(time.Now())
		ks.mu.Unlock()
	}
	if g := c.t.global; g != nil {
		return c.admitFleet(fleetGlobalKey, g, fleetapi.Request{PerSecond: c.t.cfg.globalRate, Burst: c.t.cfg.globalBurst})
	}
	return nil
}

// tellFleet tells the fleet's shared controller the outcome o of the
// call's attempt, if that controller paced it: a success is counted (with
// the key's next request), a throttle is a congestion event unless one
// came since the attempt was booked.
func (c *call) tellFleet(ks *keyState, o control.Outcome) {
	if !c.fleetShared {
		return
	}
	switch o {
	case control.OK:
		ks.mu.Lock()
		x := ks.extraLocked()
		x.fleetAccepted = addAccepted(x.fleetAccepted, c.fleetGen, 1)
		ks.mu.Unlock()
	case control.Throttled:
		// An error leaves the event to the processes that can tell it.
		_ = c.t.cfg.fleet.Throttled(c.ctx, c.key, c.fleetGen)
	}
}

// admitFleet returns when the fleet lets the call send to key, which the
// local state ks stands for: at once, after the wait the fleet booked, or,
// when the fleet cannot answer, after ks's own fallback pacing. A send
// that waited for its slot checks, before it goes, that no pause began
// meanwhile (one this process saw, or that the fleet published); if one
// did, it waits for it and books again. A call that books again gives
// back the costs it booked, and books them as the quota now stands.
func (c *call) admitFleet(key string, ks *keyState, r fleetapi.Request) error {
	for {
		again, err := c.bookFleet(key, ks, r)
		if !again || err != nil {
			return err
		}
		r.Accepted = nil // told with the first booking
		if cc := c.cost; key != fleetGlobalKey && cc != nil && cc.costly {
			if cc.booked {
				// Taken at a slot the send did not go at: the fleet's
				// buckets would count them twice.
				back := make([]fleetapi.Adjust, len(r.Costs))
				for i, fc := range r.Costs {
					back[i] = fleetapi.Adjust{Unit: fc.Unit, Limit: fc.Limit, Per: fc.Per, GiveBack: fc.Amount}
				}
				c.t.cfg.fleet.Adjust(key, back)
			}
			// The quota may be known now: a call that began before any
			// answer stated it booked no cost, and would go unseen by the
			// fleet's buckets however long it waited.
			if r.Costs, err = c.fleetCosts(ks); err != nil {
				return err
			}
		}
	}
}

// bookFleet makes one booking for admitFleet and waits for it; again
// reports that a pause began meanwhile and the call must book again.
func (c *call) bookFleet(key string, ks *keyState, r fleetapi.Request) (again bool, err error) {
	f := c.t.cfg.fleet
	perSecond, burst := r.PerSecond, r.Burst
	r.MaxWait = -1
	now := time.Now()
	if deadline, ok := c.ctx.Deadline(); ok {
		r.MaxWait = max(deadline.Sub(now), 0)
	}
	own := 0 // of r.Owed, the sends the key's own controller paced
	if r.Window.N == 0 && perSecond > 0 && key != fleetGlobalKey {
		members := c.members(ks)
		ks.mu.Lock()
		if x := ks.extra; x != nil {
			if x.fleetOwed > 0 {
				r.Owed = x.fleetOwed
				r.NotBefore = x.fallbackNext(now, perSecond/float64(members), float64(burst)/float64(members))
			}
			own = x.ownLocked(now)
		}
		ks.mu.Unlock()
		if own > 1 && !c.windowed(ks) {
			// A bucket forgets what came before it last filled: the
			// sends it refused or refilled since are not owed.
			own = max(burst, 1)
		}
		r.Owed += own
	}
	g, err := f.Reserve(c.ctx, key, r)
	if err != nil {
		if len(r.Accepted) > 0 { // not told: the next booking tells them
			ks.mu.Lock()
			x := ks.extraLocked()
			for _, a := range r.Accepted {
				x.fleetAccepted = addAccepted(x.fleetAccepted, a.Gen, a.N)
			}
			ks.mu.Unlock()
		}
		if c.ctx.Err() != nil {
			return false, context.Cause(c.ctx)
		}
		members := c.members(ks)
		heard := time.Duration(0)
		if key != fleetGlobalKey {
			heard = f.Paused(key) // published by another process before Redis went
		}
		owe := 0
		if key != fleetGlobalKey {
			owe = max(burst, 1)
		}
		return c.admitFallback(ks, perSecond/float64(members), float64(burst)/float64(members), heard, owe)
	}
	if g.Members > 0 || g.Granted && (r.Owed > 0 || perSecond > 0) {
		// One hold of the key's lock for what the answer tells: the
		// fleet's size, the sends owed that it booked, and the slot the
		// fallback continues after.
		members := c.members(ks)
		ks.mu.Lock()
		x := ks.extraLocked()
		if g.Members > 0 {
			x.members = g.Members
			members = max(members, g.Members)
		}
		if g.Granted && r.Owed > 0 { // booked with this send
			x.fleetOwed = max(x.fleetOwed-(r.Owed-own), 0)
			if own > 0 {
				x.fleetOwn = 0
			}
		}
		if g.Granted && perSecond > 0 {
			x.fleetBooked(now.Add(g.Wait), perSecond/float64(members), float64(burst)/float64(members))
		}
		ks.mu.Unlock()
	}
	if key != fleetGlobalKey {
		c.fleetGen = g.Gen
		if c.cost != nil {
			c.cost.booked = g.Granted && len(r.Costs) > 0
		}
	}
	if g.Later {
		c.waiting(g.Wait, WaitRate)
		if err := sleep(c.ctx, g.Wait); err != nil {
			return false, err
		}
		return true, nil
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
	if r.Adaptive && key != fleetGlobalKey {
		if fc, ok := f.(fleetapi.Congestion); ok && fc.Congested(key, g.Gen) {
			return true, nil // the shared controller cut its rate meanwhile: book again at it
		}
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

// A key's fallback pacing, while its fleet cannot answer, is a GCRA of
// the process's share of the fleet's rate and burst (a share of a burst
// may be less than one request), kept in the key's state as its
// theoretical arrival time (fallbackTat). Each send the fleet books moves
// it on, so that a fallback starts where the fleet left off: after the
// last send the fleet booked for this process (some may still be asleep
// until their slot), with its share of the burst spent, not with a burst
// of its own on top of the fleet's. A key the fleet never booked starts
// with its share of the burst: a share under one request waits for the
// rest of it.

// fleetBooked records that the fleet booked a send of the key at slot,
// for the fallback that may follow: no local send before slot plus burst
// intervals at perSecond.
func (x *keyExtra) fleetBooked(slot time.Time, perSecond, burst float64) {
	ei := fallbackInterval(perSecond)
	if t := slot.Add(time.Duration(burst * float64(ei))).UnixNano(); t > x.fallbackTat {
		x.fallbackTat = t
	}
}

// fallbackBook books a local send of the key at at or later, at perSecond
// with burst, and returns its instant.
func (x *keyExtra) fallbackBook(at time.Time, perSecond, burst float64) time.Time {
	ei := fallbackInterval(perSecond)
	if x.fallbackTat == 0 {
		x.fallbackTat = at.UnixNano() // never used: full, with burst
	}
	slot := maxTime(at, x.fallbackNextAt(ei, burst))
	x.fallbackTat = maxTime(time.Unix(0, x.fallbackTat), slot).Add(ei).UnixNano()
	return slot
}

// fallbackNextAt returns when the key's next local send may go, at the
// interval ei with burst.
func (x *keyExtra) fallbackNextAt(ei time.Duration, burst float64) time.Time {
	return time.Unix(0, x.fallbackTat).Add(-time.Duration((burst - 1) * float64(ei)))
}

// ownSent counts a send the key's own controller paced at now, in a fleet
// (nothing configured or stated, and no shared controller): if the fleet
// comes to pace the key at a rate (a quota the server stated), the sends
// of the last second are owed to it, so that a window's count at the
// server is not spent twice. It requires the key's lock held.
func (x *keyExtra) ownSent(now time.Time) {
	if now.UnixNano()-x.fleetOwnAt > int64(time.Second) {
		x.fleetOwn, x.fleetOwnAt = 0, now.UnixNano()
	}
	x.fleetOwn++
}

// ownLocked returns the sends ownSent counted within the last second
// before now. It requires the key's lock held.
func (x *keyExtra) ownLocked(now time.Time) int {
	if now.UnixNano()-x.fleetOwnAt > int64(time.Second) {
		return 0
	}
	return x.fleetOwn
}

// fallbackNext returns how long from now the key's next local send may
// go, at perSecond with burst: 0 if at once.
func (x *keyExtra) fallbackNext(now time.Time, perSecond, burst float64) time.Duration {
	return max(x.fallbackNextAt(fallbackInterval(perSecond), burst).Sub(now), 0)
}

// fallbackInterval returns the interval of a GCRA at perSecond (> 0).
func fallbackInterval(perSecond float64) time.Duration {
	return time.Duration(min(float64(time.Second)/perSecond, float64(maxPause)))
}

// admitFallback paces the call on the key's own, while the fleet cannot
// answer: it waits for any pause this process saw or heard of from the
// fleet (heard), and for a slot of the key's fallback GCRA of perSecond
// (0: none) and burst. A send it books is owed to the fleet (see
// fleetapi.Request.Owed), up to owe, from the moment it is booked: a
// booking another call makes meanwhile counts it, though it still sleeps.
func (c *call) admitFallback(ks *keyState, perSecond, burst float64, heard time.Duration, owe int) (again bool, err error) {
	ks.mu.Lock()
	now := time.Now()
	pause := max(ks.pauseNowLocked(now), heard)
	wait := pause
	owed := false
	if perSecond > 0 {
		x := ks.extraLocked()
		wait = x.fallbackBook(now.Add(pause), perSecond, burst).Sub(now)
		if owed = owe > 0 && x.fleetOwed < owe; owed {
			x.fleetOwed++
		}
	}
	ks.mu.Unlock()
	cancel := func() {
		if perSecond > 0 { // give the slot back (exactly, if none was booked after it)
			ks.mu.Lock()
			x := ks.extraLocked()
			x.fallbackTat -= int64(fallbackInterval(perSecond))
			if owed {
				x.fleetOwed = max(x.fleetOwed-1, 0)
			}
			ks.mu.Unlock()
		}
	}
	if err := c.refuseWait(pause, wait, now); err != nil {
		cancel()
		return false, err
	}
	if wait-pause > fallbackHorizon {
		// The local slot is far: the fleet may answer again before it
		// comes, and book the send in its schedule. Rather than hold a
		// slot beside that schedule, the call asks the fleet again in a
		// while.
		cancel()
		nap := max(pause, fallbackHorizon)
		c.waiting(nap, pauseCause(pause, nap))
		if err := sleep(c.ctx, nap); err != nil {
			return false, err
		}
		return true, nil
	}
	if wait <= 0 {
		return false, nil
	}
	c.waiting(wait, pauseCause(pause, wait))
	if err := sleep(c.ctx, wait); err != nil {
		cancel()
		return false, err
	}
	return false, nil
}

// fallbackHorizon is how far ahead a key's fallback books a local send:
// a call whose slot is further asks the fleet again after this long.
const fallbackHorizon = 100 * time.Millisecond

// windowed reports whether the quota the server reports for the call's
// request ends a window at its reset (see serverQuota.windowed).
func (c *call) windowed(ks *keyState) bool {
	q := ks.quotaFor(c.req.URL.Path)
	return q != nil && q.windowed()
}

// fleetRate returns the fleet-wide rate and burst: the ceiling
// (WithRate), or the rate of the quota the server reports for the request
// (its limit over its window, less a margin) if that is less; 0 for none.
// Each process's own controller does not pace the fleet: it hears only its
// share of the server's answers; the fleet's shared controller paces
// instead (fleetapi.Request.Adaptive).
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
	if q := ks.quotaFor(c.req.URL.Path); q != nil {
		if r := q.fleetPace(); r > 0 && (perSecond == 0 || r < perSecond) {
			perSecond, burst = r, 1
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
	_ = f.Pause(c.ctx, c.key, until.Sub(now), fleetapi.Request{PerSecond: perSecond, Burst: burst})
}
