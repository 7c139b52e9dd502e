package fleet

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/politehttp/polite/fleetapi"
)

var _ fleetapi.Inspector = (*Fleet)(nil)

// Inspect implements [fleetapi.Inspector]: what Redis holds for each of
// keys, read by one script call a key (lua/inspect.lua), all in one
// pipeline (which a Cluster client splits by node), on the clock of the
// node that holds the key, as the bookings are made. Members counts the
// processes that called for the key in the last 3 seconds; Limit is the
// shared controller's estimate; Next is the GCRA's theoretical arrival
// time, or the pause's end if later (the booked sends of a key with a
// burst of b may go up to b−1 intervals before it; a window or a cost
// quota may hold them longer); Next and Paused are zero unless after now.
// A field Redis holds that is missing or malformed is zero.
//
// It goes apart from the bookings: it waits for no turn among them, and
// neither opens nor closes the breaker, but fails at once while the
// breaker is open. Its deadline is the earlier of ctx's and the Fleet's
// timeout (with the time a round trip is given for each call, and a
// second at least while Redis has never answered the Fleet, see
// [WithTimeout]), whatever the client; an error matches [ErrUnavailable]
// unless ctx ended first.
func (f *Fleet) Inspect(ctx context.Context, keys []string) ([]fleetapi.KeyState, error) {
	out := make([]fleetapi.KeyState, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if !f.Available() {
		return nil, errBreaker
	}
	budget := f.timeout + time.Duration(len(keys))*perCall
	if f.batch.answered.Load() == 0 {
		budget = max(budget, coldTimeout)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, budget, fmt.Errorf("%w: %w (%v)", ErrUnavailable, ErrTimeout, budget))
	defer cancel()
	// go-redis does not stop a call at its context's deadline unless the
	// client has ContextTimeoutEnabled: a round trip that outlives it runs
	// on apart, and is abandoned.
	done := make(chan []*redis.Cmd, 1)
	go func() { done <- f.inspect(ctx, keys) }()
	var cmds []*redis.Cmd
	select {
	case cmds = <-done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	now := time.Now()
	for i, cmd := range cmds {
		res, err := cmd.Result()
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		out[i] = keyState(res, now)
	}
	return out, nil
}

// inspect runs inspectScript for each of keys in one pipeline, and again,
// whole, those Redis has lost the script for (NOSCRIPT), as roundTrip
// does.
func (f *Fleet) inspect(ctx context.Context, keys []string) []*redis.Cmd {
	live := liveFor.Microseconds()
	return f.evalPipelined(ctx, len(keys), func(i int) (*redis.Script, []string, []any) {
		return inspectScript, f.keys(keys[i]), []any{live}
	}, nil)
}

// keyState reads inspectScript's reply res, heard at now on this process's
// clock: the instants it holds, on Redis's clock, are placed as far from
// now as they were from Redis's now. A reply of another shape is a key
// Redis holds nothing for.
func keyState(res any, now time.Time) fleetapi.KeyState {
	v, _ := res.([]any)
	if len(v) < 6 {
		return fleetapi.KeyState{}
	}
	redisNow, ok := v[0].(int64)
	if known, _ := v[1].(int64); !ok || known != 1 {
		return fleetapi.KeyState{}
	}
	members, _ := v[2].(int64)
	s := fleetapi.KeyState{Known: true, Members: int(min(max(members, 0), math.MaxInt32))}
	if w, ok := number(v[3]); ok && w > 0 {
		s.Limit = w
	}
	s.Next = later(v[4], redisNow, now)
	s.Paused = later(v[5], redisNow, now)
	if s.Paused.After(s.Next) {
		s.Next = s.Paused
	}
	return s
}

// maxMicros is the most µs a time.Duration holds.
const maxMicros = float64(math.MaxInt64 / int64(time.Microsecond))

// later returns the instant x, in µs on Redis's clock, placed on this
// process's clock (redisNow on Redis's clock is now on it); zero if x is
// missing, malformed, not after redisNow, or further from it than a
// time.Duration holds.
func later(x any, redisNow int64, now time.Time) time.Time {
	at, ok := number(x)
	if !ok {
		return time.Time{}
	}
	d := at - float64(redisNow)
	if !(d > 0) || d >= maxMicros {
		return time.Time{}
	}
	return now.Add(time.Duration(d) * time.Microsecond)
}

// number reads a field of the state as the scripts write it, a decimal
// string; ok is false if it is missing, malformed, or not finite.
func number(x any) (float64, bool) {
	var v float64
	switch x := x.(type) {
	case string:
		var err error
		if v, err = strconv.ParseFloat(x, 64); err != nil {
			return 0, false
		}
	case int64:
		v = float64(x)
	default:
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
