package polite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// instantOK answers every request at once with 200 and an empty body.
var instantOK = roundTripFunc(func(r *http.Request) (*http.Response, error) {
	return respond(r, http.StatusOK, http.NoBody), nil
})

// sendLog is a next that answers every request as instantOK does and
// keeps the path of each, in the order they were sent.
type sendLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *sendLog) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.paths = append(l.paths, r.URL.Path)
	l.mu.Unlock()
	return instantOK(r)
}

// sent returns the paths sent so far.
func (l *sendLog) sent() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.paths)
}

// getPath sends a GET of path on api.test through rt with ctx, and reads
// and closes the body of its answer.
func getPath(t *testing.T, rt http.RoundTripper, ctx context.Context, path string) error {
	resp, err := get(t, ctx, rt, "http://api.test"+path)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// An interactive call waits behind no backlog of batch calls: at 100 a
// second, 1,000 batch calls queued (10 s of work), an interactive call
// every 250 ms goes within one interval of the limit (10 ms) plus 10 ms,
// where first come, first served it waited behind all of them; the batch
// calls go on meanwhile, in their order of arrival, and the key's rate is
// used whole.
func TestAnInteractiveCallWaitsBehindNoBatchBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &sendLog{}
		tr := polite.New(next, polite.WithRate(100, 1), polite.WithAdaptive(polite.AdaptiveOff))
		get := func(ctx context.Context, path string) error { return getPath(t, tr, ctx, path) }
		batch := polite.ContextWithPriority(t.Context(), polite.PriorityBatch)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 1000 {
			wg.Go(func() { assert.NoError(t, get(batch, "/batch")) })
			if i%50 == 49 {
				synctest.Wait() // queued in this order
			}
		}
		synctest.Wait()
		interactive := polite.ContextWithPriority(t.Context(), polite.PriorityInteractive)
		var waits []time.Duration
		for range 12 {
			time.Sleep(250 * time.Millisecond)
			sent := time.Now()
			require.NoError(t, get(interactive, "/interactive"))
			waits = append(waits, time.Since(sent))
		}
		// A call of the default priority goes after the interactive ones,
		// before the batch.
		sent := time.Now()
		require.NoError(t, get(t.Context(), "/default"))
		assert.LessOrEqual(t, time.Since(sent), 20*time.Millisecond, "the default priority, ahead of the batch")
		wg.Wait()
		elapsed := time.Since(start)
		assert.LessOrEqual(t, slices.Max(waits), 20*time.Millisecond, "interactive waits %v", waits)
		order := next.sent()
		assert.Len(t, order, 1013)
		assert.InDelta(t, 10.13, elapsed.Seconds(), 0.05, "the rate used whole")
		assert.Equal(t, 12, strings.Count(strings.Join(order[:600], " "), "/interactive"), "the interactive calls went within the backlog's first 6 s")
	})
}

// A call is refused at once for its deadline by its place in the order of
// priority: behind a backlog of batch calls (2 s of work at 100 a
// second), an interactive call with 50 ms left goes; a batch call with as
// little is refused at once, for the wait it would have.
func TestADeadlineIsJudgedByThePlaceInThePriorityOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(instantOK, polite.WithRate(100, 1), polite.WithAdaptive(polite.AdaptiveOff))
		get := func(ctx context.Context) error { return getPath(t, tr, ctx, "/") }
		var wg sync.WaitGroup
		batch := polite.ContextWithPriority(t.Context(), polite.PriorityBatch)
		for range 200 {
			wg.Go(func() { assert.NoError(t, get(batch)) })
		}
		synctest.Wait()

		ctx, cancel := context.WithTimeout(polite.ContextWithPriority(t.Context(), polite.PriorityInteractive), 50*time.Millisecond)
		assert.NoError(t, get(ctx), "first in line among the waiting")
		cancel()

		ctx, cancel = context.WithTimeout(batch, 50*time.Millisecond)
		sent := time.Now()
		err := get(ctx)
		cancel()
		var te *polite.ThrottledError
		require.True(t, errors.As(err, &te), "refused for its wait: %v", err)
		assert.Zero(t, time.Since(sent), "at once")
		assert.Greater(t, te.Wait, time.Second, "the wait behind the backlog")
		wg.Wait()
	})
}

// A priority comes from the call's context, or else from WithPriority's
// function of the request, or else it is PriorityDefault; the classes
// print by name.
func TestPriorityOfARequest(t *testing.T) {
	p, ok := polite.PriorityFromContext(polite.ContextWithPriority(t.Context(), polite.PriorityBatch))
	assert.True(t, ok)
	assert.Equal(t, polite.PriorityBatch, p)
	_, ok = polite.PriorityFromContext(t.Context())
	assert.False(t, ok)
	both := polite.ContextWithTenant(polite.ContextWithPriority(t.Context(), polite.PriorityBatch), "acme")
	both = polite.ContextWithPriority(both, polite.PriorityCritical) // the innermost wins
	p, ok = polite.PriorityFromContext(both)
	assert.True(t, ok)
	assert.Equal(t, polite.PriorityCritical, p)
	tenant, ok := polite.TenantFromContext(both)
	assert.True(t, ok)
	assert.Equal(t, "acme", tenant, "each kept beside the other")
	_, ok = polite.TenantFromContext(polite.ContextWithPriority(t.Context(), polite.PriorityBatch))
	assert.False(t, ok)
	assert.Equal(t, "interactive", polite.PriorityInteractive.String())
	assert.Equal(t, "Priority(7)", polite.Priority(7).String())
	assert.Less(t, polite.PriorityBackground, polite.PriorityBatch)
	assert.Less(t, polite.PriorityBatch, polite.PriorityDefault)
	assert.Less(t, polite.PriorityDefault, polite.PriorityInteractive)
	assert.Less(t, polite.PriorityInteractive, polite.PriorityCritical)
}

// An SDK gives its calls a priority by their kind, and a caller raises
// one call above it: where calls to the API wait, this one goes first.
func ExampleContextWithPriority() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	client := &http.Client{Transport: polite.New(nil,
		polite.WithPriority(func(r *http.Request) polite.Priority {
			if strings.HasPrefix(r.URL.Path, "/sync/") {
				return polite.PriorityBatch // the nightly sync waits for the rest
			}
			return polite.PriorityDefault
		}),
	)}
	ctx := polite.ContextWithPriority(context.Background(), polite.PriorityInteractive) // a person waits on this one
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/me", nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// A service shares one API key between its users' requests and a sync
// job: while both wait, the users' calls take three turns in four and the
// sync one (weights 3:1, not strict order); the background refetch keeps
// a twentieth of the turns under any load of the others.
func ExampleWithPriorityWeight() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	client := &http.Client{Transport: polite.New(nil,
		polite.WithPriorityWeight(polite.PriorityInteractive, 3),
		polite.WithPriorityWeight(polite.PriorityBatch, 1),
		polite.WithPriorityFloor(polite.PriorityBackground, 0.05),
	)}
	for _, p := range []polite.Priority{polite.PriorityInteractive, polite.PriorityBatch} {
		ctx := polite.ContextWithPriority(context.Background(), p)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			fmt.Println(p, resp.Status)
		}
	}
	// Output:
	// interactive 200 OK
	// batch 200 OK
}

// No priority starves: under a backlog of interactive calls that takes
// the key's whole rate, the batch calls waiting keep a tenth of it (the
// floor), and the rate is used whole. WithPriorityFloor sets another
// floor, or none; WithPriorityWeight shares by weight.
func TestALowerPriorityKeepsItsFloor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []polite.Option
		batch int
	}{
		{"the default floor, a tenth", nil, 40},
		{"a floor of a quarter", []polite.Option{polite.WithPriorityFloor(polite.PriorityBatch, 0.25)}, 100},
		{"strict", []polite.Option{polite.WithPriorityFloor(polite.PriorityBatch, 0)}, 1},
		{"weights 3:1", []polite.Option{polite.WithPriorityWeight(polite.PriorityInteractive, 3), polite.WithPriorityWeight(polite.PriorityBatch, 1)}, 100},
		{"weights 1:1", []polite.Option{polite.WithPriorityWeight(polite.PriorityInteractive, 1), polite.WithPriorityWeight(polite.PriorityBatch, 1)}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := &sendLog{}
				tr := polite.New(next, append([]polite.Option{polite.WithRate(100, 1), polite.WithAdaptive(polite.AdaptiveOff)}, tc.opts...)...)
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				for _, kind := range []struct {
					path string
					p    polite.Priority
				}{{"/batch", polite.PriorityBatch}, {"/interactive", polite.PriorityInteractive}} {
					for range 500 {
						wg.Go(func() { _ = getPath(t, tr, polite.ContextWithPriority(ctx, kind.p), kind.path) })
					}
					synctest.Wait()
				}
				time.Sleep(4 * time.Second)
				got := map[string]int{}
				for _, path := range next.sent() {
					got[path]++
				}
				cancel()
				wg.Wait()
				assert.InDelta(t, 400, got["/batch"]+got["/interactive"], 2, "the rate used whole: %v", got)
				// (The first batch call went before the interactive ones came.)
				assert.InDelta(t, tc.batch, got["/batch"], 2, "batch's share: %v", got)
			})
		})
	}
}

// Events say the call's priority and tenant; the log names a priority
// other than the default, and never the tenant (a customer's name, it
// may be).
func TestEventsSayThePriorityAndTheTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var waits []polite.Priority
		var tenants []string
		var log strings.Builder
		tr := polite.New(instantOK, polite.WithRate(10, 1), polite.WithAdaptive(polite.AdaptiveOff),
			polite.WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))),
			polite.WithHooks(polite.Hooks{OnWait: func(e polite.Event) {
				mu.Lock()
				waits = append(waits, e.Priority)
				tenants = append(tenants, e.Tenant)
				mu.Unlock()
			}}))
		require.NoError(t, getPath(t, tr, t.Context(), "/"))
		require.NoError(t, getPath(t, tr, polite.ContextWithPriority(t.Context(), polite.PriorityBatch), "/"))
		require.NoError(t, getPath(t, tr, polite.ContextWithTenant(t.Context(), "acme-corp"), "/"))
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []polite.Priority{polite.PriorityBatch, polite.PriorityDefault}, waits)
		assert.Equal(t, []string{"", "acme-corp"}, tenants)
		assert.NotContains(t, log.String(), "acme")
		assert.Contains(t, log.String(), "priority=batch")
		assert.Equal(t, 1, strings.Count(log.String(), "priority="), "the default is not logged")
	})
}

// Tenants of one priority share a key's rate by their weights while all
// have calls waiting (1:2:5 at 100 a second: 12.5, 25 and 62.5 a second,
// each within 5%), and once one has none, the others take its share at
// once, by their weights.
func TestTenantsShareAKeyByTheirWeights(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &sendLog{} // the tenant of each send ("/a"), one per interval of the rate
		weights := map[string]float64{"a": 1, "b": 2, "c": 5}
		tr := polite.New(next, polite.WithRate(100, 1), polite.WithAdaptive(polite.AdaptiveOff),
			polite.WithTenantWeight(func(tenant string) float64 { return weights[tenant] }))
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, tenant := range []string{"a", "b", "c"} {
			calls := 1000
			if tenant == "c" {
				calls = 375 // 6 s of its share
			}
			for range calls {
				wg.Go(func() { _ = getPath(t, tr, polite.ContextWithTenant(ctx, tenant), "/"+tenant) })
			}
			synctest.Wait()
		}
		time.Sleep(9 * time.Second)
		got := next.sent()
		cancel()
		wg.Wait()
		require.GreaterOrEqual(t, len(got), 900)
		count := func(from, to int) map[string]int {
			n := map[string]int{}
			for _, path := range got[from:to] {
				n[path[1:]]++
			}
			return n
		}
		first := count(0, 600) // the first 6 s
		t.Logf("the first 6 s: %v; from 6.5 to 9 s: %v", first, count(650, 900))
		for tenant, w := range weights {
			assert.InDelta(t, 600*w/8, first[tenant], 0.05*600*w/8, "%s, weight %v", tenant, w)
		}
		after := count(650, 900) // c had none left
		assert.Zero(t, after["c"])
		assert.InDelta(t, 250.0/3, after["a"], 0.05*250/3, "a takes a third of c's share")
		assert.InDelta(t, 500.0/3, after["b"], 0.05*500/3, "b two thirds")
	})
}

// On a quota in tokens, tenants share the tokens, not the calls: a
// tenant whose calls cost ten times another's gets a tenth as many calls
// through, the same tokens. By calls, it took ten elevenths of them.
func TestTenantsShareTheTokensOfACostQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		tokens := map[string]float64{} // sent after the bucket's first 10,000, which go by arrival
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) >= time.Second {
				mu.Lock()
				tokens[r.URL.Path] += map[string]float64{"/large": 1000, "/small": 100}[r.URL.Path]
				mu.Unlock()
			}
			return instantOK(r)
		})
		tr := polite.New(next, polite.WithQuota(polite.UnitTokens, 10000, time.Second), polite.WithAdaptive(polite.AdaptiveOff))
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, tenant := range []struct {
			path   string
			tokens float64
		}{{"/large", 1000}, {"/small", 100}} {
			tctx := polite.ContextWithCost(polite.ContextWithTenant(ctx, tenant.path), polite.Cost{Tokens: tenant.tokens})
			for range 500 {
				wg.Go(func() { _ = getPath(t, tr, tctx, tenant.path) })
			}
		}
		time.Sleep(5 * time.Second)
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("tokens from 1 to 5 s: %v", tokens)
		assert.InDelta(t, 40000, tokens["/large"]+tokens["/small"], 1000, "the quota used whole")
		assert.InDelta(t, 0.5, tokens["/large"]/(tokens["/large"]+tokens["/small"]), 0.05, "each tenant half the tokens")
	})
}

// WithPriority gives each request a default by what it is; a priority in
// its context wins over it.
func TestWithPriorityGivesADefaultByRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(instantOK, polite.WithRate(100, 1), polite.WithAdaptive(polite.AdaptiveOff),
			polite.WithPriority(func(r *http.Request) polite.Priority {
				if strings.HasPrefix(r.URL.Path, "/sync/") {
					return polite.PriorityBatch
				}
				return polite.PriorityDefault
			}))
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() { assert.NoError(t, getPath(t, tr, t.Context(), "/sync/page")) })
		}
		synctest.Wait()
		sent := time.Now()
		require.NoError(t, getPath(t, tr, t.Context(), "/v1/me"))
		assert.LessOrEqual(t, time.Since(sent), 20*time.Millisecond, "the default, ahead of the sync's batch")
		sent = time.Now()
		require.NoError(t, getPath(t, tr, polite.ContextWithPriority(t.Context(), polite.PriorityBackground), "/v1/me"))
		// Its context's background: behind the batch still waiting, but
		// for its floor (a turn in ten).
		assert.Equal(t, 110*time.Millisecond, time.Since(sent), "its context's background: behind the batch, but for its floor")
		wg.Wait()
	})
}

// The calls that find the server's stated quota spent wait for its renewal
// in line by priority: at the reset, an interactive call that came last
// goes first, where they used to wake together and take the new window's
// places in whatever order the scheduler ran them.
func TestASpentQuotaRenewsInThePriorityOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := &windowedQuota{start: time.Now(), window: time.Second, limit: 10}
		tr := polite.New(server)
		for range 10 { // the first window, spent
			require.NoError(t, getPath(t, tr, t.Context(), "/first"))
		}
		time.Sleep(time.Until(server.start.Add(time.Second))) // renewed whole: a window's count, seen so
		for range 10 {
			require.NoError(t, getPath(t, tr, t.Context(), "/first"))
		}
		wait := interactiveBehindBatch(t, tr, 30, 0)
		order := server.accepted()
		require.Len(t, order, 51)
		assert.Equal(t, "/interactive", order[20], "the first of the renewed window: %v", order)
		assert.Less(t, wait, time.Second, "within the renewal")
	})
}

// A stated quota paced within its window (not spent) lets its calls go one
// spacing apart, and an interactive call that comes behind a batch
// backlog takes the next: the calls waiting for their spacing wait in
// line, and only the head takes a place, when its turn has come. They
// used to each book an instant as they came, and an interactive call
// booked behind the whole backlog (3.7 s behind 36 here).
func TestAPacedQuotaLetsAHigherPriorityGoNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := &windowedQuota{start: time.Now(), window: 10 * time.Second, limit: 100}
		tr := polite.New(server)
		for range 5 { // the quota read
			require.NoError(t, getPath(t, tr, t.Context(), "/first"))
		}
		wait := interactiveBehindBatch(t, tr, 40, 500*time.Millisecond)
		order := server.accepted()
		require.Len(t, order, 46, "none refused")
		assert.NotEqual(t, "/interactive", order[len(order)-1], "ahead of the batch still waiting: %v", order)
		// One spacing at most: what is left (95 of 100) spread over the
		// window's 9.5 s left, less the margin, is about 0.11 s apart.
		assert.LessOrEqual(t, wait, 150*time.Millisecond, "within one spacing of the quota")
	})
}

// An exact window (WithWindow) lets an interactive call that comes behind
// a batch backlog go at its next place: its calls wait in line too, and
// only the head books, once its place has come. Each used to book an
// instant as it came, and the interactive call booked behind the backlog
// (3.7 s here, where its place came in 0.5 s).
func TestAWindowLetsAHigherPriorityGoNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &sendLog{}
		tr := polite.New(next, polite.WithWindow(10, time.Second), polite.WithAdaptive(polite.AdaptiveOff))
		wait := interactiveBehindBatch(t, tr, 40, 500*time.Millisecond)
		sent := next.sent()
		require.Len(t, sent, 41)
		// The first ten went at once; the interactive call, half a second
		// on, takes the first place of the next window.
		assert.Equal(t, "/interactive", sent[10], "the first of the next window's places: %v", sent)
		assert.LessOrEqual(t, wait, 600*time.Millisecond, "at the window's turn")
	})
}

// interactiveBehindBatch starts n batch calls through tr, sends an
// interactive call after, once they all wait, and returns how long it
// waited; it returns once every call is done.
func interactiveBehindBatch(t *testing.T, tr http.RoundTripper, n int, after time.Duration) time.Duration {
	t.Helper()
	var wg sync.WaitGroup
	batch := polite.ContextWithPriority(t.Context(), polite.PriorityBatch)
	for range n {
		wg.Go(func() { assert.NoError(t, getPath(t, tr, batch, "/batch")) })
	}
	time.Sleep(after)
	synctest.Wait()
	sent := time.Now()
	require.NoError(t, getPath(t, tr, polite.ContextWithPriority(t.Context(), polite.PriorityInteractive), "/interactive"))
	wait := time.Since(sent)
	wg.Wait()
	return wait
}

// windowedQuota is a server whose quota of limit calls renews whole every
// window from start, and says so in the IETF RateLimit fields (the reset
// in seconds to the window's end, rounded up), a millisecond after each
// call (no two answers read at one instant); it refuses the calls past
// the limit, and records the paths of those it accepts.
type windowedQuota struct {
	start        time.Time
	window       time.Duration
	limit        int
	mu           sync.Mutex
	used, opened int
	order        []string
}

func (s *windowedQuota) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	since := time.Since(s.start)
	if w := int(since / s.window); w != s.opened {
		s.opened, s.used = w, 0
	}
	status := http.StatusOK
	if s.used >= s.limit {
		status = http.StatusTooManyRequests
	} else {
		s.used++
		s.order = append(s.order, r.URL.Path)
	}
	resp := respond(r, status, http.NoBody)
	resp.Header = http.Header{}
	resp.Header.Set("RateLimit-Limit", fmt.Sprint(s.limit))
	resp.Header.Set("RateLimit-Remaining", fmt.Sprint(s.limit-s.used))
	end := time.Duration(s.opened+1) * s.window
	resp.Header.Set("RateLimit-Reset", fmt.Sprint(int((end-since+time.Second-1)/time.Second)))
	return resp, nil
}

func (s *windowedQuota) accepted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// A key's status says how many of its calls wait, by priority, highest
// first, whatever line they wait in (the key's pacing, its window, the
// server's quota, a place in flight), and nothing once they are gone. Calls pay
// nothing for it: it is counted when the status is read.
func TestKeysSayHowManyCallsWaitByPriority(t *testing.T) {
	// Each case makes a Transport and the calls that leave the next ones
	// waiting, and returns what lets them go.
	holdFirst := func(opts ...polite.Option) func(t *testing.T) (http.RoundTripper, func()) {
		return func(t *testing.T) (http.RoundTripper, func()) {
			tr := polite.New(instantOK, opts...)
			first, err := get(t, t.Context(), tr, "http://api.test/first") // takes the token, or holds the place
			require.NoError(t, err)
			return tr, func() {
				_, _ = io.Copy(io.Discard, first.Body)
				require.NoError(t, first.Body.Close())
			}
		}
	}
	for _, c := range []struct {
		name string
		hold func(t *testing.T) (http.RoundTripper, func())
	}{
		{"paced", holdFirst(polite.WithRate(1, 1), polite.WithAdaptive(polite.AdaptiveOff))},
		{"in flight", holdFirst(polite.WithMaxInFlight(1))},
		{"window", holdFirst(polite.WithWindow(1, time.Second), polite.WithAdaptive(polite.AdaptiveOff))},
		{"quota", func(t *testing.T) (http.RoundTripper, func()) {
			tr := polite.New(&windowedQuota{start: time.Now(), window: 10 * time.Second, limit: 100})
			for range 5 { // the quota read: its calls go a spacing apart
				require.NoError(t, getPath(t, tr, t.Context(), "/first"))
			}
			return tr, func() {}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr, release := c.hold(t)
				waiting := func() []polite.PriorityCount {
					for ks := range tr.(*polite.Transport).Keys() {
						if ks.Key == "api.test" {
							return ks.Waiting
						}
					}
					return nil
				}
				assert.Nil(t, waiting(), "none waits")
				var wg sync.WaitGroup
				for _, p := range []polite.Priority{polite.PriorityBatch, polite.PriorityInteractive, polite.PriorityBatch,
					polite.PriorityDefault, polite.PriorityBatch, polite.PriorityInteractive} {
					ctx := polite.ContextWithTenant(polite.ContextWithPriority(t.Context(), p), "acme")
					wg.Go(func() { assert.NoError(t, getPath(t, tr, ctx, "/")) })
				}
				synctest.Wait()
				assert.Equal(t, []polite.PriorityCount{
					{Priority: polite.PriorityInteractive, Calls: 2},
					{Priority: polite.PriorityDefault, Calls: 1},
					{Priority: polite.PriorityBatch, Calls: 3},
				}, waiting())
				release()
				wg.Wait()
				assert.Nil(t, waiting(), "all gone")
			})
		})
	}
}
