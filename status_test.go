package polite_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/politestatus"
)

// topKey returns the page's key named key; it fails the test if the page
// does not show it.
func topKey(t *testing.T, p politestatus.Page, key string) politestatus.Key {
	t.Helper()
	for _, k := range p.Top {
		if k.Key == key {
			return k
		}
	}
	require.Failf(t, "key not shown", "%q is not among %d keys shown", key, len(p.Top))
	return politestatus.Key{}
}

// A key its server paused says so, with the time the pause ends; the
// calls waiting for it are counted and shown first.
func TestStatusSaysAKeyIsPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		refusing := true
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			if refusing && r.URL.Host == "paused.test" {
				return respond(r, http.StatusTooManyRequests, http.NoBody, "Retry-After", "30"), nil
			}
			return respond(r, http.StatusOK, http.NoBody), nil
		})
		tr := polite.New(next)
		send(context.Background(), tr, "http://calm.test/")
		start := time.Now()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { send(context.Background(), tr, "http://paused.test/") })
		}
		time.Sleep(time.Second)
		synctest.Wait()
		p := tr.Status(time.Now(), 0, "")
		require.Equal(t, 2, p.Keys)
		require.Equal(t, "paused.test", p.Top[0].Key, "the key whose calls wait comes first")
		k := p.Top[0]
		until := start.Add(30 * time.Second)
		assert.Equal(t, until, k.PausedUntil)
		assert.Equal(t, 3, k.Calls, "the three calls wait for the pause's end: in line, or for their retry")
		assert.Positive(t, k.Waits())
		assert.True(t, strings.HasPrefix(k.Reason, "paused by the server's Retry-After until "+until.Local().Format("15:04:05")), k.Reason)

		mu.Lock()
		refusing = false
		mu.Unlock()
		wg.Wait()
		p = tr.Status(time.Now(), 0, "")
		k = topKey(t, p, "paused.test")
		assert.Zero(t, k.PausedUntil)
		assert.Zero(t, k.Waits())
		assert.NotContains(t, k.Reason, "paused")
	})
}

// send sends a GET of url with ctx through rt and closes the response's
// body; it returns the error, if any, for the caller to judge.
func send(ctx context.Context, rt http.RoundTripper, url string) error {
	resp, err := rt.RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, url, nil))
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// The calls waiting for a key are told by priority, the highest first.
func TestStatusTellsTheQueueByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			<-release
			return respond(r, http.StatusOK, http.NoBody), nil
		})
		tr := polite.New(next, polite.WithMaxInFlight(1))
		var wg sync.WaitGroup
		call := func(p polite.Priority) {
			wg.Go(func() { send(polite.ContextWithPriority(context.Background(), p), tr, "http://api.test/") })
		}
		call(polite.PriorityDefault) // holds the one slot
		synctest.Wait()
		for range 3 {
			call(polite.PriorityBatch)
		}
		for range 2 {
			call(polite.PriorityInteractive)
		}
		synctest.Wait()
		k := topKey(t, tr.Status(time.Now(), 0, ""), "api.test")
		assert.Equal(t, []politestatus.Waiting{{Priority: "interactive", Calls: 2}, {Priority: "batch", Calls: 3}}, k.Waiting)
		assert.Equal(t, 6, k.Calls)
		assert.True(t, strings.HasSuffix(k.Reason, "; queue of 3 batch calls behind 2 interactive ones"), k.Reason)
		close(release)
		wg.Wait()
	})
}

// A key under a server's limit is found, then held under it, and the
// page says so; its history holds a sample each second it was read, with
// the sends and refusals of each, and the last minute's counts add up to
// what the server saw.
func TestStatusHistoryOfAKeyHeldUnderItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := rate.NewLimiter(20, 1)
		var mu sync.Mutex
		var sent, refused int
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			sent++
			if !lim.Allow() {
				refused++
				return respond(r, http.StatusTooManyRequests, http.NoBody), nil
			}
			return respond(r, http.StatusOK, http.NoBody), nil
		})
		tr := polite.New(next, polite.WithMaxAttempts(1))
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					send(ctx, tr, "http://api.test/")
				}
			})
		}
		var p politestatus.Page
		var sentBefore, refusedBefore, countedSent, countedRefused int
		for i := range 90 {
			time.Sleep(time.Second)
			p = tr.Status(time.Now(), 0, "")
			k := topKey(t, p, "api.test")
			switch {
			case i == 29:
				mu.Lock()
				sentBefore, refusedBefore = sent, refused
				mu.Unlock()
			case i > 29: // the last minute's samples
				last := k.History[len(k.History)-1]
				assert.Equal(t, 1.0, last.Seconds)
				countedSent += last.Sent
				countedRefused += last.Refused
			}
		}
		stop()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		k := topKey(t, p, "api.test")
		assert.Len(t, k.History, 89, "a sample each second but the first read's")
		assert.Len(t, p.Totals, 89)
		// The server counts a request as it arrives, the key as it is
		// sent: a few in flight at each end of the minute differ.
		assert.InDelta(t, sent-sentBefore, countedSent, 4, "the sends of the last minute")
		assert.InDelta(t, refused-refusedBefore, countedRefused, 4)
		assert.Equal(t, countedSent, k.LastMinute.Sent, "the last minute is the last 60 samples")
		assert.Equal(t, countedRefused, k.LastMinute.Refused)
		assert.Equal(t, "holding", k.State)
		assert.Equal(t, "measured", k.LimitSource)
		assert.InDelta(t, 20, k.Limit, 4, "the limit it measured")
		assert.Contains(t, k.Reason, "% under the limit it measured at ")
		t.Logf("%s: %s; %d sent, %d refused in the last minute", k.Key, k.Reason, k.LastMinute.Sent, k.LastMinute.Refused)
	})
}

// The page shows the n keys that wait most, among those whose name holds
// the search; it counts the keys held and those matched; a key whose call
// polite failed in the caller's hands counts it.
func TestStatusShowsTheKeysThatWaitMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasPrefix(r.URL.Host, "busy") {
				<-release
			}
			if r.URL.Host == "refusing.test" {
				return respond(r, http.StatusTooManyRequests, http.NoBody, "Retry-After", "60"), nil
			}
			return respond(r, http.StatusOK, http.NoBody), nil
		})
		tr := polite.New(next, polite.WithMaxInFlight(1))
		var wg sync.WaitGroup
		do := func(url string, ctx context.Context) error { return send(ctx, tr, url) }
		for i := range 100 {
			require.NoError(t, do("http://quiet"+strconv.Itoa(i)+".test/", context.Background()))
		}
		for i, calls := range []int{2, 5, 3} { // busy0.test has 1 waiting, busy1.test 4, busy2.test 2
			for range calls {
				wg.Go(func() { do("http://busy"+strconv.Itoa(i)+".test/", context.Background()) })
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, do("http://refusing.test/", context.Background()), "a 429 comes back to the caller")
		var throttled *polite.ThrottledError
		require.ErrorAs(t, do("http://refusing.test/", ctx), &throttled, "a pause longer than the call's deadline fails it at once")
		synctest.Wait()

		p := tr.Status(time.Now(), 3, "")
		assert.Equal(t, 104, p.Keys)
		assert.Equal(t, 104, p.Matched)
		var names []string
		for _, k := range p.Top {
			names = append(names, k.Key)
		}
		assert.Equal(t, []string{"busy1.test", "busy2.test", "busy0.test"}, names, "the most calls waiting first")
		assert.Equal(t, 4, p.Top[0].Waits())

		p = tr.Status(time.Now(), 0, "refusing")
		assert.Equal(t, 1, p.Matched)
		require.Len(t, p.Top, 1)
		k := p.Top[0]
		assert.Equal(t, "refusing.test", k.Key)
		assert.False(t, k.PausedUntil.IsZero())
		var st polite.KeyStatus
		for s := range tr.Keys() {
			if s.Key == "refusing.test" {
				st = s
			}
		}
		assert.Equal(t, st.Sent, st.Refused, "the first call's attempts, each refused")
		assert.GreaterOrEqual(t, st.Sent, uint32(2))
		assert.Equal(t, uint32(1), st.Failed, "the second call, failed in the caller's hands")

		p = tr.Status(time.Now(), 500, "quiet")
		assert.Equal(t, 100, p.Matched)
		assert.Len(t, p.Top, 100)
		assert.Empty(t, tr.Status(time.Now(), 0, "nothing holds this").Top)
		close(release)
		wg.Wait()
	})
}

// The handler answers JSON or its page, which loads nothing from
// elsewhere; it refuses what it does not serve.
func TestStatusHandler(t *testing.T) {
	tr := polite.New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, http.StatusOK, http.NoBody, "RateLimit-Policy", `"default";q=100;w=60`, "RateLimit", `"default";r=99;t=60`), nil
	}))
	require.NoError(t, send(context.Background(), tr, "http://api.test/"))
	h := tr.StatusHandler()
	serve := func(method, target string, header ...string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, target, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, rec := range []*httptest.ResponseRecorder{serve("GET", "/?format=json"), serve("GET", "/", "Accept", "application/json")} {
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		var p politestatus.Page
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.Len(t, p.Top, 1)
		k := p.Top[0]
		assert.Equal(t, "api.test", k.Key)
		assert.Equal(t, "stated", k.LimitSource)
		require.NotNil(t, k.Quota)
		assert.InDelta(t, 99, k.Quota.Left, 1)
		assert.InDelta(t, 100.0/60, k.Limit, 1e-9)
		assert.Equal(t, "paced at 1.63/s under the server's stated limit of 1.67/s", k.Reason)
	}

	rec := serve("GET", "/", "Accept", "text/html,application/xhtml+xml")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	page := rec.Body.String()
	assert.Contains(t, page, `<table id="keys">`)
	for _, external := range []string{"http://", "https://", "src=", "href=", "@import", "url("} {
		if external == "http://" {
			page = strings.ReplaceAll(page, `"http://www.w3.org/2000/svg"`, "") // SVG's namespace, no address
		}
		assert.NotContains(t, page, external, "the page loads nothing from elsewhere")
	}
	assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'none'")

	assert.Equal(t, http.StatusBadRequest, serve("GET", "/?format=json&n=x").Code)
	assert.Equal(t, http.StatusBadRequest, serve("GET", "/?format=json&n=-1").Code)
	assert.Equal(t, http.StatusMethodNotAllowed, serve("POST", "/").Code)
}

// BenchmarkStatusPage reads the status page of a Transport holding a
// million keys (a crawler's hosts, 100 of them with calls waiting): the
// page must answer in 100 ms or less, allocating 10 MB or less (B/op).
// Run with -benchtime 10x: making the keys takes a while.
func BenchmarkStatusPage(b *testing.B) {
	for _, keys := range []int{10_000, 1_000_000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			release := make(chan struct{})
			next := okNext()
			tr := polite.New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if strings.HasPrefix(r.URL.Host, "busy") {
					<-release
				}
				return next.RoundTrip(r)
			}), polite.WithMaxInFlight(1))
			for i := range keys {
				visit(b, tr, i)
			}
			var wg sync.WaitGroup
			for i := range 100 {
				for range 3 {
					wg.Go(func() { send(context.Background(), tr, "http://busy"+strconv.Itoa(i)+".test/") })
				}
			}
			for { // until each busy key has its three calls, one sent and two waiting
				p := tr.Status(time.Now(), 100, "busy")
				if len(p.Top) == 100 && p.Top[99].Calls == 3 && p.Top[99].Waits() == 2 {
					break
				}
				runtime.Gosched()
			}
			h := tr.StatusHandler()
			req := httptest.NewRequest(http.MethodGet, "/?format=json", nil)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
			}
			b.StopTimer()
			close(release)
			wg.Wait()
		})
	}
}

// inspectingFleet is a grantFleet whose store says what it holds: state
// for the keys in held, or err.
type inspectingFleet struct {
	grantFleet
	held map[string]fleetapi.KeyState
	err  error
}

func (f *inspectingFleet) Inspect(_ context.Context, keys []string) ([]fleetapi.KeyState, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := make([]fleetapi.KeyState, len(keys))
	for i, k := range keys {
		out[i] = f.held[k]
	}
	return out, nil
}

// In a fleet whose store can say, the page shows what it holds for each
// key shown; a store that cannot answer is named once for the page.
func TestStatusShowsWhatTheFleetHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		f := &inspectingFleet{grantFleet: grantFleet{grant: fleetapi.Grant{Granted: true}}, held: map[string]fleetapi.KeyState{
			"a.test": {Known: true, Members: 3, Limit: 42, Next: now.Add(time.Second), Paused: now.Add(-time.Second)},
		}}
		tr := polite.New(newStub(status(200)), polite.WithFleet(f))
		fetch(t, tr, "http://a.test/")
		fetch(t, tr, "http://b.test/")
		p := tr.Status(time.Now(), 0, "")
		assert.Empty(t, p.FleetError)
		assert.Equal(t, &politestatus.Fleet{Known: true, Members: 3, Limit: 42, Next: now.Add(time.Second)}, topKey(t, p, "a.test").Fleet,
			"a pause over is not shown")
		assert.Equal(t, &politestatus.Fleet{}, topKey(t, p, "b.test").Fleet, "a key the store holds nothing for")

		f.err = errors.New("store down")
		p = tr.Status(time.Now(), 0, "")
		assert.Equal(t, "the fleet's store did not answer: store down", p.FleetError)
		assert.Nil(t, topKey(t, p, "a.test").Fleet)
	})
}

// The history is bounded: five minutes of samples a key, for the 64 keys
// shown last; a key shown for the first time starts its history then.
func TestStatusHistoryIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(newStub(status(200)))
		for i := range 100 {
			fetch(t, tr, "http://h"+strconv.Itoa(i)+".test/")
		}
		tr.Status(time.Now(), 100, "")
		time.Sleep(time.Second)
		p := tr.Status(time.Now(), 100, "")
		require.Len(t, p.Top, 100)
		withHistory := 0
		for _, k := range p.Top {
			if len(k.History) > 0 {
				withHistory++
			}
		}
		assert.Equal(t, 64, withHistory, "the keys whose history is kept")

		for range 400 {
			time.Sleep(time.Second)
			fetch(t, tr, "http://h0.test/")
			p = tr.Status(time.Now(), 1, "h0.test")
		}
		k := topKey(t, p, "h0.test")
		assert.Len(t, k.History, 300, "five minutes of samples")
		assert.Equal(t, 1, k.History[299].Sent)
		assert.Equal(t, politestatus.Counts{Sent: 60, Seconds: 60}, k.LastMinute)
		assert.Len(t, p.Totals, 300)
	})
}
