package polite_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleetapi"
)

// downFleet is a Fleet whose store cannot be asked.
type downFleet struct {
	size   int
	asked  atomic.Int64
	paused atomic.Int64
}

var errDown = errors.New("store down")

func (f *downFleet) Reserve(context.Context, string, fleetapi.Request) (fleetapi.Grant, error) {
	f.asked.Add(1)
	return fleetapi.Grant{}, errDown
}

func (f *downFleet) Pause(context.Context, string, time.Duration, fleetapi.Request) error {
	f.paused.Add(1)
	return errDown
}

func (f *downFleet) Throttled(context.Context, string, uint64) error { return errDown }

func (f *downFleet) Paused(string) time.Duration { return 0 }

func (f *downFleet) SharesController() bool { return true }

func (f *downFleet) Size() int { return f.size }

func (f *downFleet) Adjust(string, []fleetapi.Adjust) {}

// A fleet of 4 whose store is down: each Transport paces at a quarter of
// the fleet's rate, with a quarter of its burst, and no call fails.
func TestFleetDownPacesAtAShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		f := &downFleet{size: 4}
		tr := polite.New(next, polite.WithRate(100, 8), polite.WithFleet(f))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						if !errors.Is(err, polite.ErrThrottled) {
							failed.Add(1) // only a wait past the run's end is refused
						}
						return
					}
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		assert.Zero(t, failed.Load())
		// 25 a second for 10 seconds, and a burst of 2.
		assert.InDelta(t, 252, next.calls(), 2)
		assert.Positive(t, f.asked.Load())
	})
}

// A pause the server asks for is told to the fleet, and held locally when
// the fleet cannot take it.
func TestFleetHearsAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(http.StatusTooManyRequests, "Retry-After", "3"), status(200))
		f := &downFleet{size: 2}
		tr := polite.New(next, polite.WithRate(10, 1), polite.WithFleet(f))
		start := time.Now()
		resp := fetch(t, tr, "http://api.test/")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, int64(1), f.paused.Load())
		assert.GreaterOrEqual(t, time.Since(start), 3*time.Second)
	})
}

// A response that both reports its quota spent and asks for a Retry-After
// is told to the fleet once, for the later of the two.
func TestFleetHearsOnePauseAResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(http.StatusTooManyRequests, "Retry-After", "3", "RateLimit", `"default";r=0;t=10`), status(200))
		f := &downFleet{size: 1}
		tr := polite.New(next, polite.WithRate(10, 1), polite.WithFleet(f))
		start := time.Now()
		resp := fetch(t, tr, "http://api.test/")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, int64(1), f.paused.Load(), "one call to the store")
		assert.GreaterOrEqual(t, time.Since(start), 10*time.Second, "the later of the two")
	})
}

// recordingFleet grants every send at once and records what it was asked
// and told.
type recordingFleet struct {
	mu      sync.Mutex
	asks    []fleetapi.Request
	keys    []string
	adjusts []fleetapi.Adjust
}

func (f *recordingFleet) Reserve(_ context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asks, f.keys = append(f.asks, r), append(f.keys, key)
	return fleetapi.Grant{Granted: true, Members: 1}, nil
}

func (f *recordingFleet) Pause(context.Context, string, time.Duration, fleetapi.Request) error {
	return nil
}

func (f *recordingFleet) Throttled(context.Context, string, uint64) error { return nil }

func (f *recordingFleet) Paused(string) time.Duration { return 0 }

func (f *recordingFleet) SharesController() bool { return true }

func (f *recordingFleet) Size() int { return 1 }

func (f *recordingFleet) Adjust(_ string, a []fleetapi.Adjust) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adjusts = append(f.adjusts, a...)
}

// What a Transport asks its fleet for: the configured rate and burst, the
// window with its guard, the time left before the deadline; no rate at all
// when none is configured or stated (never x/time/rate's Inf, which is a
// finite number); the global bucket under a key of its own.
func TestFleetIsAskedForTheConfiguredLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &recordingFleet{}
		fetch(t, polite.New(newStub(status(200)), polite.WithFleet(f)), "http://a.test/")
		fetch(t, polite.New(newStub(status(200)), polite.WithFleet(f), polite.WithRate(10, 3),
			polite.WithWindow(100, time.Minute), polite.WithGlobalRate(50, 5)), "http://a.test/")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := get(t, ctx, polite.New(newStub(status(200)), polite.WithFleet(f)), "http://b.test/")
		require.NoError(t, err)
		resp.Body.Close()

		require.Len(t, f.asks, 4)
		assert.Empty(t, f.asks[1].Accepted)
		assert.Equal(t, fleetapi.Request{MaxWait: -1, Adaptive: true}, f.asks[0], "nothing configured: no rate, the shared controller's")
		assert.Equal(t, fleetapi.Request{PerSecond: 10, Burst: 3, MaxWait: -1,
			Window: fleetapi.Window{N: 100, Per: time.Minute + 50*time.Millisecond}}, f.asks[1])
		assert.Equal(t, fleetapi.Request{PerSecond: 50, Burst: 5, MaxWait: -1}, f.asks[2], "the global bucket")
		assert.NotEqual(t, "a.test", f.keys[2])
		assert.Equal(t, time.Second, f.asks[3].MaxWait, "the deadline bounds the wait")
	})
}

// Each success is told to the fleet's shared controller with the key's
// next request; a throttle is told at once, with the generation its
// attempt was booked under.
func TestFleetHearsSuccessesAndThrottles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &genFleet{}
		tr := polite.New(newStub(status(200), status(200), status(429), status(200)), polite.WithFleet(f), polite.WithMaxAttempts(1))
		for range 4 {
			resp := fetch(t, tr, "http://a.test/")
			resp.Body.Close()
		}
		assert.Equal(t, [][]fleetapi.Accepted{nil, {{Gen: 1, N: 1}}, {{Gen: 2, N: 1}}, nil}, f.accepted,
			"each request tells the successes since the last, by the generation each was booked under")
		assert.Equal(t, []uint64{3}, f.throttled, "the throttled attempt was booked under generation 3")
	})
}

// genFleet books every send at once under generation n for the n-th, and
// records what it is told.
type genFleet struct {
	recordingFleet
	accepted  [][]fleetapi.Accepted
	throttled []uint64
}

func (f *genFleet) Reserve(_ context.Context, _ string, r fleetapi.Request) (fleetapi.Grant, error) {
	f.accepted = append(f.accepted, r.Accepted)
	return fleetapi.Grant{Granted: true, Gen: uint64(len(f.accepted))}, nil
}

func (f *genFleet) Throttled(_ context.Context, _ string, gen uint64) error {
	f.throttled = append(f.throttled, gen)
	return nil
}

// Successes the shared controller was to be told with a booking that
// failed are told with the next one: none is lost to an outage of the
// store.
func TestFleetKeepsSuccessesItCouldNotTell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyFleet{}
		tr := polite.New(newStub(status(200)), polite.WithFleet(f))
		fetch(t, tr, "http://a.test/").Body.Close()
		f.down = true
		fetch(t, tr, "http://a.test/").Body.Close() // tells 1, which fails
		f.down = false
		fetch(t, tr, "http://a.test/").Body.Close()
		require.Len(t, f.asks, 3)
		assert.Equal(t, [][]fleetapi.Accepted{nil, {{N: 1}}, {{N: 2}}},
			[][]fleetapi.Accepted{f.asks[0].Accepted, f.asks[1].Accepted, f.asks[2].Accepted},
			"the third booking tells the success the second could not, and the second's own")
	})
}

// flakyFleet is a recordingFleet whose store fails while down.
type flakyFleet struct {
	recordingFleet
	down bool
}

func (f *flakyFleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	_, _ = f.recordingFleet.Reserve(ctx, key, r)
	if f.down {
		return fleetapi.Grant{}, errDown
	}
	return fleetapi.Grant{Granted: true}, nil
}

// pausingFleet books the first send 100ms ahead, and publishes a pause of
// a second as it does; later bookings go at once.
type pausingFleet struct {
	recordingFleet
	until time.Time
}

func (f *pausingFleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	_, _ = f.recordingFleet.Reserve(ctx, key, r)
	if f.until.IsZero() {
		f.until = time.Now().Add(time.Second)
		return fleetapi.Grant{Granted: true, Wait: 100 * time.Millisecond}, nil
	}
	return fleetapi.Grant{Granted: true}, nil
}

func (f *pausingFleet) Paused(string) time.Duration { return max(time.Until(f.until), 0) }

// A send booked before a pause another process set hears of it before it
// goes: it waits for the pause and books again.
func TestFleetBookedSendHoldsForAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		f := &pausingFleet{}
		tr := polite.New(next, polite.WithFleet(f), polite.WithRate(10, 1))
		start := time.Now()
		fetch(t, tr, "http://a.test/")
		assert.Equal(t, time.Second, time.Since(start), "sent when the pause ended, not at its slot")
		assert.Len(t, f.asks, 2, "booked again after the pause")
	})
}

// A send the shared controller booked before a congestion event, asleep
// until its slot, books again at the rate the event cut to rather than go
// at the old one; one the controller did not book (a configured rate)
// goes at its slot.
func TestFleetBookedSendBooksAgainAfterAnEvent(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := congestingFleet(0)
				opts := []polite.Option{polite.WithFleet(f)}
				if !shared {
					opts = append(opts, polite.WithRate(10, 1))
				}
				tr := polite.New(newStub(status(200)), opts...)
				start := time.Now()
				fetch(t, tr, "http://a.test/").Body.Close()
				assert.Equal(t, 300*time.Millisecond, time.Since(start), "woke at its slot")
				if shared {
					assert.Len(t, f.asks, 2, "booked again")
				} else {
					assert.Len(t, f.asks, 1, "went at its slot")
				}
			})
		})
	}
}

// bookingFleet answers the i-th booking (from 0) with answer(i), and
// records what it was asked and told. From event on, a send booked under
// generation 1 hears of a congestion event.
type bookingFleet struct {
	recordingFleet
	answer func(f *bookingFleet, i int) fleetapi.Grant
	event  time.Time
}

func (f *bookingFleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	_, _ = f.recordingFleet.Reserve(ctx, key, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answer(f, len(f.asks)-1), nil
}

func (f *bookingFleet) Congested(_ string, gen uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.event.IsZero() && !time.Now().Before(f.event) && gen < 2
}

// congestingFleet returns a bookingFleet that books the k-th send (from
// 0) 300ms ahead under generation 1 and hears of a congestion event
// (generation 2) 100ms later; the sends before it go at once under
// generation 1, those after under generation 2.
func congestingFleet(k int) *bookingFleet {
	return &bookingFleet{answer: func(f *bookingFleet, i int) fleetapi.Grant {
		switch {
		case i < k:
			return fleetapi.Grant{Granted: true, Gen: 1}
		case i == k:
			f.event = time.Now().Add(100 * time.Millisecond)
			return fleetapi.Grant{Granted: true, Wait: 300 * time.Millisecond, Gen: 1}
		}
		return fleetapi.Grant{Granted: true, Gen: 2}
	}}
}

// tokens200 estimates every request at 200 tokens.
func tokens200(*http.Request, []byte) (polite.Cost, string, error) {
	return polite.Cost{Tokens: 200}, "", nil
}

// A call that began before any answer stated the token quota, told by
// the fleet to ask again later, books its cost when it asks again after
// an answer stated it: booked without it, the send would go unseen by the
// fleet's bucket, and a fleet sending at the quota's edge is refused. (The
// first call holds the key's line while told to wait; the second, behind
// it, books as the first one's send goes, and is told to wait while its
// answer comes, if it has not come yet.)
func TestFleetBooksACostStatedWhileTheCallWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200, tokensQuota(2000, 1800, 100*time.Millisecond)...))
		f := &bookingFleet{answer: func(_ *bookingFleet, i int) fleetapi.Grant {
			if i%2 == 0 {
				return fleetapi.Grant{Later: true, Wait: 250 * time.Millisecond}
			}
			return fleetapi.Grant{Granted: true}
		}}
		tr := polite.New(next, polite.WithFleet(f), polite.WithCost(tokens200))
		done := make(chan struct{})
		go func() {
			defer close(done)
			fetch(t, tr, "http://llm.test/").Body.Close()
		}()
		time.Sleep(10 * time.Millisecond)
		fetch(t, tr, "http://llm.test/").Body.Close() // waits in line, then is told to wait
		<-done
		require.Len(t, f.asks, 4)
		assert.Empty(t, f.asks[0].Costs, "no quota known yet")
		require.Len(t, f.asks[3].Costs, 1, "asked again after the quota was stated")
		assert.Equal(t, "tokens", f.asks[3].Costs[0].Unit)
		assert.Equal(t, 200.0, f.asks[3].Costs[0].Amount)
		assert.Equal(t, 2000.0, f.asks[3].Costs[0].Limit)
	})
}

// A send booked with its cost, asleep until its slot when the shared
// controller cut its rate, gives the cost back as it books again: the
// fleet's bucket would count it twice, and the fleet would use less than
// its quota.
func TestFleetBookedAgainGivesItsCostBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200, tokensQuota(2000, 1800, 100*time.Millisecond)...))
		// The first call's answer states the quota; the second is booked
		// ahead, and an event comes while it sleeps.
		f := congestingFleet(1)
		tr := polite.New(next, polite.WithFleet(f), polite.WithCost(tokens200))
		fetch(t, tr, "http://llm.test/").Body.Close()
		fetch(t, tr, "http://llm.test/").Body.Close()
		require.Len(t, f.asks, 3, "the second call booked again")
		for _, i := range []int{1, 2} {
			require.Len(t, f.asks[i].Costs, 1)
			assert.Equal(t, 200.0, f.asks[i].Costs[0].Amount)
		}
		given := 0.0
		for _, a := range f.adjusts {
			given += a.GiveBack
		}
		assert.Equal(t, 200.0, given, "the first booking's cost given back")
	})
}

// laterFleet tells the first bookings of each call to ask again later (a
// shared controller that would book them far ahead), then books.
type laterFleet struct {
	recordingFleet
	later int // bookings still to put off
}

func (f *laterFleet) Reserve(_ context.Context, _ string, r fleetapi.Request) (fleetapi.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asks = append(f.asks, r)
	if f.later > 0 {
		f.later--
		return fleetapi.Grant{Later: true, Wait: 250 * time.Millisecond}, nil
	}
	return fleetapi.Grant{Granted: true, Members: 1}, nil
}

// A booking put off (fleetapi.Grant.Later) waits as long as the fleet says,
// books again, and then sends: nothing booked far ahead, nothing refused.
func TestFleetLaterAsksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &laterFleet{later: 2}
		tr := polite.New(newStub(status(200)), polite.WithFleet(f))
		start := time.Now()
		fetch(t, tr, "http://a.test/").Body.Close()
		assert.Equal(t, 500*time.Millisecond, time.Since(start), "two waits of 250 ms")
		assert.Len(t, f.asks, 3)
	})
}

// overtakingFleet books every send 100ms ahead. A send of a priority below
// the default is overtaken, as it wakes, by a send of a higher priority
// (10ms later), and, as it wakes from that, by one more (20ms in all).
type overtakingFleet struct {
	recordingFleet
	overtaken int
}

func (f *overtakingFleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	_, _ = f.recordingFleet.Reserve(ctx, key, r)
	return fleetapi.Grant{Granted: true, Wait: 100 * time.Millisecond, At: 1}, nil
}

func (f *overtakingFleet) Overtaken(_ string, p int8, _ fleetapi.Grant) time.Duration {
	if p >= 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overtaken++
	return time.Duration(min(f.overtaken, 2)) * 10 * time.Millisecond
}

// A Transport tells its fleet each call's priority, and a send booked
// ahead waits, at its slot, for the sends of higher priorities that took
// places ahead of it meanwhile (fleetapi.Overtaking), asking again after
// each wait; a send nothing overtook goes at its slot.
func TestFleetBookedSendWaitsForTheSendsThatOvertookIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &overtakingFleet{}
		tr := polite.New(newStub(status(200)), polite.WithFleet(f), polite.WithRate(10, 1))
		for _, c := range []struct {
			p    polite.Priority
			wait time.Duration
		}{{polite.PriorityBatch, 120 * time.Millisecond}, {polite.PriorityInteractive, 100 * time.Millisecond}} {
			ctx := polite.ContextWithPriority(context.Background(), c.p)
			start := time.Now()
			resp, err := get(t, ctx, tr, "http://a.test/")
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, c.wait, time.Since(start), "priority %v", c.p)
		}
		require.Len(t, f.asks, 2)
		assert.Equal(t, int8(polite.PriorityBatch), f.asks[0].Priority)
		assert.Equal(t, int8(polite.PriorityInteractive), f.asks[1].Priority)
		assert.Equal(t, 3, f.overtaken, "asked again after each wait, until nothing more overtook it")
	})
}

// gcraFleet books each send at the next slot of a GCRA of interval, as
// the fleet's store does for one process, and records the priorities it
// was asked for and how far ahead it had booked when asked.
type gcraFleet struct {
	recordingFleet
	interval time.Duration
	tat      time.Time
	ahead    time.Duration // the furthest ahead the schedule was booked when asked
}

func (f *gcraFleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	_, _ = f.recordingFleet.Reserve(ctx, key, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.ahead = max(f.ahead, f.tat.Sub(now))
	slot := now
	if f.tat.After(now) {
		slot = f.tat
	}
	f.tat = slot.Add(f.interval)
	return fleetapi.Grant{Granted: true, Members: 1, Wait: slot.Sub(now)}, nil
}

// A process books its sends in the fleet one at a time, by priority: its
// batch backlog holds one booking ahead in the fleet's schedule, not one
// per waiting call, and its interactive call books next. Each waiting
// call used to book as it came, in order of arrival: 50 batch calls
// half a second ahead, and the interactive call 0.4 s behind them.
func TestFleetBooksOneSendAtATimeByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &gcraFleet{interval: 10 * time.Millisecond}
		tr := polite.New(&sendLog{}, polite.WithFleet(f), polite.WithRate(100, 1))
		wait := interactiveBehindBatch(t, tr, 50, 100*time.Millisecond)
		assert.LessOrEqual(t, wait, 2*f.interval, "the interactive call booked next")
		// One booking of the batch ahead at most; the interactive call
		// books while the batch's head still waits for its slot (the
		// store's lanes may put it first: see fleet's Overtaking).
		assert.LessOrEqual(t, f.ahead, 2*f.interval, "one booking ahead at most, and the interactive call's")
		f.mu.Lock()
		defer f.mu.Unlock()
		require.Len(t, f.asks, 51)
	})
}
