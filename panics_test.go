package polite_test

import (
	"context"
	"log/slog"
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

// A hook, the logger or the RoundTripper under polite may panic. The
// panic is the caller's, as it is: polite recovers none. But a caller may
// recover it (net/http's server recovers a handler's panic and goes on),
// and the Transport must then go on as well: the call that panicked lets
// go of everything it held (its place in the key's queue, its slot under
// WithMaxInFlight, its share of the server's quota, its response, its
// host's robots.txt fetch), or every later call to the key would wait for
// it forever.

// panicOnce panics with panicValue the first time it is called after
// armed is set.
type panicOnce struct{ armed atomic.Bool }

const panicValue = "a hook's panic"

func (p *panicOnce) maybe() {
	if p.armed.CompareAndSwap(true, false) {
		panic(panicValue)
	}
}

// panicHandler is a slog handler that panics where p says.
type panicHandler struct{ p *panicOnce }

func (h panicHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h panicHandler) Handle(context.Context, slog.Record) error { h.p.maybe(); return nil }
func (h panicHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h panicHandler) WithGroup(string) slog.Handler             { return h }

func TestPanicLeavesTheKeyUsable(t *testing.T) {
	for _, where := range []string{"OnAttempt", "OnThrottled", "OnRetry", "OnWait", "OnRefused", "logger", "next", "next robots.txt"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { panicScenario(t, where) })
		})
	}
}

// panicScenario: the Transport paces a key at 5 a second, one request in
// flight, with robots.txt read; the server throttles the first page
// request (a 429 with Retry-After: 2), which is retried, and reports a
// quota. Five more calls come while it is at the server, one of them with
// a deadline that its wait would pass; one panic comes from where, and one
// caller recovers it. Then six more calls, one
// after the other, must each get a 200 within 30 s, with never more than
// one request in flight at the server.
func panicScenario(t *testing.T, where string) {
	p := new(panicOnce)
	var (
		mu             sync.Mutex
		inFlight, most int
		pages          int
	)
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Path == "/robots.txt" {
			if where == "next robots.txt" {
				p.maybe()
			}
			return respond(req, http.StatusOK, newBody("User-agent: *\nAllow: /\n")), nil
		}
		if where == "next" {
			p.maybe()
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		pages++
		first := pages == 1
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		if first {
			return respond(req, http.StatusTooManyRequests, newBody("slow down"), "Retry-After", "2"), nil
		}
		return respond(req, http.StatusOK, newBody("ok"), "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "50", "X-RateLimit-Reset", "60"), nil
	})
	hook := func(name string) func(polite.Event) {
		if name != where {
			return nil
		}
		return func(polite.Event) { p.maybe() }
	}
	opts := []polite.Option{
		polite.WithRate(5, 1), polite.WithMaxInFlight(1), polite.WithCrawlDelay(true),
		polite.WithBackoff(100*time.Millisecond, time.Second),
		polite.WithHooks(polite.Hooks{
			OnAttempt: hook("OnAttempt"), OnThrottled: hook("OnThrottled"), OnRetry: hook("OnRetry"),
			OnWait: hook("OnWait"), OnRefused: hook("OnRefused"),
		}),
	}
	if where == "logger" {
		opts = append(opts, polite.WithLogger(slog.New(panicHandler{p})))
	}
	tr := polite.New(next, opts...)
	p.armed.Store(true)

	var panics atomic.Int32
	call := func(timeout time.Duration) (*http.Response, error) {
		defer func() {
			if r := recover(); r != nil {
				assert.Equal(t, panicValue, r, "the panic reaches the caller as it was")
				panics.Add(1)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/items", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			readBody(t, resp)
		}
		return resp, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = call(30 * time.Second) }) // the throttled one, retried
	synctest.Wait()                                 // its first attempt is at the server
	for range 4 {
		wg.Go(func() { _, _ = call(30 * time.Second) })
	}
	// Last in the key's queue, behind four turns of 200 ms: refused at
	// once, its wait past its deadline. (Started with the others, it could
	// be first in the queue, its turn within its deadline, and then end at
	// its deadline, refused by nothing: 3 to 6 runs in 200 under -race.)
	synctest.Wait()
	wg.Go(func() { _, _ = call(300 * time.Millisecond) })
	wg.Wait()
	require.EqualValues(t, 1, panics.Load(), "the panic from %s reached one caller", where)

	for i := range 6 {
		start := time.Now()
		resp, err := call(30 * time.Second)
		require.NoError(t, err, "call %d after the panic", i)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Less(t, time.Since(start), 30*time.Second)
	}
	assert.Equal(t, 1, most, "requests in flight at once, capped at 1")
	t.Logf("%s: %d pages requested", where, pages)
}
