package polite_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// downFleet is a Fleet whose store cannot be asked.
type downFleet struct {
	size   int
	asked  atomic.Int64
	paused atomic.Int64
}

var errDown = errors.New("store down")

func (f *downFleet) Reserve(context.Context, string, polite.FleetRequest) (polite.FleetGrant, error) {
	f.asked.Add(1)
	return polite.FleetGrant{}, errDown
}

func (f *downFleet) Pause(context.Context, string, time.Duration, polite.FleetRequest) error {
	f.paused.Add(1)
	return errDown
}

func (f *downFleet) Size() int { return f.size }

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
