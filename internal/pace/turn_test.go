package pace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/politehttp/polite/internal/control"
)

// firstContact is a controller whose first contact paces at 100 a second,
// two at once, until it reads a throttle (or, ended, its rate outgrew any
// demand); after a throttle its rate is 1 a second, growing with time.
type firstContact struct {
	control.Controller // only StartRate and Grown are called
	over, throttled    bool
}

func (f *firstContact) StartRate(time.Time) (float64, int, bool) {
	if f.over || f.throttled {
		return 0, 0, false
	}
	return 100, 2, true
}

func (f *firstContact) Grown(time.Time) (float64, bool) { return 1, f.throttled }

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
		ctl.throttled, ctl.over = throttled, !throttled
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
