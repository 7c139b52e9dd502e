package fleet

import (
	"context"
	"math"
	"time"

	"github.com/politehttp/polite/fleetapi"
)

// Leases: above leaseMinRate a process books several sends in one script
// call and spends them itself, one GCRA interval apart, so that the fleet
// keeps to the GCRA at a fraction of the round trips.
const (
	// DefaultLease is how much of the fleet's rate a lease holds: a
	// process books the fleet's rate times DefaultLease, divided by the
	// processes that share the key, in one call (at 2,000 a second and 4
	// processes, 25 sends: one call per 25 requests), and at least
	// minLeaseSends if the whole lease holds that many.
	DefaultLease = 50 * time.Millisecond
	// minLeaseSends is the fewest sends a lease books when the fleet's
	// rate over the lease's length allows it: many processes sharing a
	// key would otherwise lease a few sends each, and call Redis for
	// every few requests (at 2,000 a second and 16 processes, 6).
	minLeaseSends = 16
	// leaseMinRate is the rate from which a lease books more than one send
	// by default: below it, a call per request costs Redis little.
	leaseMinRate = 200.0
	// lateSlack is how late a send of a lease may be spent, whatever the
	// key's burst: a timer's lateness on a loaded machine. A send a
	// little late is no burst the server sees.
	lateSlack = 2 * time.Millisecond
	// maxPockets bounds the keys whose leases a Fleet holds.
	maxPockets = 4096
)

// pocket holds the sends left of a key's lease: left of them, the next at
// next, the others one interval apart after it; a send later than late
// past its instant is lost.
type pocket struct {
	next     time.Time
	interval time.Duration
	late     time.Duration
	left     int
	members  int
	gen      uint64        // the shared controller's generation of the lease
	leasing  chan struct{} // closed when the lease out lands; nil when none is out
}

// WithLease sets how much of the fleet's rate one lease holds (see
// [DefaultLease]); d <= 0 turns leases off: one script call per request at
// any rate. Leases apply from 200 requests a second, to keys without a
// window, never to those the shared controller paces.
func WithLease(d time.Duration) Option {
	return func(f *Fleet) { f.lease = max(d, 0) }
}

// leaseSize returns how many sends to book for r: 1 without leases. A
// lease is the process's share of the fleet's rate over the lease's
// length, or minLeaseSends if that is more and the fleet's rate over the
// lease's length allows it: the leases out at once then hold up to
// processes × minLeaseSends sends (at 16 processes and 2,000 a second,
// 128 ms of the rate), each booked in the GCRA, so that the fleet keeps
// to its rate; a lease a process does not spend in time is lost.
func (f *Fleet) leaseSize(r fleetapi.Request) int {
	if f.lease <= 0 || r.Adaptive || r.PerSecond < leaseMinRate || r.Window.N > 0 || len(r.Costs) > 0 || math.IsInf(r.PerSecond, 1) {
		return 1
	}
	members := f.Size()
	whole := r.PerSecond * f.lease.Seconds()
	k := max(math.Round(whole/float64(members)), min(minLeaseSends, math.Round(whole)))
	return int(max(min(k, maxLeaseSends), 1)) // a huge rate makes no huge lease
}

// maxLeaseSends bounds the sends one lease books.
const maxLeaseSends = 10_000

// reserveLeased books a send for key from its pocket, leasing more when it
// is empty. One call per key leases at a time; the others wait for it.
func (f *Fleet) reserveLeased(ctx context.Context, key string, r fleetapi.Request, k int) (fleetapi.Grant, error) {
	for {
		now := time.Now()
		f.pmu.Lock()
		p := f.pockets[key]
		if p == nil {
			p = f.newPocketLocked(key, now)
		}
		if g, ok := f.takeLocked(p, now, r.MaxWait); ok {
			f.pmu.Unlock()
			return g, nil
		}
		if p.leasing != nil {
			ch := p.leasing
			f.pmu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return fleetapi.Grant{}, context.Cause(ctx)
			}
		}
		p.leasing = make(chan struct{})
		f.pmu.Unlock()

		g, ei, err := f.reserveInterval(ctx, key, r, k)
		f.pmu.Lock()
		close(p.leasing)
		p.leasing = nil
		if err == nil && g.Granted {
			p.next, p.interval, p.left, p.members, p.gen = time.Now().Add(g.Wait), ei, k, g.Members, g.Gen
			p.late = lateFor(f.lease, r.Burst, ei)
		}
		f.pmu.Unlock()
		if err != nil || !g.Granted {
			return g, err
		}
	}
}

// lateFor returns how late a send of a lease of sends interval apart may
// be spent, for a key of burst: the key's burst of intervals, as a token
// bucket saves no more than its burst, and lateSlack at least; never more
// than the lease.
func lateFor(lease time.Duration, burst int, interval time.Duration) time.Duration {
	return min(lease, max(time.Duration(max(burst, 1))*interval, lateSlack))
}

// takeLocked takes the next send of p's lease, if it has one still fresh
// that the caller can wait for: its instant less than the key's burst of
// intervals ago (lateSlack at least, and less than a lease: see lateFor).
// A process the machine stalled for 40 ms at 2,000 a
// second would otherwise send the 20 sends of its lease that went by at
// once, above the burst the fleet booked, and its server refused them
// (28 refused at once in 4 processes sharing a GCRA of burst 20, in one
// CI run of TestFleetOfProcessesKeepsToOneQuota). It requires f.pmu
// held.
func (f *Fleet) takeLocked(p *pocket, now time.Time, maxWait time.Duration) (fleetapi.Grant, bool) {
	for p.left > 0 && now.Sub(p.next) > p.late {
		// Not spent in time: the slot has gone by, and spending it now
		// would send above the fleet's rate and burst.
		p.next, p.left = p.next.Add(p.interval), p.left-1
	}
	if p.left == 0 {
		return fleetapi.Grant{}, false
	}
	wait := max(p.next.Sub(now), 0)
	if maxWait >= 0 && wait > maxWait {
		return fleetapi.Grant{}, false
	}
	p.next, p.left = p.next.Add(p.interval), p.left-1
	return fleetapi.Grant{Granted: true, Wait: wait, Members: p.members, Gen: p.gen}, true
}

// newPocketLocked makes key's pocket, first forgetting the pockets that
// are spent and idle if there are too many. It requires f.pmu held.
func (f *Fleet) newPocketLocked(key string, now time.Time) *pocket {
	if f.pockets == nil {
		f.pockets = make(map[string]*pocket)
	}
	if len(f.pockets) >= maxPockets {
		for k, p := range f.pockets {
			if p.leasing == nil && (p.left == 0 || now.Sub(p.next) > f.lease) {
				delete(f.pockets, k)
			}
		}
	}
	p := new(pocket)
	if len(f.pockets) < maxPockets {
		f.pockets[key] = p
	}
	return p
}

// dropLease empties key's pocket: the server paused the key.
func (f *Fleet) dropLease(key string) {
	f.pmu.Lock()
	if p := f.pockets[key]; p != nil {
		p.left = 0
	}
	f.pmu.Unlock()
}
