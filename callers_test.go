package polite

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/engine"
)

// okNext answers every request 200 after latency, with the headers it is
// given, and records when each request was sent.
type okNext struct {
	latency time.Duration
	header  func(n int) []string // the headers of the n-th answer, 0-based; nil for none
	start   time.Time
	mu      sync.Mutex
	sent    []time.Duration // since start
}

func (n *okNext) RoundTrip(req *http.Request) (*http.Response, error) {
	n.mu.Lock()
	i := len(n.sent)
	n.sent = append(n.sent, time.Since(n.start))
	n.mu.Unlock()
	time.Sleep(n.latency)
	var h []string
	if n.header != nil {
		h = n.header(i)
	}
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}
	for i := 0; i+1 < len(h); i += 2 {
		resp.Header.Add(h[i], h[i+1])
	}
	return resp, nil
}

func (n *okNext) sends() []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]time.Duration(nil), n.sent...)
}

// getCtx sends a GET to url through tr with ctx.
func getCtx(t *testing.T, ctx context.Context, tr *Transport, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.True(t, (resp == nil) != (err == nil), "a response or an error")
	return resp, err
}

// crowd sends calls concurrent GETs to url through tr, each with a
// deadline of its own, and returns their errors.
func crowd(t *testing.T, tr *Transport, url string, calls int, deadline time.Duration) []error {
	t.Helper()
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			resp, err := getCtx(t, ctx, tr, url)
			if err == nil {
				discard(resp)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errs
}

// refusedLocally counts the errors that are polite's refusals to wait.
func refusedLocally(errs []error) int {
	n := 0
	for _, err := range errs {
		var throttled *ThrottledError
		if errors.As(err, &throttled) {
			n++
		}
	}
	return n
}

// measured makes ks's Gentle measure the limit at perSecond (a throttle,
// a second of successes at that rate, a throttle), as its server would.
func measured(ks *engine.Key, perSecond int) {
	observe(ks, true)
	for range perSecond {
		time.Sleep(time.Second / time.Duration(perSecond))
		observe(ks, false)
	}
	observe(ks, true)
}

// A call fails locally only when its wait cannot end in time at the
// server's rate, as polite knows it: Gentle may pace far below the limit
// for a while (halving while refused), and the callers queued meanwhile
// wait for the rate to come back rather than fail at once. Where the
// server's own limit cannot serve them in time, they fail at once.
func TestWaitJudgedAtTheServersRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &okNext{latency: time.Millisecond, start: time.Now()}
		tr := New(next)
		ks := lookup(tr, "a.test")
		measured(ks, 100)
		require.InDelta(t, 100, ks.Gentle().ServerLimit(), 2)
		for range 5 { // five rounds refused after the event
			g, now := ks.Gentle(), time.Now()
			ks.Bucket().Follow(g, g.Observe(now, control.Throttled, 0, g.Sending(), 0), now, 0, rate.Inf, 1<<30)
		}
		paced := ks.Bucket().Rate()
		require.Less(t, paced, 4.0, "halved: the 16th call would wait 4 s and more at this rate")

		errs := crowd(t, tr, "http://a.test/", 16, time.Second)
		assert.Zero(t, refusedLocally(errs), "at the server's 100 a second, 16 calls fit in a second")
		for _, err := range errs {
			assert.NoError(t, err)
		}
		assert.Len(t, next.sends(), 16, "every call was sent: the first success brought the rate back")

		slow := lookup(tr, "b.test")
		measured(slow, 2)
		require.InDelta(t, 2, slow.Gentle().ServerLimit(), 0.5)
		errs = crowd(t, tr, "http://b.test/", 16, time.Second)
		assert.GreaterOrEqual(t, refusedLocally(errs), 12, "at the server's 2 a second, most of 16 calls cannot be served in a second")
	})
}

// A key with no history is paced only when its calls crowd it: a lone
// caller, one call after another, is never held; 16 callers at once send
// two, then a rate that doubles every round (20 ms at least), so that a
// server with a small burst refuses few; and all of them go within a few
// rounds.
func TestFirstContactPacesACrowdNotACaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &okNext{latency: 100 * time.Microsecond, start: time.Now()}
		tr := New(next)
		for range 50 {
			resp, err := getCtx(t, t.Context(), tr, "http://lone.test/")
			require.NoError(t, err)
			discard(resp)
		}
		lone := lookup(tr, "lone.test")
		assert.False(t, lone.Bucket().Paced(), "a lone caller: no bucket")
		sends := next.sends()
		assert.Equal(t, 50*100*time.Microsecond, sends[49]+100*time.Microsecond, "never held")

		next = &okNext{latency: 100 * time.Microsecond, start: time.Now()}
		tr = New(next)
		errs := crowd(t, tr, "http://crowd.test/", 16, 10*time.Second)
		for _, err := range errs {
			require.NoError(t, err)
		}
		sends = next.sends()
		require.Len(t, sends, 16)
		assert.Zero(t, sends[1], "two at once")
		assert.GreaterOrEqual(t, sends[2], 5*time.Millisecond, "then paced: two a round of 20 ms")
		assert.Less(t, sends[15], 100*time.Millisecond, "all within a few rounds")
	})
}

// A first contact counts the attempts it let go past its server's last
// answer, and holds the key's next ones while the server stays silent; an
// attempt that a later gate then refused (here a cost larger than the
// quota: a *CostError) was never sent, and is no silence of the server's.
// 16 such calls at once, 300 ms after the server's last answer (its round
// trip 100 ms): the next call goes at once, where it waited 7.6 s when
// they counted (16 unanswered attempts take 6 s of silence to outlive).
func TestFirstContactDoesNotCountAttemptsNeverSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &okNext{latency: 100 * time.Millisecond, start: time.Now()}
		tr := New(next, WithQuota(UnitTokens, 1000, time.Minute))
		call := func(tokens float64) error {
			resp, err := getCtx(t, ContextWithCost(t.Context(), Cost{Tokens: tokens}), tr, "http://llm.test/")
			if err == nil {
				discard(resp)
			}
			return err
		}
		var wg sync.WaitGroup
		for range 2 { // two at once: the first contact begins, and hears a round trip of 100 ms
			wg.Go(func() { assert.NoError(t, call(10)) })
		}
		wg.Wait()
		require.True(t, lookup(tr, "llm.test").Bucket().Starting(), "the first contact is on")
		for range 16 {
			wg.Go(func() {
				var ce *CostError
				assert.ErrorAs(t, call(2000), &ce, "too large for the quota: refused unsent")
			})
		}
		wg.Wait()
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		require.NoError(t, call(10))
		assert.Less(t, time.Since(start), 150*time.Millisecond, "sent at once, answered in its round trip")
		assert.Len(t, next.sends(), 3, "only the calls that fit were sent")
	})
}

// A server that states its quota on its first answers paces the key from
// the next request: the first contact ends, and a 1-second window stated
// in whole seconds (go-chi/httprate's headers) is paced from its first
// window on, where it used to be spent in a burst.
func TestStatedQuotaPacesFromTheFirstWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The fake clock starts in 2000, when a Unix reset reads as
		// seconds from now: the server lives in 2026, and says so in Date.
		const ahead = 26 * 365 * 24 * time.Hour
		start := time.Now()
		end := start.Add(ahead).Truncate(time.Second).Add(time.Second) // the window's end, as httprate states it
		next := &okNext{latency: 100 * time.Microsecond, start: start, header: func(n int) []string {
			return []string{"Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat),
				"X-RateLimit-Limit", "100", "X-RateLimit-Remaining", strconv.Itoa(max(99-n, 0)),
				"X-RateLimit-Reset", strconv.FormatInt(end.Unix(), 10)}
		}}
		tr := New(next)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for time.Since(start) < 300*time.Millisecond {
					resp, err := getCtx(t, t.Context(), tr, "http://quota.test/")
					require.NoError(t, err)
					discard(resp)
				}
			})
		}
		wg.Wait()
		sends := next.sends()
		assert.InDelta(t, 30+16, len(sends), 4, "100 a second, less 2%, for 300 ms (and the last call of each caller): not the 100 of the window at once")
		for i := 3; i < len(sends); i++ {
			assert.GreaterOrEqual(t, sends[i]-sends[i-1], 10*time.Millisecond, "paced from the third request on")
		}
	})
}

// A call that waits on polite's own caution (a rate climbing from a
// floor, the server's limit unknown) and runs out of time ends with its
// context's error: it was not refused, it was not served in time.
func TestWaitPastTheDeadlineEndsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &okNext{latency: time.Millisecond, start: time.Now()}
		tr := New(next)
		ks := lookup(tr, "a.test")
		observe(ks, true) // a first throttle: a floor of half a request a second
		require.Zero(t, ks.Gentle().ServerLimit(), "the limit is unknown")
		errs := crowd(t, tr, "http://a.test/", 4, 50*time.Millisecond)
		assert.Zero(t, refusedLocally(errs))
		late := 0
		for _, err := range errs {
			if errors.Is(err, context.DeadlineExceeded) {
				late++
			}
		}
		assert.Positive(t, late, "some ran into their deadline: %v", errs)
	})
}
