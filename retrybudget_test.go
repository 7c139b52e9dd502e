package polite_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

func TestRetryBudgetTakeAndRefund(t *testing.T) {
	b := polite.NewRetryBudget(20)
	assert.Equal(t, 20, b.Capacity())
	assert.Equal(t, 20, b.Remaining())
	assert.True(t, b.TryTake(5))
	assert.True(t, b.TryTake(10))
	assert.False(t, b.TryTake(6), "only 5 left")
	assert.Equal(t, 5, b.Remaining(), "a refused take takes nothing")
	assert.True(t, b.TryTake(5))
	assert.False(t, b.TryTake(1))
	b.Refund(7)
	assert.Equal(t, 7, b.Remaining())
	b.Refund(100)
	assert.Equal(t, 20, b.Remaining(), "never above capacity")
	b.Refund(math.MaxInt)
	assert.Equal(t, 20, b.Remaining(), "no overflow")
	b.Refund(-3)
	b.Refund(0)
	assert.Equal(t, 20, b.Remaining())
	assert.True(t, b.TryTake(0))
	assert.True(t, b.TryTake(-1))
	assert.Equal(t, 20, b.Remaining(), "non-positive costs take nothing")
}

func TestRetryBudgetEmptyCapacities(t *testing.T) {
	for _, b := range []*polite.RetryBudget{polite.NewRetryBudget(0), polite.NewRetryBudget(-5), new(polite.RetryBudget)} {
		assert.Equal(t, 0, b.Capacity())
		assert.False(t, b.TryTake(1))
		b.Refund(10)
		assert.Equal(t, 0, b.Remaining())
	}
}

func TestRetryBudgetConcurrentTakes(t *testing.T) {
	b := polite.NewRetryBudget(500)
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 100 {
				if b.TryTake(5) {
					taken.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(100), taken.Load(), "exactly capacity/cost takes succeed")
	assert.Equal(t, 0, b.Remaining())

	for range 64 {
		wg.Go(func() {
			for range 100 {
				b.Refund(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 500, b.Remaining())
}

// The AWS SDK for Go v2's retry quota, legacy standard mode
// (shared/research/aws-adaptive-mode.md §2.5): 500 → 495 → 490 → success →
// 496 → 491 → timeout → 481 → success → 492.
func TestRetryBudgetFollowsAWSQuotaVectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := polite.NewRetryBudget(500)
		var seen []int
		hooks := polite.Hooks{OnRetry: func(e polite.Event) { seen = append(seen, e.Budget) }}
		next := newStub(status(503), status(503), status(200), status(503), fail(timeoutError{}), status(200))
		tr := polite.New(next, polite.WithRetryBudget(budget), polite.WithHooks(hooks))

		fetch(t, tr, "http://a.test/")
		assert.Equal(t, 496, budget.Remaining())

		resp, err := get(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 492, budget.Remaining())
		assert.Equal(t, []int{495, 490, 491, 481}, seen)
		assert.Same(t, budget, tr.RetryBudget())
	})
}

func TestRetryBudgetRefundsOnNonRetryableOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := polite.NewRetryBudget(500)
		require.True(t, budget.TryTake(100))
		next := newStub(status(503), status(404))
		fetch(t, polite.New(next, polite.WithRetryBudget(budget)), "http://a.test/")
		assert.Equal(t, 401, budget.Remaining(), "the retry that got a 404 gives its 5 back, plus 1")
	})
}

func TestRetryBudgetKeepsTheCostOfFailedRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := polite.NewRetryBudget(500)
		next := newStub(status(503))
		fetch(t, polite.New(next, polite.WithRetryBudget(budget)), "http://a.test/")
		assert.Equal(t, 485, budget.Remaining(), "three failed retries cost 5 each")
	})
}

func TestRetryBudgetRefundsARetryNeverSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := polite.NewRetryBudget(500)
		require.True(t, budget.TryTake(100))
		next := newStub(status(503), status(200))
		tr := polite.New(next, polite.WithRetryBudget(budget), polite.WithRate(0.5, 1), polite.WithBackoff(0, 0))
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(time.Second) // the retry waits 2s for its token
			cancel()
		}()
		_, err := get(t, ctx, tr, "http://a.test/")
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 400, budget.Remaining())
		assert.Equal(t, 1, next.calls())
	})
}

func TestEmptyBudgetStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []polite.Event
		hooks := polite.Hooks{OnBudgetExhausted: func(e polite.Event) { events = append(events, e) }}
		budget := polite.NewRetryBudget(4)
		next := newStub(status(503), status(200))
		resp, err := get(t, t.Context(), polite.New(next, polite.WithRetryBudget(budget), polite.WithHooks(hooks)), "http://a.test/")
		require.NoError(t, err, "a response was obtained: it is returned, with no error")
		assert.Equal(t, 503, resp.StatusCode)
		next.checkDiscarded(t, true)
		readBody(t, resp)
		assert.Equal(t, 1, next.calls())
		require.Len(t, events, 1)
		assert.Equal(t, 503, events[0].StatusCode)
		assert.Equal(t, 4, events[0].Budget)
	})
}

func TestEmptyBudgetWithTransportError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := errors.New("connection reset")
		next := newStub(fail(timeoutError{}), fail(cause))
		_, err := get(t, t.Context(), polite.New(next, polite.WithRetryBudget(polite.NewRetryBudget(9))), "http://a.test/")
		assert.ErrorIs(t, err, polite.ErrRetryBudgetExhausted, "a timeout retry costs 10")
		assert.ErrorAs(t, err, new(timeoutError))
		assert.Equal(t, 1, next.calls())
	})
}

func TestSharedRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := polite.NewRetryBudget(10)
		a, b := newStub(status(503)), newStub(status(503))
		ta := polite.New(a, polite.WithRetryBudget(budget))
		tb := polite.New(b, polite.WithRetryBudget(budget))
		for _, tt := range []struct {
			tr   http.RoundTripper
			next *stub
			want int
		}{{ta, a, 3}, {tb, b, 1}} {
			fetch(t, tt.tr, "http://a.test/")
			assert.Equal(t, tt.want, tt.next.calls())
		}
		assert.Equal(t, 0, budget.Remaining())
	})
}

func TestEachTransportHasItsOwnBudget(t *testing.T) {
	ta, tb := polite.New(nil), polite.New(nil)
	assert.NotSame(t, ta.RetryBudget(), tb.RetryBudget())
	assert.Equal(t, polite.DefaultRetryBudgetCapacity, ta.RetryBudget().Capacity())
	assert.NotSame(t, ta.RetryBudget(), polite.New(nil, polite.WithRetryBudget(nil)).RetryBudget())
	var none *polite.RetryBudget
	assert.Equal(t, polite.DefaultRetryBudgetCapacity, polite.New(nil, polite.WithRetryBudget(none)).RetryBudget().Capacity(),
		"a nil *RetryBudget restores the default too")
}

// Any Budget may hold a Transport's retries (a fleet's, on Redis): the
// Transport takes each retry's cost from it and gives successes back.
func TestTransportUsesAnyBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &tallyBudget{RetryBudget: polite.NewRetryBudget(7)}
		next := newStub(status(503), status(503), status(200))
		tr := polite.New(next, polite.WithRetryBudget(b))
		fetch(t, tr, "http://a.test/")
		assert.Same(t, b, tr.RetryBudget())
		assert.Equal(t, []int{5, 5}, b.taken, "two retries asked for, the second refused")
		assert.Equal(t, 2, next.calls(), "the budget held one retry")
		resp := fetch(t, tr, "http://a.test/")
		resp.Body.Close()
		assert.Equal(t, []int{1}, b.refunded, "a success gives 1 back")
	})
}

// tallyBudget is a RetryBudget that records what it is asked.
type tallyBudget struct {
	*polite.RetryBudget
	taken, refunded []int
}

func (b *tallyBudget) TryTake(cost int) bool {
	b.taken = append(b.taken, cost)
	return b.RetryBudget.TryTake(cost)
}

func (b *tallyBudget) Refund(n int) {
	b.refunded = append(b.refunded, n)
	b.RetryBudget.Refund(n)
}

// During a full outage a retrying client multiplies the load on the server
// (3–5× for naive clients). With the budget, retries stop after 100 and
// attempts ÷ calls falls to 1.1 over 1,000 calls, and further toward 1.
func TestOutageIsNotMultipliedByRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503))
		tr := polite.New(next)
		const calls = 1000
		for range calls {
			fetch(t, tr, "http://a.test/")
		}
		assert.Equal(t, calls+100, next.calls())
		assert.LessOrEqual(t, float64(next.calls())/calls, 1.1)
	})
}
