// Package fleetgate keeps what one process knows of a key's fleet (see
// package fleetapi): how many processes share the key, the successes not
// yet told to the fleet's shared controller, the sends owed to the fleet,
// and the pacing the key falls back on while the fleet cannot answer, a
// GCRA of the process's share of the fleet's rate. The engine's fleet
// gate books each attempt in the fleet through it.
package fleetgate

import (
	"slices"
	"sync"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/gate"
)

// Horizon is how far ahead a key's fallback books a local send: an
// attempt whose slot is further asks the fleet again after this long.
const Horizon = 100 * time.Millisecond

// maxAccepted bounds the generations a key's untold successes are kept
// under (see addAccepted).
const maxAccepted = 4

// Key is what one process knows of a key's fleet. Its zero value knows
// nothing. It is safe for concurrent use.
//
// Its fallback pacing, while the fleet cannot answer, is a GCRA of the
// process's share of the fleet's rate and burst (a share of a burst may
// be less than one request), kept as its theoretical arrival time (tat).
// Each send the fleet books moves it on, so that a fallback starts where
// the fleet left off: after the last send the fleet booked for this
// process (some may still be asleep until their slot), with its share of
// the burst spent, not with a burst of its own on top of the fleet's. A
// key the fleet never booked starts with its share of the burst: a share
// under one request waits for the rest of it.
type Key struct {
	mu       sync.Mutex
	members  int                  // the processes that sent to the key lately, as its fleet last said
	accepted []fleetapi.Accepted  // successes not yet told to the fleet's shared controller, by generation
	owed     int                  // sends paced locally while the fleet could not answer, not yet told to it (Request.Owed)
	own      int                  // sends the key's own controller paced in a fleet since ownAt (see OwnSent)
	ownAt    int64                // Unix nanoseconds: when own began counting
	tat      int64                // the fallback GCRA's theoretical arrival time, Unix nanoseconds
	line     gate.Queue[struct{}] // the attempts waiting to book (see Enter)
}

// Members returns how many processes share the key's quota, at least 1:
// size (the fleet's), or the processes its store last said sent to the
// key, if more.
func (k *Key) Members(size int) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return max(size, k.members, 1)
}

// TakeAccepted returns the successes not yet told, which the caller is
// about to tell, and forgets them.
func (k *Key) TakeAccepted() []fleetapi.Accepted {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := k.accepted
	k.accepted = nil
	return a
}

// Untold puts back successes that could not be told: the next booking
// tells them.
func (k *Key) Untold(a []fleetapi.Accepted) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, x := range a {
		k.accepted = addAccepted(k.accepted, x.Gen, x.N)
	}
}

// Accept counts a success of a send booked under generation gen, to be
// told with the key's next booking.
func (k *Key) Accept(gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.accepted = addAccepted(k.accepted, gen, 1)
}

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

// OwnSent counts a send the key's own controller paced at now, in a fleet
// (nothing configured or stated, and no shared controller): if the fleet
// comes to pace the key at a rate (a quota the server stated), the sends
// of the last second are owed to it, so that a window's count at the
// server is not spent twice.
func (k *Key) OwnSent(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.UnixNano()-k.ownAt > int64(time.Second) {
		k.own, k.ownAt = 0, now.UnixNano()
	}
	k.own++
}

// Owing returns what a booking at now, at perSecond with burst (the
// process's share), tells the fleet it is owed: the sends paced locally
// while the fleet could not answer (owed, and the earliest the next of
// them may go, notBefore), and the sends the key's own controller paced
// in the last second (own).
func (k *Key) Owing(now time.Time, perSecond, burst float64) (owed int, notBefore time.Duration, own int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.owed > 0 {
		owed = k.owed
		notBefore = max(k.nextAt(interval(perSecond), burst).Sub(now), 0)
	}
	if now.UnixNano()-k.ownAt <= int64(time.Second) {
		own = k.own
	}
	return owed, notBefore, own
}

// Booked records what the fleet's answer g to a booking made at now says:
// the fleet's size, and, if it booked the send, that the sends owed
// (owed, of which own the key's own controller paced) were counted with it,
// and the slot the fallback continues after, at perSecond with burst (the
// process's share; 0: no rate).
func (k *Key) Booked(now time.Time, g fleetapi.Grant, owed, own int, perSecond, burst float64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if g.Members > 0 {
		k.members = g.Members
	}
	if g.Granted && owed > 0 {
		k.owed = max(k.owed-(owed-own), 0)
		if own > 0 {
			k.own = 0
		}
	}
	if g.Granted && perSecond > 0 {
		// No local send before the slot plus burst intervals.
		ei := interval(perSecond)
		if t := now.Add(g.Wait).Add(time.Duration(burst * float64(ei))).UnixNano(); t > k.tat {
			k.tat = t
		}
	}
}

// A Fallback is a local send the fallback booked (see Fallback.Book).
type Fallback struct {
	k         *Key
	perSecond float64
	owed      bool
}

// Fallback books a local send of the key at at or later, while its fleet
// cannot answer, at perSecond (0: none) with burst, and returns its
// instant. The send is owed to the fleet (see fleetapi.Request.Owed), up
// to owe, from the moment it is booked: a booking another attempt makes
// meanwhile counts it, though it still sleeps. Cancel gives the slot back.
func (k *Key) Fallback(at time.Time, perSecond, burst float64, owe int) (time.Time, Fallback) {
	if perSecond <= 0 {
		return at, Fallback{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	ei := interval(perSecond)
	if k.tat == 0 {
		k.tat = at.UnixNano() // never used: full, with burst
	}
	slot := k.nextAt(ei, burst)
	if slot.Before(at) {
		slot = at
	}
	if tat := time.Unix(0, k.tat); tat.After(slot) {
		k.tat = tat.Add(ei).UnixNano()
	} else {
		k.tat = slot.Add(ei).UnixNano()
	}
	f := Fallback{k: k, perSecond: perSecond}
	if f.owed = owe > 0 && k.owed < owe; f.owed {
		k.owed++
	}
	return slot, f
}

// Cancel gives back a slot Fallback booked (exactly, if none was booked
// after it).
func (f Fallback) Cancel() {
	if f.k == nil {
		return
	}
	f.k.mu.Lock()
	defer f.k.mu.Unlock()
	f.k.tat -= int64(interval(f.perSecond))
	if f.owed {
		f.k.owed = max(f.k.owed-1, 0)
	}
}

// nextAt returns when the key's next local send may go, at the interval
// ei with burst. It requires k.mu held.
func (k *Key) nextAt(ei time.Duration, burst float64) time.Time {
	return time.Unix(0, k.tat).Add(-time.Duration((burst - 1) * float64(ei)))
}

// interval returns the interval of a GCRA at perSecond (> 0).
func interval(perSecond float64) time.Duration {
	return time.Duration(min(float64(time.Second)/perSecond, float64(gate.MaxPause)))
}
