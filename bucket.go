package polite

import (
	"container/list"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/control"
)

// maxPause bounds how long a server pause is kept, so that a hostile or
// broken Retry-After cannot block a key for longer.
const maxPause = time.Hour

// keyState is the pacing state of one key: its token bucket, the
// controller that sets the bucket's rate, the calls waiting for a token,
// and what its server said (a pause, quotas).
//
// Calls that find no token wait in a FIFO queue and take their token only
// when it is their turn and the token is there. Unlike waiting on an
// x/time/rate Reservation, which books a future instant, a call that gives
// up leaves nothing behind: the calls queued after it move up at once; and
// when the rate changes, the head of the queue sees it at once.
//
// A crawler holds one keyState per host, so it is kept small: one
// allocation (the default controller lives inside it), with the parts few
// keys need made only when needed.
type keyState struct {
	flags atomic.Uint32 // keyQuoted, keyStarting, keyAdmitted
	calls atomic.Int32  // calls holding the state (registry.lookup): while one does, the key is not forgotten

	// mu guards burst and the fields below it, and orders token taking
	// with the queue. (burst sits next to quoted to keep the struct in a
	// smaller size class.)
	burst   int32 // the limiter's burst, as last set
	mu      sync.Mutex
	limiter *rate.Limiter // the token arithmetic; nil until a rate applies
	limit   rate.Limit    // the limiter's rate, as last set; Inf without a limiter
	extra   *keyExtra     // what few keys need; nil until needed
	ctl     control.Cell  // the key's controller, if Gentle
}

// The flags of a keyState.
const (
	keyQuoted   = 1 << iota // the server has reported a quota: extra.quota or extra.routes is set
	keyStarting             // the bucket paces the key's first contact (control.Controller.StartRate)
	keyAdmitted             // a call of the key was admitted unpaced, with no bucket (see call.admitOn, startLocked)
)

// is reports whether flag f of ks is set.
func (ks *keyState) is(f uint32) bool { return ks.flags.Load()&f != 0 }

// mark sets or clears flag f of ks.
func (ks *keyState) mark(f uint32, set bool) {
	for {
		old := ks.flags.Load()
		next := old &^ f
		if set {
			next |= f
		}
		if old == next || ks.flags.CompareAndSwap(old, next) {
			return
		}
	}
}

// keyExtra is the part of a key's state that few keys need, or that a key
// needs only once its server has throttled it or calls have queued.
type keyExtra struct {
	pausedUntil   int64                   // Unix nanoseconds before which the server asked for no request; 0 if none
	queue         *list.List              // of *waiter, in arrival order; nil until a call waits
	ctl           control.Controller      // the controller, if not Gentle (see control.Kind.Init)
	quota         *serverQuota            // the quota the server reports, for paths in no named bucket
	routes        map[string]*serverQuota // path → the quota of the bucket the server named for it
	changed       int64                   // Unix nanoseconds of the last change of the limiter's rate or burst
	inflight      int                     // requests holding a slot, under WithMaxInFlight
	slotQueue     *list.List              // of *slotWaiter, calls waiting for a slot
	window        *windowLog              // the sends booked under WithWindow, without a fleet
	fallbackTat   int64                   // the GCRA of the key's pacing while its fleet cannot answer, Unix nanoseconds (see fleetBooked)
	members       int                     // the processes that sent to the key lately, as its fleet last said
	fleetAccepted []fleetapi.Accepted     // successes not yet told to the fleet's shared controller, by generation
	fleetOwed     int                     // sends paced locally while the fleet could not answer, not yet told to it (fleetapi.Request.Owed)
	fleetOwn      int                     // sends the key's own controller paced in a fleet since fleetOwnAt (see ownSent)
	fleetOwnAt    int64                   // Unix nanoseconds: when fleetOwn began counting
	costs         *costState              // the quotas the key's server keeps in tokens or points, under WithCost
	told          *memo                   // what the key last told its Memory, or was recalled from it, under WithMemory; nil until then
}

// hold marks ks as held by a call, which will release it when it ends.
func (ks *keyState) hold() { ks.calls.Add(1) }

// release ends a call's hold on ks.
func (ks *keyState) release() { ks.calls.Add(-1) }

// busy reports whether forgetting ks at now, the present, would lose
// something, though its key has been idle: calls hold it (they found it
// and have not ended), hold slots or wait in its queues, sends it booked
// under WithWindow still count, or its bucket has not refilled (a rate
// slower than the idle timeout). A state locked at that moment is in use:
// busy.
func (ks *keyState) busy(now int64) bool {
	if ks.calls.Load() > 0 {
		return true
	}
	if !ks.mu.TryLock() {
		return true
	}
	defer ks.mu.Unlock()
	if x := ks.extra; x != nil {
		if x.inflight > 0 || x.pausedUntil > now || x.queue != nil && x.queue.Len() > 0 || x.slotQueue != nil && x.slotQueue.Len() > 0 ||
			x.window != nil && x.window.matters(now) || x.costs != nil && x.costs.busy(now) {
			return true
		}
	}
	return ks.limiter != nil && ks.limiter.TokensAt(time.Unix(0, now)) < float64(ks.burst)
}

// controller returns the key's controller under mode; nil when adaptive
// pacing is off. It must not be called with ks.mu held; see
// controllerLocked.
func (ks *keyState) controller(mode AdaptiveMode) control.Controller {
	if c := mode.kind().Of(&ks.ctl, nil); c != nil {
		return c // kept inline: no lock
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.controllerLocked(mode)
}

// controllerLocked is controller, with ks.mu held.
func (ks *keyState) controllerLocked(mode AdaptiveMode) control.Controller {
	var other control.Controller
	if ks.extra != nil {
		other = ks.extra.ctl
	}
	return mode.kind().Of(&ks.ctl, other)
}

// growLocked makes the key's bucket follow its controller's rate at now
// where that rate grows with time alone (Gentle finding the limit), so that
// calls waiting for a token see it grow though few answers come back. It
// reports whether the rate is growing so. It requires ks.mu held.
func (ks *keyState) growLocked(mode AdaptiveMode, now time.Time, ceiling rate.Limit) bool {
	ctl := ks.controllerLocked(mode)
	if ctl == nil || ks.limiter == nil {
		return false
	}
	if ks.is(keyStarting) {
		return ks.startLocked(ctl, now)
	}
	r, ok := ctl.Grown(now)
	if ok {
		ks.setRateLocked(now, min(ceiling, rate.Limit(r)), int(ks.burst))
	}
	return ok
}

// extraLocked returns ks.extra, making it if needed. It requires ks.mu
// held.
func (ks *keyState) extraLocked() *keyExtra {
	if ks.extra == nil {
		ks.extra = new(keyExtra)
	}
	return ks.extra
}

// maxRoutes bounds how many paths a key remembers the named bucket of.
const maxRoutes = 256

// quotaFor returns the quota that a request to path counts against, or nil
// if the server has reported none (then without taking the key's lock).
func (ks *keyState) quotaFor(path string) *serverQuota {
	if !ks.is(keyQuoted) {
		return nil
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.extra == nil {
		return nil
	}
	if q := ks.extra.routes[path]; q != nil {
		return q
	}
	return ks.extra.quota
}

// ownQuota returns the key's own quota, making it if needed.
func (ks *keyState) ownQuota() *serverQuota {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	x := ks.extraLocked()
	if x.quota == nil {
		x.quota = &serverQuota{}
		ks.mark(keyQuoted, true)
	}
	return x.quota
}

// route records that requests to path count against the bucket quota q.
func (ks *keyState) route(path string, q *serverQuota) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	x := ks.extraLocked()
	if x.routes[path] == q {
		return
	}
	if x.routes == nil {
		x.routes = make(map[string]*serverQuota)
		ks.mark(keyQuoted, true)
	}
	if len(x.routes) < maxRoutes || x.routes[path] != nil {
		x.routes[path] = q
	}
}

// waiter is a call queued for a token. Its wake channel is signalled when it
// becomes the head of the queue.
type waiter struct {
	wake chan struct{}
}

// pauseLeftLocked returns how long the key stays paused after now; 0 if
// it is not. It requires ks.mu held.
func (ks *keyState) pauseLeftLocked(now time.Time) time.Duration {
	if ks.extra == nil || ks.extra.pausedUntil == 0 {
		return 0
	}
	return time.Duration(max(ks.extra.pausedUntil-now.UnixNano(), 0))
}

// pauseNowLocked returns how long the key stays paused after now, the
// present, and forgets a pause that is over, so that later calls need not
// read the clock for it. It requires ks.mu held.
func (ks *keyState) pauseNowLocked(now time.Time) time.Duration {
	left := ks.pauseLeftLocked(now)
	if left == 0 && ks.extra != nil {
		ks.extra.pausedUntil = 0
	}
	return left
}

// pause extends the key's pause to until; a shorter pause never cuts a
// longer one.
func (ks *keyState) pause(until time.Time) {
	ks.mu.Lock()
	if x := ks.extraLocked(); until.UnixNano() > x.pausedUntil {
		x.pausedUntil = until.UnixNano()
	}
	ks.mu.Unlock()
}

// waitingLocked returns the number of calls queued for a token. It
// requires ks.mu held.
func (ks *keyState) waitingLocked() int {
	if ks.extra == nil || ks.extra.queue == nil {
		return 0
	}
	return ks.extra.queue.Len()
}

// turnWaitLocked returns how long after at the n-th call in line would get
// its token, if no call gave up meanwhile. It requires ks.mu held.
func (ks *keyState) turnWaitLocked(at time.Time, n int) time.Duration {
	if ks.limiter == nil || ks.limit == rate.Inf {
		return 0
	}
	missing := float64(n) - ks.limiter.TokensAt(at)
	if missing <= 0 {
		return 0
	}
	secs := math.Ceil(missing / float64(ks.limit) * 1e9)
	if secs >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(secs)
}

// serverTurnLocked returns how long after at the n-th call in line would
// get its token if the key's bucket paced at the rate its server allows,
// as polite knows it (see judgedRateLocked): the wait by which a call may
// be refused. It requires ks.mu held.
func (ks *keyState) serverTurnLocked(at time.Time, n int, ctl control.Controller, ceiling rate.Limit) time.Duration {
	if ks.limiter == nil || ks.limit == rate.Inf {
		return 0
	}
	judged := ks.judgedRateLocked(ctl, ceiling)
	if judged == ks.limit {
		return ks.turnWaitLocked(at, n)
	}
	if judged == rate.Inf {
		return 0
	}
	missing := float64(n) - ks.limiter.TokensAt(at)
	if missing <= 0 {
		return 0
	}
	return time.Duration(min(math.Ceil(missing/float64(judged)*1e9), math.MaxInt64))
}

// judgedRateLocked returns the rate at which the wait of the key's queue is
// judged: the rate of its bucket where the Transport was told it (WithRate,
// WithGlobalRate) and no controller sets it; otherwise the server's limit
// as the controller knows it (stated, or measured by throttles), never
// above the WithRate ceiling nor below the bucket's own rate, and
// unbounded while it is unknown. A controller may pace below the server's
// limit for a while (finding it from a floor, halving while refused): that
// is polite's own caution, and no call is refused for it. It requires
// ks.mu held.
func (ks *keyState) judgedRateLocked(ctl control.Controller, ceiling rate.Limit) rate.Limit {
	if ctl == nil || ks.limit >= ceiling {
		return ks.limit
	}
	server := rate.Inf
	if l := ctl.ServerLimit(); l > 0 {
		server = rate.Limit(l)
	}
	return max(ks.limit, min(ceiling, server))
}

// nextTurnWait returns how long a call arriving at instant at would wait for
// its pause and its token, at the rate it would be judged by (see
// judgedRateLocked). It is an estimate for deciding whether a retry fits
// before a deadline.
func (ks *keyState) nextTurnWait(at time.Time, ctl control.Controller, ceiling rate.Limit) (pause, turn time.Duration) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.pauseLeftLocked(at), ks.serverTurnLocked(at, ks.waitingLocked()+1, ctl, ceiling)
}

// leave removes a waiter from the queue, and wakes the next head if it was
// the head.
func (ks *keyState) leave(e *list.Element) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.removeLocked(e)
}

// removeLocked removes e from the queue and wakes the new head if e was the
// head. It requires ks.mu held.
func (ks *keyState) removeLocked(e *list.Element) {
	wasHead := ks.extra.queue.Front() == e
	ks.extra.queue.Remove(e)
	if wasHead {
		ks.wakeHeadLocked()
	}
}

// wakeHeadLocked signals the head of the queue, if any, to look at the
// bucket again. It requires ks.mu held.
func (ks *keyState) wakeHeadLocked() {
	if ks.extra == nil || ks.extra.queue == nil {
		return
	}
	if head := ks.extra.queue.Front(); head != nil {
		select {
		case head.Value.(*waiter).wake <- struct{}{}:
		default: // already signalled
		}
	}
}

// observe feeds the outcome o of an attempt that ended at now (and the
// limit the server states, if any, what Gentle.sending said when the
// attempt was sent, and its round trip, 0 if unknown) to the key's
// controller, and makes the key's bucket follow the controller's rate,
// capped by the ceiling (the WithRate rate and burst). A change of rate
// wakes the head of the queue, so that it waits for the new rate, not the
// old one.
func (ks *keyState) observe(mode AdaptiveMode, now time.Time, o control.Outcome, stated float64, sent control.Mark, rtt time.Duration, ceiling rate.Limit, cap int) {
	ctl := ks.controller(mode)
	if ctl == nil {
		return
	}
	r := ctl.Observe(now, o, stated, sent, rtt)
	if !r.Enabled {
		switch {
		case ks.is(keyStarting):
			ks.mu.Lock()
			ks.startLocked(ctl, now)
			ks.mu.Unlock()
		case r.Forgot:
			// The controller forgot a limit a Memory gave (see
			// control.Gentle.Recall): the key starts over, with a first
			// contact, or at the ceiling.
			ks.mu.Lock()
			if ceiling == rate.Inf {
				ks.limiter, ks.limit, ks.burst = nil, rate.Inf, 0
				ks.startLocked(ctl, now)
			} else {
				ks.setRateLocked(now, ceiling, cap)
			}
			ks.mu.Unlock()
		}
		return // the bucket keeps the ceiling it was made with
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.mark(keyStarting, false)
	ks.setRateLocked(now, min(ceiling, rate.Limit(r.PerSecond)), min(r.Burst, cap, math.MaxInt32))
}

// startLocked paces the key's first contact at now, under a controller
// that opens one (ctl.StartRate) and no WithRate ceiling: the bucket,
// made when a second call finds the first still out, follows the
// controller's start rate; once that is over, the key goes unpaced again,
// and its bucket is dropped. It reports whether the first contact goes
// on. It requires ks.mu held.
func (ks *keyState) startLocked(ctl control.Controller, now time.Time) bool {
	r, burst, ok := ctl.StartRate(now)
	switch {
	case ok && ks.limiter == nil:
		ks.limit, ks.burst = rate.Limit(r), int32(burst)
		ks.limiter = rate.NewLimiter(ks.limit, burst)
		if ks.is(keyAdmitted) {
			// A call already out, unpaced. (Unless none was admitted yet:
			// the call that makes the bucket is the first, and another
			// that holds the state, not yet admitted, made it count more
			// than one.)
			ks.limiter.AllowN(now, 1)
		}
		ks.mark(keyStarting, true)
	case ok:
		ks.setRateLocked(now, rate.Limit(r), burst)
	case ks.is(keyStarting):
		ks.mark(keyStarting, false)
		ks.limiter, ks.limit, ks.burst = nil, rate.Inf, 0
		if ks.extra != nil {
			ks.extra.changed = now.UnixNano()
		}
		ks.wakeHeadLocked()
	}
	return ok
}

// setRateLocked makes the key's bucket pace at limit with burst from now
// on, if it does not already, and wakes the head of the queue to see the
// new rate. It requires ks.mu held.
func (ks *keyState) setRateLocked(now time.Time, limit rate.Limit, burst int) {
	if limit == ks.limit && int32(burst) == ks.burst {
		return
	}
	ks.limit, ks.burst = limit, int32(burst)
	if ks.limiter == nil {
		ks.limiter = rate.NewLimiter(limit, burst)
	} else {
		ks.limiter.SetLimitAt(now, limit)
		ks.limiter.SetBurstAt(now, burst)
	}
	if ks.extra != nil {
		ks.extra.changed = now.UnixNano()
	}
	ks.wakeHeadLocked()
}

// admitOn returns when the pause and bucket of ks (a key's, whose
// controller mode sets, or the Transport's global one, under AdaptiveOff)
// let the call go.
func (c *call) admitOn(ks *keyState, mode AdaptiveMode) error {
	ceiling, _ := c.t.keys.ceiling()
	ks.mu.Lock()
	if ks.limiter == nil && (ks.extra == nil || ks.extra.pausedUntil == 0 && ks.waitingLocked() == 0) {
		// A key with no history goes unpaced while its calls go one at a
		// time; a second call that finds the first still out begins the
		// pacing of its first contact.
		ctl := ks.controllerLocked(mode)
		if ctl == nil || ceiling != rate.Inf || ks.calls.Load() <= 1 || !ks.startLocked(ctl, time.Now()) {
			ks.mu.Unlock()
			if ctl != nil && ceiling == rate.Inf && !ks.is(keyAdmitted) {
				ks.mark(keyAdmitted, true) // once: a load on every call after (see startLocked)
			}
			return nil // nothing to wait for, and no need to read the clock
		}
	}
	now := time.Now()
	pause := ks.pauseNowLocked(now)
	if pause == 0 && ks.waitingLocked() == 0 && (ks.limiter == nil || ks.limiter.AllowN(now, 1)) {
		ks.mu.Unlock()
		return nil
	}
	if ks.growLocked(mode, now, ceiling) && pause == 0 && ks.waitingLocked() == 0 && ks.limiter.AllowN(now, 1) {
		ks.mu.Unlock()
		return nil
	}
	n := ks.waitingLocked() + 1
	turn := ks.turnWaitLocked(now, n)
	judged := ks.serverTurnLocked(now, n, ks.controllerLocked(mode), ceiling)
	ks.mu.Unlock()
	if err := c.refuseWait(pause, judged, now); err != nil {
		return err
	}
	c.waiting(max(pause, turn), pauseCause(pause, turn))
	return c.waitTurn(ks, mode, now.Add(max(pause, turn)))
}

// growingNap bounds how long the head of a key's queue sleeps while its
// rate grows with time (see growLocked), so that it sees the growth.
const growingNap = 20 * time.Millisecond

// admitQuota returns when the server's quota for the request lets it go:
// evenly paced while quota is left, after its reset once it is spent.
func (c *call) admitQuota() error {
	ks := c.state()
	if ks == nil {
		return nil
	}
	q := ks.quotaFor(c.req.URL.Path)
	if q == nil {
		return nil
	}
	for {
		now := time.Now()
		wait, spent, took := q.reserve(now, c.share(ks), c.t.cfg.fleet != nil)
		if spent {
			if err := c.waitFor(wait, now, WaitQuota, true, func() {}); err != nil {
				return err
			}
			continue // renewed: take a place now
		}
		if wait > 0 {
			if err := c.waitFor(wait, now, WaitQuota, false, func() { q.release(took) }); err != nil {
				return err
			}
		}
		c.quota = q
		return nil
	}
}

// waitFor waits wait, from now, for a place the call has taken (giveBack
// returns it): it refuses at once a wait that cannot end in time, and gives
// the place back if it refuses or the caller gives up. cause is what the
// call waits for; server reports a wait the server asked for.
func (c *call) waitFor(wait time.Duration, now time.Time, cause WaitCause, server bool, giveBack func()) error {
	waited := false
	defer func() {
		if !waited { // refused, given up, or a panic in a hook
			giveBack()
		}
	}()
	if err := c.refuse(wait, now, server); err != nil {
		return err
	}
	c.waitingFor(wait, cause, server)
	if err := sleep(c.ctx, wait); err != nil {
		return err
	}
	waited = true
	return nil
}

// waitTurn queues the call for a token of ks and returns when it has one.
// The head of the queue sleeps until the key's pause is over and a token
// is there; the others sleep until they become the head. told is when the
// wait was reported to end: a wait that grows past it is reported again,
// for what it adds. mode is as for admitOn.
func (c *call) waitTurn(ks *keyState, mode AdaptiveMode, told time.Time) error {
	w := &waiter{wake: make(chan struct{}, 1)}
	ks.mu.Lock()
	x := ks.extraLocked()
	if x.queue == nil {
		x.queue = list.New()
	}
	e := x.queue.PushBack(w)
	ks.mu.Unlock()
	taken := false
	defer func() {
		if !taken { // an error, or a panic in a hook: give the place up
			ks.leave(e)
		}
	}()
	ceiling, _ := c.t.keys.ceiling()
	var due int64 // when the head's token was due, Unix nanoseconds
	for {
		var (
			now                 = time.Now()
			pause, turn, judged time.Duration
			sleepFor            = time.Duration(-1) // not the head: until woken
		)
		ks.mu.Lock()
		if x.queue.Front() == e {
			growing := ks.growLocked(mode, now, ceiling)
			pause = ks.pauseNowLocked(now)
			if pause == 0 && (ks.limiter == nil || ks.limiter.AllowN(ks.takeAt(now, due), 1)) {
				ks.removeLocked(e)
				ks.mu.Unlock()
				taken = true
				return nil
			}
			turn = ks.turnWaitLocked(now, 1)
			judged = ks.serverTurnLocked(now, 1, ks.controllerLocked(mode), ceiling)
			sleepFor = max(pause, turn, time.Nanosecond)
			if growing && pause < sleepFor {
				sleepFor = max(pause, min(sleepFor, growingNap))
			}
			due = now.Add(sleepFor).UnixNano()
		}
		ks.mu.Unlock()
		if sleepFor >= 0 {
			// The head's wait can have grown since the call queued: the
			// server paused the key. It never sleeps past the deadline.
			if err := c.refuseWait(pause, judged, now); err != nil {
				return err
			}
			if end := now.Add(sleepFor); end.Sub(told) > time.Millisecond {
				c.waiting(end.Sub(told), pauseCause(pause, turn))
				told = end
			}
		}
		if err := sleepOrWake(c.ctx, sleepFor, w.wake); err != nil {
			return err
		}
	}
}

// takeAt returns the instant at which the head of the queue, awake at
// now, takes its token: the instant it was due, if it has come and the rate
// has not changed since, so that the time a sleeper takes to wake is not
// lost to the rate (x/time/rate's bucket of one token cannot make it up);
// now otherwise. It requires ks.mu held.
func (ks *keyState) takeAt(now time.Time, due int64) time.Time {
	if due == 0 || due > now.UnixNano() || due < ks.extra.changed {
		return now
	}
	return time.Unix(0, due)
}

// refuseWait applies refuse to a wait made of a server pause and a turn for
// a token, which run at the same time.
func (c *call) refuseWait(pause, turn time.Duration, now time.Time) error {
	if pause > c.t.cfg.maxRetryAfter {
		return c.refuse(pause, now, true)
	}
	return c.refuse(max(pause, turn), now, pause >= turn && pause > 0)
}

// sleep waits for d or until ctx is done, whichever comes first, and then
// returns nil or the context's cause.
func sleep(ctx context.Context, d time.Duration) error {
	return sleepOrWake(ctx, max(d, 0), nil)
}

// sleepOrWake waits for d (forever if d < 0), for a signal on wake, or until
// ctx is done, and then returns nil or the context's cause.
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
