package pace

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
)

// firstContact is a controller whose first contact paces at 100 a second,
// two at once, until it reads a throttle (or, ended, its rate outgrew any
// demand); after a throttle its rate is 1 a second, growing with time.
type firstContact struct {
	control.Controller // only StartRate, Grown and ServerLimit are called
	over, throttled    atomic.Bool
}

func (f *firstContact) ServerLimit() float64 { return 0 }

func (f *firstContact) StartRate(time.Time) (float64, int, bool) {
	if f.over.Load() || f.throttled.Load() {
		return 0, 0, false
	}
	return 100, 2, true
}

func (f *firstContact) Grown(time.Time) (float64, bool) { return 1, f.throttled.Load() }

// A first contact that ends in a throttle leaves the key paced at the
// controller's rate from the moment the controller read it, not unpaced
// until the answer's Follow comes: an attempt at the head of the queue in
// between used to find no bucket and go, and up to four went at once into
// a server with no burst (x/time/rate's, burst 1, on loopback). One that
// ends with no throttle leaves the key unpaced, as a lone caller's.
func TestAFirstContactThatEndsInAThrottleLeavesNoAttemptUnpaced(t *testing.T) {
	now := time.Unix(1_000_000_000, 0)
	for _, throttled := range []bool{true, false} {
		var b Bucket
		ctl := &firstContact{}
		b.mu.Lock()
		require.True(t, b.startLocked(ctl, now), "the first contact's bucket")
		require.True(t, b.limiter.AllowN(now, 2), "two at once")
		ctl.throttled.Store(throttled)
		ctl.over.Store(!throttled)
		growing := b.growLocked(ctl, now, rate.Inf)
		if !throttled {
			assert.False(t, growing)
			assert.Nil(t, b.limiter, "no throttle: unpaced again")
			b.mu.Unlock()
			continue
		}
		assert.True(t, growing, "the controller's rate grows")
		require.NotNil(t, b.limiter, "a throttle: still paced")
		assert.Equal(t, rate.Limit(1), b.limiter.Limit(), "at the controller's rate")
		assert.False(t, b.limiter.AllowN(now, 1), "no request goes at once")
		assert.True(t, b.limiter.AllowN(now.Add(time.Second), 1), "one a second later")
		assert.False(t, b.limiter.AllowN(now.Add(time.Second), 1), "a single one")
		b.mu.Unlock()
	}
}

// quiet is a gate.Listener that hears nothing and refuses no wait.
type quiet struct{}

func (quiet) Waiting(gate.Who, time.Duration, gate.Cause, bool) {}
func (quiet) Refused(gate.Who, time.Duration, time.Duration, bool) error {
	return errors.New("refused")
}
func (quiet) TooLarge(gate.Who, string, float64, float64) error { return errors.New("too large") }
func (quiet) OffLimits(gate.Who, error)                         {}

// A first contact whose server goes silent (nothing for startQuiet times
// the least round trip it heard) sends no more than startUnheard attempts
// past its last answer, and startUnheard more each startSilence it stays
// silent, its time over or not: a server that holds each request past its
// limit longer than the one before says nothing until the first is
// answered, and every caller's next request went into that silence. An
// answer lets the next ones go at the first contact's rate; a server that
// answers each attempt never stops it so, nor one whose answers are slow
// but come within a few of its round trips (an LLM's, generated for
// seconds), nor one not yet heard at all.
func TestAFirstContactStopsSendingWhileItsServerIsSilent(t *testing.T) {
	for _, server := range []string{"silent", "answers at once", "answers in 2 s", "refused by a later gate"} {
		synctest.Test(t, func(t *testing.T) {
			var (
				b     Bucket
				ctl   = &firstContact{}
				calls atomic.Int32
				sent  atomic.Int32
				wg    sync.WaitGroup
			)
			calls.Store(16)
			ctx, cancel := context.WithCancel(t.Context())
			w := &gate.Waiter{L: quiet{}, Who: gate.Who{Ctx: ctx}}
			if server == "silent" || server == "refused by a later gate" {
				// One attempt, answered in a millisecond; then silence.
				_, err := b.Admit(w, ctl, rate.Inf, &calls)
				require.NoError(t, err)
				time.Sleep(time.Millisecond)
				b.Follow(ctl, control.Rate{}, time.Now(), time.Millisecond, rate.Inf, 1)
			}
			for range 16 {
				wg.Go(func() {
					w := &gate.Waiter{L: quiet{}, Who: gate.Who{Ctx: ctx}}
					// (Bounded: a key unpaced would admit without end.)
					for sent.Load() < 1000 {
						unheard, err := b.Admit(w, ctl, rate.Inf, &calls)
						if err != nil {
							break
						}
						sent.Add(1)
						switch server {
						case "refused by a later gate":
							// Admitted here, refused at once by a gate after
							// this one (a deadline, a cost too large): never
							// sent, never answered.
							assert.True(t, unheard, "counted among the first contact's unanswered")
							b.Unsent()
						case "answers at once":
							b.Follow(ctl, control.Rate{}, time.Now(), time.Millisecond, rate.Inf, 1)
						case "answers in 2 s":
							time.Sleep(2 * time.Second)
							b.Follow(ctl, control.Rate{}, time.Now(), 2*time.Second, rate.Inf, 1)
						}
					}
				})
			}
			switch server {
			case "answers at once":
				time.Sleep(time.Second)
				synctest.Wait()
				assert.InDelta(t, 100, sent.Load(), 3, "a server that answers: the first contact's rate, 100 a second")
			case "refused by a later gate":
				// The server answered the one attempt it was sent; the
				// others never reached it, and are no silence of its.
				time.Sleep(time.Second)
				synctest.Wait()
				assert.InDelta(t, 100, sent.Load(), 3, "attempts not sent are taken back: the first contact's rate, 100 a second")
			case "answers in 2 s":
				time.Sleep(200 * time.Millisecond)
				synctest.Wait()
				assert.EqualValues(t, 16, sent.Load(), "not yet heard: every caller goes at the first contact's rate")
				time.Sleep(10 * time.Second)
				synctest.Wait()
				assert.EqualValues(t, 16*6, sent.Load(), "answers 2 s after their attempts: each caller's next goes at once")
			case "silent":
				time.Sleep(time.Second)
				synctest.Wait()
				assert.EqualValues(t, startUnheard, sent.Load(), "a silent second: no more than startUnheard")
				ctl.over.Store(true) // the first contact's time is over: the silence still holds it
				time.Sleep(startSilence - time.Second + 50*time.Millisecond)
				synctest.Wait()
				assert.EqualValues(t, 2*startUnheard, sent.Load(), "startUnheard more after startSilence of silence")
				assert.True(t, b.Starting(), "the first contact goes on while its server is silent")
				ctl.over.Store(false)
				b.Follow(ctl, control.Rate{}, time.Now(), time.Millisecond, rate.Inf, 1) // an answer
				time.Sleep(50 * time.Millisecond)
				synctest.Wait()
				assert.EqualValues(t, 3*startUnheard, sent.Load(), "an answer lets startUnheard more go, paced")
			}
			cancel()
			wg.Wait()
		})
	}
}
