package fleet

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/politehttp/polite/fleetapi"
)

// How a process books its sends, and tells of throttles and pauses,
// through the scripts of scripts.go.

// Reserve implements [fleetapi.Fleet]: it books the next send for key, from
// the process's lease when it has one.
func (f *Fleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	f.watch()
	if owed := min(r.Owed, max(r.Burst, int(r.PerSecond), 1)); owed > 0 && r.Window.N == 0 {
		// Sends the process made on its own (while Redis could not answer,
		// or before the fleet paced the key at a rate): booked with this
		// one, so that the GCRA counts them (the first of the slots is this
		// send's; the lease, if any, is dropped).
		f.dropLease(key)
		g, _, err := f.reserveInterval(ctx, key, r, 1+owed)
		return g, err
	}
	if k := f.leaseSize(r); k > 1 {
		return f.reserveLeased(ctx, key, r, k)
	}
	g, _, err := f.reserveInterval(ctx, key, r, 1)
	return g, err
}

// reserveInterval books k sends for key in one script call, and returns
// the interval they were booked at: r's rate, or the shared controller's
// if lower.
func (f *Fleet) reserveInterval(ctx context.Context, key string, r fleetapi.Request, k int) (fleetapi.Grant, time.Duration, error) {
	ei, burst := interval(r.PerSecond, r.Burst)
	n, per := 0, int64(0)
	if r.Window.N > 0 && r.Window.Per > 0 {
		n, per = r.Window.N, r.Window.Per.Microseconds()
	}
	maxWait := int64(-1)
	if r.MaxWait >= 0 {
		maxWait = r.MaxWait.Microseconds()
	}
	adaptive := 0
	if r.Adaptive {
		adaptive = 1
	}
	args := []any{ei, burst, n, per, maxWait, f.member, liveFor.Microseconds(), grace.Microseconds(), k,
		adaptive, acceptedArg(r.Accepted), max(r.NotBefore.Microseconds(), 0), r.Priority, f.channel(key)}
	args = appendCosts(args, r.Costs)
	v, err := f.run(ctx, "reserve", reserveScript, f.keys(key), args...)
	if err != nil {
		return fleetapi.Grant{}, 0, err
	}
	if len(v) != 8 {
		return fleetapi.Grant{}, 0, f.failed(fmt.Errorf("%w: reserve replied %d values", ErrUnavailable, len(v)))
	}
	f.lastLive.Store(v[3])
	return fleetapi.Grant{
		Granted:   v[0] == 1,
		Later:     v[0] == 2,
		Wait:      time.Duration(max(v[1], 0)) * time.Microsecond,
		Paused:    time.Duration(max(v[2], 0)) * time.Microsecond,
		Members:   int(v[3]),
		Gen:       uint64(max(v[4], 0)),
		At:        v[6],
		Overtakes: uint64(max(v[7], 0)),
	}, time.Duration(max(v[5], 0)) * time.Microsecond, nil
}

// acceptedArg writes a request's successes for reserveScript: "gen:n"
// for each generation, comma-separated.
func acceptedArg(a []fleetapi.Accepted) string {
	var b []byte
	for _, x := range a {
		if x.N <= 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, x.Gen, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(x.N), 10)
	}
	return string(b)
}

// Throttled implements [fleetapi.Fleet]: it tells key's shared controller
// of a throttle of a send booked under generation gen (see congestScript).
func (f *Fleet) Throttled(ctx context.Context, key string, gen uint64) error {
	_, err := f.run(ctx, "congest", congestScript, f.stateKey(key), gen, grace.Microseconds(), f.channel(key))
	return err
}

// Pause implements [fleetapi.Fleet]: it holds every process's sends to key
// for d.
func (f *Fleet) Pause(ctx context.Context, key string, d time.Duration, r fleetapi.Request) error {
	if d <= 0 {
		return nil
	}
	f.dropLease(key)
	ei, burst := interval(r.PerSecond, r.Burst)
	_, err := f.run(ctx, "pause", pauseScript, f.stateKey(key), max(d.Microseconds(), 1), ei, burst, grace.Microseconds(), f.channel(key))
	return err
}

// interval returns the GCRA's emission interval in µs for perSecond (0 for
// no pacing) and the burst, at least 1.
func interval(perSecond float64, burst int) (int64, int) {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return 0, max(burst, 1)
	}
	return max(int64(math.Round(1e6/perSecond)), 1), max(burst, 1)
}
