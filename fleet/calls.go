package fleet

import (
	mrand "math/rand/v2"

	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// The calls to Redis: each under the fleet's deadline, heard by its
// observers, and behind a breaker that fails open to local pacing.

// An Observer hears of a Fleet's calls to Redis (see [Fleet.Observe]).
// Its functions run on the goroutine that made the call (a request's, or
// that of a retry budget's flush of refunds), with no lock held; nil ones
// are skipped. A call whose caller gave up before Redis answered is not
// reported. Op names the call: "reserve"
// (a booking, or a lease of bookings), "congest" (a throttle told to the
// shared controller), "pause" (a pause told to the fleet), "budget" (the
// retry budget's take and refunds) or "adjust" (what the sends gave back
// of their costs, and the bounds the server's answers set).
type Observer struct {
	// OnCall is called when a call to Redis has been answered or has
	// failed: d is the time from the call to its answer (or to the
	// timeout), its wait for a round trip included, err nil or the error,
	// which matches [ErrUnavailable].
	OnCall func(op string, d time.Duration, err error)
	// OnFallback is called when Redis could not be asked (it failed, did
	// not answer in time, or the breaker is open), so that the process
	// goes on alone: a booking's request is paced locally, a retry takes
	// from the process's share of the budget, a throttle or a pause is not
	// told to the fleet. err says why, and matches [ErrUnavailable].
	OnFallback func(op string, err error)
}

// Observe adds o to what hears of the fleet's calls to Redis. It may be
// called at any time, from any goroutine; observers are never removed.
func (f *Fleet) Observe(o Observer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	joined := o
	if was := f.observers.Load(); was != nil {
		joined = Observer{OnCall: bothCall(was.OnCall, o.OnCall), OnFallback: bothFallback(was.OnFallback, o.OnFallback)}
	}
	f.observers.Store(&joined)
}

func bothCall(a, b func(string, time.Duration, error)) func(string, time.Duration, error) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(op string, d time.Duration, err error) { a(op, d, err); b(op, d, err) }
}

func bothFallback(a, b func(string, error)) func(string, error) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(op string, err error) { a(op, err); b(op, err) }
}

// run calls script (named op for observers) under the fleet's deadline and
// breaker, and returns its reply as integers.
func (f *Fleet) run(ctx context.Context, op string, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	v, err := f.call(ctx, op, script, keys, args...)
	if err != nil && errors.Is(err, ErrUnavailable) {
		if o := f.observers.Load(); o != nil && o.OnFallback != nil {
			o.OnFallback(op, err)
		}
	}
	return v, err
}

// call is run without telling observers of a fallback.
func (f *Fleet) call(ctx context.Context, op string, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	ok, probe, opened := f.allow(time.Now())
	if !ok {
		return nil, errBreaker
	}
	c := &scriptCall{script: script, keys: keys, args: args, done: make(chan reply, 1)}
	f.submit(c)
	answered := false
	defer func() {
		if !answered {
			c.abandoned.Store(true) // not sent if still queued
		}
	}()
	start := time.Now()
	observed := func(err error) {
		if o := f.observers.Load(); o != nil && o.OnCall != nil {
			o.OnCall(op, time.Since(start), err)
		}
	}
	// The timeout runs from the moment the call's round trip goes: a call
	// that waits in the queue for its turn waits on, until the caller gives
	// up or the breaker opens (a probe, made while it is open, a timeout at
	// most). The deadline holds whatever client is passed in:
	// go-redis does not stop a call at its context's deadline unless the
	// client has ContextTimeoutEnabled, so a round trip that outlives it is
	// abandoned.
	timer := time.NewTimer(f.timeout)
	expect := start.Add(f.timeout) // when the timer should fire
	defer timer.Stop()
	var until time.Time // while its round trip is late: how long it may wait on
	for {
		select {
		case r := <-c.done:
			answered = true
			if r.err != nil {
				err := f.failed(fmt.Errorf("%w: %w", ErrUnavailable, r.err))
				observed(err)
				return nil, err
			}
			f.succeeded()
			observed(nil)
			return r.v, nil
		case <-timer.C:
			due := c.due.Load()
			if due == 0 && probe && !f.Available() {
				// The round trips ahead hold both turns, stuck on a Redis
				// that answers nothing (a frozen one holds them until the
				// client's read timeout, 5 s by default): the probe fails,
				// unsent, as one sent would at its deadline, rather than
				// hold its request until a turn comes.
				err := fmt.Errorf("%w: %w (%v)", ErrUnavailable, ErrTimeout, f.timeout)
				observed(f.failed(err))
				return nil, err
			}
			if left := time.Until(time.Unix(0, due)); due == 0 || left > 0 {
				if due == 0 {
					left = f.timeout
				}
				timer.Reset(left) // queued, or sent since: its round trip has time left
				expect = time.Now().Add(left)
				continue
			}
			// Its round trip is late. If Redis has answered this round
			// trip or one that went after it (served), Redis is there and
			// something of this round trip's own holds it (a busy process
			// that reads the answer late, one slow node): its booking is
			// likely made, and it waits on, up to slowWaits times its
			// timeout, rather than send on its own beside the fleet's
			// schedule; then it goes on alone, the breaker closed. Until
			// then, answers to round trips that went before this one
			// prove nothing: Redis may have frozen just after one. So it
			// waits on only while Redis answers something at least every
			// silence (its timeout, at most maxSilence), and fails,
			// opening the breaker, once Redis has been silent that long:
			// a frozen Redis holds it at most maxSilence past its
			// deadline, however long the timeout.
			now := time.Now()
			err := fmt.Errorf("%w: %w (%v)", ErrUnavailable, ErrTimeout, f.timeout)
			served, quiet := f.batch.answers(c.trip.Load(), now)
			silence := min(f.timeout, maxSilence)
			// A timer that fires starvedLag late says the process itself
			// is too busy to run its goroutines on time, the one that
			// reads Redis's answer among them: Redis is not to blame, and
			// the call waits on as for a slow round trip. (A fleet's
			// processes that started under 10,000 callers on 2 cores read
			// answers 26 to 50 ms late in their first 0.2 s, and opened
			// their breakers at the Fleet's timeout.)
			starved := now.Sub(expect) > starvedLag
			if probe || !served && !starved && quiet >= silence {
				observed(f.failed(err))
				return nil, err
			}
			if until.IsZero() {
				until = time.Unix(0, due).Add(time.Duration(slowWaits-1) * f.timeout)
			}
			if wait := until.Sub(now); wait > 0 {
				if !served {
					// To ask again when the silence would be long enough;
					// starved, a silence from now.
					next := silence - quiet
					if next <= 0 {
						next = silence
					}
					wait = min(wait, next)
				}
				timer.Reset(wait)
				expect = now.Add(wait)
				continue
			}
			observed(err)
			return nil, err
		case <-opened:
			// The breaker opened: a round trip failed, or Redis went
			// silent, while this call waited. Still queued, it goes on
			// alone at once, as a call the breaker holds does: the round
			// trips ahead may be stuck on a Redis that answers nothing,
			// and its own timer may fire only a timeout from now. Sent,
			// it waits for its own round trip's answer or deadline.
			if c.due.Load() == 0 {
				return nil, errBreaker
			}
			opened = nil
		case <-ctx.Done():
			// The caller gave up: Redis is not to blame. A probe gives its
			// turn to the next call.
			if probe {
				f.mu.Lock()
				f.probing = false
				f.mu.Unlock()
			}
			return nil, context.Cause(ctx)
		}
	}
}

// ints reads a script's reply: an integer or a list of integers.
func ints(res any) []int64 {
	switch v := res.(type) {
	case int64:
		return []int64{v}
	case []any:
		out := make([]int64, 0, len(v))
		for _, x := range v {
			if i, ok := x.(int64); ok {
				out = append(out, i)
			}
		}
		return out
	}
	return nil
}

// allow reports whether a Redis call may go at now: the breaker is
// closed, and opened is closed when it next opens; or it is open, its
// wait is over, and no other probe is out; then the call is the probe.
func (f *Fleet) allow(now time.Time) (ok, probe bool, opened <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down {
		if f.opened == nil {
			f.opened = make(chan struct{})
		}
		return true, false, f.opened
	}
	if f.probing || now.Before(f.probeAt) {
		return false, false, nil
	}
	f.probing = true
	return true, true, nil
}

// failed opens the breaker, or backs off when a probe failed, and
// returns err.
func (f *Fleet) failed(err error) error {
	f.mu.Lock()
	changed := !f.down
	switch {
	case !f.down:
		f.down, f.backoff = true, probeFirst
		if f.opened != nil {
			close(f.opened) // the calls still queued go on alone
			f.opened = nil
		}
	case f.probing:
		f.probing, f.backoff = false, min(2*f.backoff, probeLast)
	default: // a call that was out when the breaker opened
		f.mu.Unlock()
		return err
	}
	// A jittered wait, so that the processes of a fleet do not probe in
	// step.
	wait := f.backoff/2 + time.Duration(mrand.Int64N(int64(f.backoff/2)+1))
	f.probeAt = time.Now().Add(wait)
	f.mu.Unlock()
	f.refresh()
	if changed {
		if f.logger != nil {
			f.logger.Warn("polite fleet: Redis unavailable, pacing locally", "err", err)
		}
		if f.onChange != nil {
			f.onChange(false, err)
		}
	}
	return err
}

// refresh has a Cluster client reload its map of the cluster, in the
// background, so that the next probe goes to the node that serves the
// slot now: after a failover, go-redis learns that a replica took over
// only from a MOVED reply or every 60 seconds, and until then sends the
// slot's calls to the dead master.
func (f *Fleet) refresh() {
	if c, ok := f.rdb.(interface{ ReloadState(context.Context) }); ok {
		c.ReloadState(context.Background())
	}
}

// succeeded closes the breaker.
func (f *Fleet) succeeded() {
	f.mu.Lock()
	changed := f.down
	f.down, f.probing, f.backoff = false, false, probeFirst
	f.mu.Unlock()
	if changed {
		if f.logger != nil {
			f.logger.Warn("polite fleet: Redis back, pacing on shared state")
		}
		if f.onChange != nil {
			f.onChange(true, nil)
		}
	}
}

func defaultMember() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
