package pace

import (
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
)

// Admit returns when the bucket's pause and tokens let the attempt go. ctl
// is the key's controller (nil for none: WithGlobalRate's bucket, or
// adaptive pacing off), ceiling the WithRate rate no controller exceeds,
// and calls the key's count of calls holding it (see startLocked). It
// refuses at once, through w, a wait that would not end before the
// deadline or a server pause longer than allowed; if the context is done
// while the attempt waits, it returns the context's cause, having taken
// no token. It reports whether the attempt counts among the first
// contact's attempts its server has not answered (see hushedLocked): the
// caller that does not send it, for a later gate refused it, says so
// with Unsent.
func (b *Bucket) Admit(w *gate.Waiter, ctl control.Controller, ceiling rate.Limit, calls *atomic.Int32) (unheard bool, err error) {
	b.mu.Lock()
	if b.limiter == nil && (b.more == nil || b.more.pausedUntil == 0 && b.more.queue.Len() == 0) {
		// A key with no history goes unpaced while its calls go one at a
		// time; a second call that finds the first still out begins the
		// pacing of its first contact.
		if ctl == nil || ceiling != rate.Inf || calls.Load() <= 1 || !b.startLocked(ctl, time.Now()) {
			b.mu.Unlock()
			if ctl != nil && ceiling == rate.Inf && !b.is(admitted) {
				b.mark(admitted, true) // once: a load on every call after (see startLocked)
			}
			return false, nil // nothing to wait for, and no need to read the clock
		}
	}
	now := time.Now()
	pause := b.pauseNowLocked(now)
	if b.goesNowLocked(now, pause) || b.growLocked(ctl, now, ceiling) && b.goesNowLocked(now, pause) {
		unheard = b.sentLocked()
		b.mu.Unlock()
		return unheard, nil
	}
	n := b.aheadLocked(w.Place) + 1
	turn := b.turnWaitLocked(now, n)
	judged := b.serverTurnLocked(now, n, ctl, ceiling)
	b.mu.Unlock()
	if err := w.RefuseWait(pause, judged, now); err != nil {
		return false, err
	}
	w.TellPaced(max(pause, turn), pause, turn)
	return b.waitTurn(w, ctl, ceiling, now.Add(max(pause, turn)))
}

// goesNowLocked reports whether an attempt that finds the key unpaused
// (pause 0) and no queue takes a token at now. It requires b.mu held.
func (b *Bucket) goesNowLocked(now time.Time, pause time.Duration) bool {
	return pause == 0 && b.waitingLocked() == 0 && b.hushedLocked(now) == 0 && (b.limiter == nil || b.limiter.AllowN(now, 1))
}

// waitTurn queues the attempt for a token and returns when it has one,
// and whether the first contact counts it (see Admit).
// The head of the queue sleeps until the key's pause is over and a token
// is there; the others sleep until they become the head. told is when the
// wait was reported to end: a wait that grows past it is reported again,
// for what it adds.
func (b *Bucket) waitTurn(w *gate.Waiter, ctl control.Controller, ceiling rate.Limit, told time.Time) (bool, error) {
	b.mu.Lock()
	x := b.moreLocked()
	t, _ := x.queue.PushBack(struct{}{}, w.Place)
	b.mu.Unlock()
	taken := false
	defer func() {
		if !taken { // an error, or a panic in a listener: give the place up
			b.mu.Lock()
			x.queue.Leave(t)
			b.mu.Unlock()
		}
	}()
	var due int64 // when the head's token was due, Unix nanoseconds
	for {
		var (
			now                 = time.Now()
			pause, turn, judged time.Duration
			sleepFor            = time.Duration(-1) // not the head: until woken
		)
		b.mu.Lock()
		if x.queue.IsHead(t) {
			growing := b.growLocked(ctl, now, ceiling)
			pause = b.pauseNowLocked(now)
			hushed := b.hushedLocked(now)
			if pause == 0 && hushed == 0 && (b.limiter == nil || b.limiter.AllowN(b.takeAt(now, due), 1)) {
				x.queue.Served(t)
				unheard := b.sentLocked()
				b.mu.Unlock()
				taken = true
				return unheard, nil
			}
			turn = max(b.turnWaitLocked(now, 1), hushed)
			judged = b.serverTurnLocked(now, 1, ctl, ceiling)
			sleepFor = max(pause, turn, time.Nanosecond)
			if growing && pause < sleepFor {
				sleepFor = max(pause, min(sleepFor, growingNap))
			}
			due = now.Add(sleepFor).UnixNano()
		} else {
			// Not the head, or no longer: a call of a higher priority, or
			// the floor of a lower one, took the turn it slept for, and
			// the instant it was due is not its own to take.
			due = 0
		}
		b.mu.Unlock()
		if sleepFor >= 0 {
			// The head's wait can have grown since the attempt queued: the
			// server paused the key. It never sleeps past the deadline.
			if err := w.RefuseWait(pause, judged, now); err != nil {
				return false, err
			}
			if end := now.Add(sleepFor); end.Sub(told) > time.Millisecond {
				w.TellPaced(end.Sub(told), pause, turn)
				told = end
			}
		}
		if err := t.Wait(w, sleepFor); err != nil {
			return false, err
		}
	}
}

// takeAt returns the instant at which the head of the queue, awake at
// now, takes its token: the instant it was due, if it has come and the
// rate has not changed since, so that the time a sleeper takes to wake is
// not lost to the rate (x/time/rate's bucket of one token cannot make it
// up); now otherwise. It requires b.mu held.
func (b *Bucket) takeAt(now time.Time, due int64) time.Time {
	if due == 0 || due > now.UnixNano() || due < b.more.changed {
		return now
	}
	return time.Unix(0, due)
}

// growLocked makes the bucket follow its controller's rate at now where
// that rate grows with time alone (Gentle finding the limit), so that
// attempts waiting for a token see it grow though few answers come back.
// It reports whether the rate is growing so. It requires b.mu held.
func (b *Bucket) growLocked(ctl control.Controller, now time.Time, ceiling rate.Limit) bool {
	if ctl == nil || b.limiter == nil {
		return false
	}
	if b.is(starting) {
		return b.startLocked(ctl, now)
	}
	r, ok := ctl.Grown(now)
	if ok {
		b.setRateLocked(now, min(ceiling, rate.Limit(r)), int(b.burst))
	}
	return ok
}

// startLocked paces the key's first contact at now, under a controller
// that opens one (ctl.StartRate) and no WithRate ceiling: the bucket,
// made when a second call finds the first still out, follows the
// controller's start rate; once that is over, the key goes unpaced again,
// and its bucket is dropped. It reports whether the first contact goes
// on. It requires b.mu held.
func (b *Bucket) startLocked(ctl control.Controller, now time.Time) bool {
	r, burst, ok := ctl.StartRate(now)
	switch {
	case ok && b.limiter == nil:
		b.limiter, b.burst = rate.NewLimiter(rate.Limit(r), burst), int32(burst)
		x := b.moreLocked()
		x.heard, x.unheard = now.UnixNano(), 0
		if b.is(admitted) {
			// An attempt already out, unpaced. (Unless none was admitted
			// yet: the call that makes the bucket is the first, and
			// another that holds the key, not yet admitted, made it count
			// more than one.)
			b.limiter.AllowN(now, 1)
			x.unheard = 1
		}
		b.mark(starting, true)
	case ok:
		b.setRateLocked(now, rate.Limit(r), burst)
	case b.is(starting) && b.more != nil && b.more.unheard >= startUnheard:
		// The first contact's time is over while its server is silent:
		// it goes on until the server answers (see hushedLocked).
		return true
	case b.is(starting):
		b.mark(starting, false)
		if r, growing := ctl.Grown(now); growing {
			// The first contact ended in a throttle the controller has
			// read, and its rate holds from now, a single request at a
			// time, though the answer's Follow has not come yet: attempts
			// queued meanwhile must not find the key unpaced (up to four
			// of them went at once into a server with no burst).
			b.setRateLocked(now, rate.Limit(r), 1)
			return true
		}
		b.dropLocked(now)
	}
	return ok
}

// hushedLocked returns how long after now the key's first contact waits
// for its server to answer before it sends another attempt: 0 if it need
// not. A server that slows instead of refusing holds each request past its
// limit longer than the one before, and says nothing until the first of
// them is answered, a second or more later; a first contact, whose rate
// doubles every round trip, sent every caller's next request into that
// silence within a few milliseconds (16 held 1 to 16 s, 7 of them past
// their callers' deadlines). So once the server has said nothing for
// startQuiet times the least round trip heard, no more than startUnheard
// attempts go past its last answer, and startUnheard more each
// startSilence it stays silent, for an endpoint slow of its own. A server
// that answers never stops a first contact so: answers come as fast as it
// sends; nor one whose answers are slow, an LLM's that take seconds to
// generate, while they come within a few of its round trips (the
// fake Anthropic API's JSON answers got 0.87 of its token quota used with
// the silence counted in attempts alone, 1.06 before). It requires b.mu
// held.
func (b *Bucket) hushedLocked(now time.Time) time.Duration {
	if !b.is(starting) || b.more == nil || b.more.least == 0 {
		return 0
	}
	x := b.more
	silent := max(now.UnixNano()-x.heard, 0)
	if silent < startQuiet*x.least || x.unheard < int32(startUnheard*(1+silent/int64(startSilence))) {
		return 0
	}
	return startSilence - time.Duration(silent%int64(startSilence))
}

// sentLocked counts an attempt the bucket admitted during its first
// contact, and reports whether it did. It requires b.mu held.
func (b *Bucket) sentLocked() bool {
	if b.is(starting) && b.more != nil {
		b.more.unheard++
		return true
	}
	return false
}

// Unsent takes back an attempt that Admit counted among the first
// contact's unanswered ones, and that was not sent: a later gate refused
// it (its deadline, a cost larger than the server's limit), or its
// context ended. Left counted, such attempts made a server that had
// answered every attempt it was sent look silent, and held the key's next
// attempts for seconds (see hushedLocked).
func (b *Bucket) Unsent() {
	b.mu.Lock()
	if x := b.more; x != nil && x.unheard > 0 {
		x.unheard--
	}
	b.mu.Unlock()
}

// heardLocked records that the server answered an attempt of the first
// contact at now, after rtt (0 if untimed), and wakes the head of the
// queue if it waited for that (see hushedLocked). It requires b.mu held.
func (b *Bucket) heardLocked(now time.Time, rtt time.Duration) {
	if x := b.more; x != nil {
		if x.unheard >= startUnheard {
			b.wakeHeadLocked()
		}
		x.heard, x.unheard = now.UnixNano(), 0
		if rtt > 0 && (x.least == 0 || int64(rtt) < x.least) {
			x.least = int64(rtt)
		}
	}
}

// Follow makes the bucket follow what the key's controller ctl said at
// now after an outcome (r) of an attempt whose round trip took rtt (0 if
// untimed), capped by the ceiling (the WithRate rate and burst cap). A
// change of rate wakes the head of the queue, so that it waits for the
// new rate, not the old one.
func (b *Bucket) Follow(ctl control.Controller, r control.Rate, now time.Time, rtt time.Duration, ceiling rate.Limit, cap int) {
	if !r.Enabled {
		switch {
		case b.is(starting):
			b.mu.Lock()
			b.heardLocked(now, rtt)
			b.startLocked(ctl, now)
			b.mu.Unlock()
		case r.Forgot:
			// The controller forgot a limit a memory gave: the key starts
			// over, with a first contact, or at the ceiling.
			b.mu.Lock()
			if ceiling == rate.Inf {
				b.limiter, b.burst = nil, 0
				b.startLocked(ctl, now)
			} else {
				b.setRateLocked(now, ceiling, cap)
			}
			b.mu.Unlock()
		}
		return // the bucket keeps the ceiling it was made with
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mark(starting, false)
	b.setRateLocked(now, min(ceiling, rate.Limit(r.PerSecond)), min(r.Burst, cap, math.MaxInt32))
}

// Recall makes the bucket pace at start, the rate a controller recalled
// from a memory starts at, capped by the ceiling, its bucket holding a
// single request (at most cap): as it is made, before any attempt.
func (b *Bucket) Recall(now time.Time, start float64, ceiling rate.Limit, cap int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit, burst := min(ceiling, rate.Limit(start)), min(1, cap)
	if b.limiter == nil {
		b.limiter = rate.NewLimiter(limit, burst)
	} else {
		b.limiter.SetLimitAt(now, limit)
		b.limiter.SetBurstAt(now, burst)
	}
	b.burst = int32(burst)
}

// RecallPause pauses the key until until, as a memory kept it, as the
// bucket is made.
func (b *Bucket) RecallPause(until int64) {
	b.mu.Lock()
	b.moreLocked().pausedUntil = until
	b.mu.Unlock()
}
