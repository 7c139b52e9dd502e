package engine

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/fleetgate"
	"github.com/politehttp/polite/internal/gate"
)

// globalKey is the key of the WithGlobalRate bucket in the fleet.
const globalKey = "\x00global"

// admitFleet is the pacing gate with a fleet: it returns when the fleet
// lets the call send, to its key and, under WithGlobalRate, to any key. A
// shared controller paces when nothing else does: a configured or stated
// rate is the server's, and the fleet keeps to it; with neither and no
// shared controller, the key's own controller paces this process as if it
// were alone.
func (e *Engine) admitFleet(c *Call) error {
	k := c.need(e)
	perSecond, burst := e.fleetRate(c)
	costs, err := e.fleetCosts(c, k)
	if err != nil {
		return err
	}
	f := e.cfg.Fleet
	shared := perSecond == 0 && e.cfg.Kind != control.KindOff && f.SharesController()
	c.shared = shared
	r := fleetapi.Request{PerSecond: perSecond, Burst: burst, Adaptive: shared, Costs: costs, Priority: int8(c.Priority)}
	if w := e.cfg.Window; w.N > 0 {
		r.Window = fleetapi.Window{N: w.N, Per: w.Per + WindowGuard}
	}
	fk := part(k, fleetPart, newOf[fleetgate.Key]())
	var gap time.Duration // the process's share of the fleet's interval: each booking ahead waits about as much
	if perSecond > 0 {
		gap = time.Duration(float64(fk.Members(f.Size())) / perSecond * float64(time.Second))
	}
	line, waited, err := fk.Enter(&c.Waiter, gap)
	if err != nil {
		return err
	}
	c.line = line
	if waited && c.costly() {
		// As the quota stands now, after the bookings ahead of it: one
		// may have stated it.
		if r.Costs, err = e.fleetCosts(c, k); err != nil {
			leaveLine(c, fk, true)
			return err
		}
	}
	if r.Adaptive {
		r.Accepted = fk.TakeAccepted()
	}
	err = e.book(c, c.Who.Key, k, r)
	leaveLine(c, fk, err != nil)
	if err != nil {
		return err
	}
	if perSecond == 0 && (!shared || c.alone) {
		// No rate the fleet keeps to: the key's own controller paces this
		// process, as if it were alone; so does it while the fleet cannot
		// answer, with its shared controller's rate out of reach (a
		// breaker opened at a fleet's start, under 10,000 callers, sent
		// every call unpaced: 80% refused by tollbooth).
		if err := e.pace(c, k); err != nil {
			return err
		}
		fk.OwnSent(time.Now())
	}
	if g := e.global; g != nil {
		return e.book(c, globalKey, g, fleetapi.Request{PerSecond: e.cfg.GlobalRate, Burst: e.cfg.GlobalBurst, Priority: int8(c.Priority)})
	}
	return nil
}

// book returns when the fleet lets the call send to key, which the local
// state k stands for: at once, after the wait the fleet booked, or, when
// the fleet cannot answer, after k's own fallback pacing. A send that
// waited for its slot checks, before it goes, that no pause began
// meanwhile (one this process saw, or that the fleet published); if one
// did, it waits for it and books again. A call that books again gives
// back the costs it booked, and books them as the quota now stands.
func (e *Engine) book(c *Call, key string, k *Key, r fleetapi.Request) error {
	for {
		again, err := e.bookOnce(c, key, k, r)
		if !again || err != nil {
			return err
		}
		r.Accepted = nil // told with the first booking
		if key != globalKey && c.costly() {
			if c.booked {
				// Taken at a slot the send did not go at: the fleet's
				// buckets would count them twice.
				back := make([]fleetapi.Adjust, len(r.Costs))
				for i, fc := range r.Costs {
					back[i] = fleetapi.Adjust{Unit: fc.Unit, Limit: fc.Limit, Per: fc.Per, GiveBack: fc.Amount}
				}
				e.cfg.Fleet.Adjust(key, back)
			}
			// The quota may be known now: a call that began before any
			// answer stated it booked no cost, and would go unseen by the
			// fleet's buckets however long it waited.
			if r.Costs, err = e.fleetCosts(c, k); err != nil {
				return err
			}
		}
	}
}

// bookOnce makes one booking for book and waits for it; again reports
// that a pause began meanwhile and the call must book again.
func (e *Engine) bookOnce(c *Call, key string, k *Key, r fleetapi.Request) (again bool, err error) {
	f, w := e.cfg.Fleet, &c.Waiter
	fk := part(k, fleetPart, newOf[fleetgate.Key]())
	perSecond, burst := r.PerSecond, r.Burst
	r.MaxWait = -1
	now := time.Now()
	if deadline, ok := c.Ctx.Deadline(); ok {
		r.MaxWait = max(deadline.Sub(now), 0)
	}
	own := 0 // of r.Owed, the sends the key's own controller paced
	if r.Window.N == 0 && perSecond > 0 && key != globalKey {
		members := float64(fk.Members(f.Size()))
		r.Owed, r.NotBefore, own = fk.Owing(now, perSecond/members, float64(burst)/members)
		if own > 1 && !e.windowed(c, k) {
			// A bucket forgets what came before it last filled: the sends
			// it refused or refilled since are not owed.
			own = max(burst, 1)
		}
		r.Owed += own
	}
	g, err := f.Reserve(c.Ctx, key, r)
	if err != nil {
		if len(r.Accepted) > 0 { // not told: the next booking tells them
			fk.Untold(r.Accepted)
		}
		if c.Ctx.Err() != nil {
			return false, context.Cause(c.Ctx)
		}
		c.alone = c.alone || key != globalKey
		members := float64(fk.Members(f.Size()))
		var heard time.Duration
		owe := 0
		if key != globalKey {
			heard = f.Paused(key) // published by another process before the store went
			owe = max(burst, 1)
			if perSecond == 0 && r.Adaptive {
				// The shared controller out of reach, the key's own paces
				// the process (admitFleet) at the rate it found or recalled:
				// the fleet's whole, after a memory. Alone, the process
				// takes its share of it, as of a rate the fleet keeps to: a
				// breaker open a tenth of a second at a remembering fleet's
				// start let each of 3 processes' 3,333 queued calls go at
				// the whole rate, and HAProxy refused 5-10% of the run.
				perSecond, burst = k.pace.Rate(), int(members) // a burst of one send a process
			}
		}
		return e.fallback(c, k, fk, perSecond/members, float64(burst)/members, heard, owe)
	}
	if g.Members > 0 || g.Granted && (r.Owed > 0 || perSecond > 0) {
		members := float64(max(fk.Members(f.Size()), g.Members))
		fk.Booked(now, g, r.Owed, own, perSecond/members, float64(burst)/members)
	}
	if key != globalKey {
		c.alone = false // booked by the fleet, after all
		c.gen = g.Gen
		c.booked = c.Costed && g.Granted && len(r.Costs) > 0
	}
	if g.Later {
		w.Tell(g.Wait, gate.Rate, false)
		if err := w.Sleep(g.Wait); err != nil {
			return false, err
		}
		return true, nil
	}
	server := g.Paused > 0 && g.Paused >= g.Wait
	if g.Paused > w.MaxServerWait {
		return false, w.Refuse(g.Paused, now, true)
	}
	if !g.Granted {
		if err := w.Refuse(g.Wait, now, server); err != nil {
			return false, err
		}
		return false, w.L.Refused(w.Who, g.Wait, max(r.MaxWait, 0), server)
	}
	if g.Wait <= 0 {
		return false, nil
	}
	w.TellPaced(g.Wait, g.Paused, g.Wait)
	if key != globalKey && g.Wait <= lineAhead {
		// Its slot is near: the next in line may book, so that at high
		// rates (a lease's sends half a millisecond apart) a process
		// keeps more than one send booked, as its rate needs.
		leaveLine(c, fk, false)
	}
	if err := w.Sleep(g.Wait); err != nil {
		return false, err
	}
	if err := overtaken(f, w, key, r.Priority, g); err != nil {
		return false, err
	}
	if r.Adaptive && key != globalKey {
		if fc, ok := f.(fleetapi.Congestion); ok && fc.Congested(key, g.Gen) {
			return true, nil // the shared controller cut its rate meanwhile: book again at it
		}
	}
	now = time.Now()
	paused := k.pace.PauseNow(now)
	if key != globalKey {
		paused = max(paused, f.Paused(key))
	}
	if paused <= 0 {
		return false, nil
	}
	if err := w.For(paused, now, gate.Pause, true, func() {}); err != nil {
		return false, err
	}
	return true, nil
}

// lineAhead is how near a call's booked slot lets the next call of its
// process book: one booking of a key held ahead at 100 a second, ten at
// 2,000 (one at a time held a fleet at 2,000 a second to 1,897 with a
// process killed, under -race).
const lineAhead = 5 * time.Millisecond

// leaveLine takes the call out of its key's fleet line, if it holds its
// place there; failed says it did not book (see fleetgate.Key.Done).
func leaveLine(c *Call, fk *fleetgate.Key, failed bool) {
	if c.line != nil {
		fk.Done(c.line, failed)
		c.line = nil
	}
}

// overtaken waits, once the call's send granted g is at its slot, for the
// sends of higher priorities that took places ahead of it in the fleet's
// schedule since it was booked, if f lets them (fleetapi.Overtaking): an
// interval for each, and for each one that took a place ahead of it
// meanwhile.
func overtaken(f fleetapi.Fleet, w *gate.Waiter, key string, p int8, g fleetapi.Grant) error {
	o, ok := f.(fleetapi.Overtaking)
	if !ok {
		return nil
	}
	var waited time.Duration
	for {
		late := o.Overtaken(key, p, g)
		if late <= waited {
			return nil
		}
		w.Tell(late-waited, gate.Rate, false)
		if err := w.Sleep(late - waited); err != nil {
			return err
		}
		waited = late
	}
}

// fallback paces the call on the key's own, while the fleet cannot
// answer: it waits for any pause this process saw or heard of from the
// fleet (heard), and for a slot of the key's fallback GCRA of perSecond
// (0: none) and burst, owed to the fleet up to owe (see
// fleetgate.Key.Fallback).
func (e *Engine) fallback(c *Call, k *Key, fk *fleetgate.Key, perSecond, burst float64, heard time.Duration, owe int) (again bool, err error) {
	w := &c.Waiter
	now := time.Now()
	pause := max(k.pace.PauseNow(now), heard)
	slot, booked := fk.Fallback(now.Add(pause), perSecond, burst, owe)
	wait := slot.Sub(now)
	if err := w.RefuseWait(pause, wait, now); err != nil {
		booked.Cancel()
		return false, err
	}
	if wait-pause > fleetgate.Horizon {
		// The local slot is far: the fleet may answer again before it
		// comes, and book the send in its schedule. Rather than hold a
		// slot beside that schedule, the call asks the fleet again in a
		// while.
		booked.Cancel()
		nap := max(pause, fleetgate.Horizon)
		w.TellPaced(nap, pause, nap)
		if err := w.Sleep(nap); err != nil {
			return false, err
		}
		return true, nil
	}
	if wait <= 0 {
		return false, nil
	}
	w.TellPaced(wait, pause, wait)
	if err := w.Sleep(wait); err != nil {
		booked.Cancel()
		return false, err
	}
	return false, nil
}

// fleetRate returns the fleet-wide rate and burst of the call's key: the
// ceiling (WithRate), or the rate of the quota the server reports for the
// call's route (its limit over its window, less a margin) if that is
// less; 0 for none. Each process's own controller does not pace the
// fleet: it hears only its share of the server's answers; the fleet's
// shared controller paces instead (fleetapi.Request.Adaptive).
func (e *Engine) fleetRate(c *Call) (float64, int) {
	ceiling, burst := e.Ceiling()
	perSecond := float64(ceiling)
	if ceiling == rate.Inf { // a finite number, not +Inf: no rate
		perSecond, burst = 0, 0
	}
	k := c.k
	if k == nil {
		return perSecond, burst
	}
	if q := k.quotaFor(c.Route); q != nil {
		if r := q.FleetPace(); r > 0 && (perSecond == 0 || r < perSecond) {
			perSecond, burst = r, 1
		}
	}
	return perSecond, burst
}

// fleetCosts returns what the fleet books of the call's cost with its
// send, after checking that it is not too large; nil if nothing.
func (e *Engine) fleetCosts(c *Call, k *Key) ([]fleetapi.Cost, error) {
	if !c.costly() {
		return nil, nil
	}
	c.booked = false
	return e.costs(k, time.Now()).Booked(&c.Waiter, c.Cost)
}

// windowed reports whether the quota the server reports for the call's
// route ends a window at its reset (see quota.Quota.Windowed).
func (e *Engine) windowed(c *Call, k *Key) bool {
	q := k.quotaFor(c.Route)
	return q != nil && q.Windowed()
}

// share returns the part of a server's quota this process spends: 1
// alone; in a fleet, 1 over the processes that sent to the key lately (or
// the fleet's size).
func (e *Engine) share(k *Key) float64 {
	if e.cfg.Fleet == nil {
		return 1
	}
	return 1 / float64(e.members(k))
}

// members returns how many processes share k's quota, at least 1.
func (e *Engine) members(k *Key) int {
	if fk := peek(k, fleetPart); fk != nil {
		return fk.Members(e.cfg.Fleet.Size())
	}
	return max(e.cfg.Fleet.Size(), 1)
}
