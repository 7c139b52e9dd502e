package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
)

// Costs are booked with the sends, on Redis's clock, as a bucket of the
// quota's limit refilled at its rate: a send whose cost the bucket does
// not hold waits for it, behind the bookings before it; what a send gives
// back comes back to the bucket, and a bound the server's answers set
// empties it down to that.
func TestReserveBooksCosts(t *testing.T) {
	f := newFleet(t, newClient(t, sharedAddr(t)), fleet.WithNamespace(uniqueNamespace(t)))
	warm(t, f)
	cost := func(amount float64) fleetapi.Request {
		// 1,000 tokens a second, the bucket holding 1,000.
		return fleetapi.Request{MaxWait: -1, Costs: []fleetapi.Cost{{Unit: polite.UnitTokens, Amount: amount, Limit: 1000, Per: time.Second}}}
	}
	book := func(amount float64) time.Duration {
		t.Helper()
		g, err := f.Reserve(ctx, "llm.example", cost(amount))
		require.NoError(t, err)
		require.True(t, g.Granted)
		return g.Wait
	}
	jitter := float64(15 * time.Millisecond)
	assert.Zero(t, book(900), "the bucket held it")
	// The bucket refills from 100 ms after the first send's slot, the time
	// allowed for the send to reach the server, whose bucket stays full
	// until then: 400 more at 1,000 a second, and those 100 ms.
	assert.InDelta(t, float64(500*time.Millisecond), float64(book(500)), jitter, "400 more, at 1,000 a second, after the first send's transit")
	assert.InDelta(t, float64(800*time.Millisecond), float64(book(300)), jitter, "behind the one before")

	// 600 given back: the last booking's slot comes 600 ms sooner.
	f.Adjust("llm.example", []fleetapi.Adjust{{Unit: polite.UnitTokens, Limit: 1000, Per: time.Second, GiveBack: 600}})
	require.Eventually(t, func() bool { return fleet.CostsTold(f) }, time.Second, time.Millisecond)
	assert.InDelta(t, float64(200*time.Millisecond), float64(book(0.001)), jitter)

	// 400 ms on (the bucket holds 200 by its count), the server says 100
	// are left: a booking of 600 waits 0.5 s (0.4 s by the bucket's count).
	time.Sleep(400 * time.Millisecond)
	f.Adjust("llm.example", []fleetapi.Adjust{{Unit: polite.UnitTokens, Limit: 1000, Per: time.Second, AtMost: 100, Bounded: true}})
	require.Eventually(t, func() bool { return fleet.CostsTold(f) }, time.Second, time.Millisecond)
	assert.InDelta(t, float64(500*time.Millisecond), float64(book(600)), jitter)
}

// A bound the server read before sends the fleet booked holds less what
// they took, which it had not counted: at 1,000 tokens a second, 900
// booked (the first 100 ms after its slot, see TestReserveBooksCosts),
// the server's reading of 500 left, made before them, leaves -400, and
// the next 100 wait 0.5 s; read after them, or at no moment told, the
// bound is above what the bucket holds, and they wait 0.1 s.
func TestBoundReadBeforeBookingsHoldsLessThem(t *testing.T) {
	addr := sharedAddr(t)
	wait := func(read func(before time.Time) time.Time) time.Duration {
		t.Helper()
		f := newFleet(t, newClient(t, addr), fleet.WithNamespace(uniqueNamespace(t)))
		warm(t, f)
		book := func(amount float64) time.Duration {
			t.Helper()
			g, err := f.Reserve(ctx, "llm.example", fleetapi.Request{MaxWait: -1, Costs: []fleetapi.Cost{{Unit: polite.UnitTokens, Amount: amount, Limit: 1000, Per: time.Second}}})
			require.NoError(t, err)
			require.True(t, g.Granted)
			return g.Wait
		}
		before := time.Now()
		require.Zero(t, book(600))
		require.Zero(t, book(300))
		f.Adjust("llm.example", []fleetapi.Adjust{{Unit: polite.UnitTokens, Limit: 1000, Per: time.Second, AtMost: 500, Bounded: true, Read: read(before)}})
		require.Eventually(t, func() bool { return fleet.CostsTold(f) }, time.Second, time.Millisecond)
		return book(100)
	}
	jitter := float64(15 * time.Millisecond)
	assert.InDelta(t, float64(500*time.Millisecond), float64(wait(func(before time.Time) time.Time { return before.Add(-5 * time.Millisecond) })), jitter, "read before both")
	assert.InDelta(t, float64(100*time.Millisecond), float64(wait(func(time.Time) time.Time { return time.Now() })), jitter, "read after both")
	assert.InDelta(t, float64(100*time.Millisecond), float64(wait(func(time.Time) time.Time { return time.Time{} })), jitter, "read at no moment told")
}

// tokenServer is a server with a bucket of tokens, as an LLM API keeps:
// it admits a request when the bucket holds its estimate (X-Estimate),
// charges it, answers after latency, and gives back what the request did
// not use (X-Actual), stating its quota in OpenAI's headers.
type tokenServer struct {
	capacity, rate float64 // tokens, and tokens a second
	latency        time.Duration

	mu                sync.Mutex
	level             float64
	at                time.Time
	from, to          time.Time // the measured window
	billed            float64   // the actual tokens of the requests admitted in the window
	attempts, refused int
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	est, _ := strconv.ParseFloat(r.Header.Get("X-Estimate"), 64)
	actual, _ := strconv.ParseFloat(r.Header.Get("X-Actual"), 64)
	s.mu.Lock()
	now := time.Now()
	if s.at.IsZero() {
		s.level, s.at = s.capacity, now
	}
	s.level = math.Min(s.capacity, s.level+s.rate*now.Sub(s.at).Seconds())
	s.at = now
	in := !now.Before(s.from) && now.Before(s.to)
	if in {
		s.attempts++
	}
	admitted := s.level >= est
	if admitted {
		s.level -= est
		if in {
			s.billed += actual
		}
	} else if in {
		s.refused++
	}
	h := w.Header()
	h.Set("x-ratelimit-limit-tokens", strconv.FormatFloat(s.capacity, 'f', 0, 64))
	h.Set("x-ratelimit-remaining-tokens", strconv.FormatFloat(math.Floor(s.level), 'f', 0, 64))
	h.Set("x-ratelimit-reset-tokens", (time.Duration((s.capacity - s.level) / s.rate * float64(time.Second))).Round(time.Millisecond).String())
	wait := time.Duration((est - s.level) / s.rate * float64(time.Second))
	s.mu.Unlock()
	if !admitted {
		h.Set("retry-after-ms", strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	time.Sleep(s.latency)
	s.mu.Lock()
	s.level = math.Min(s.capacity, s.level+s.rate*time.Since(s.at).Seconds()+est-actual)
	s.at = time.Now()
	s.mu.Unlock()
	fmt.Fprintf(w, `{"usage":{"total_tokens":%.0f}}`, actual)
}

// costOfHeaders estimates a request by its X-Estimate header.
func costOfHeaders(req *http.Request, _ []byte) (polite.Cost, string, error) {
	est, err := strconv.ParseFloat(req.Header.Get("X-Estimate"), 64)
	return polite.Cost{Tokens: est}, "", err
}

// usageOfTotal reads the total tokens of the answer.
func usageOfTotal(_ *http.Response, tail []byte) (polite.Usage, bool) {
	var v struct {
		Usage struct {
			Total float64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(tail, &v) != nil {
		return polite.Usage{}, false
	}
	return polite.Usage{Cost: polite.Cost{Tokens: v.Usage.Total}}, true
}

// Four processes (Transports, each with its own Redis client) send to one
// server that counts tokens, 2,000 a second, learnt from its headers:
// booked through Redis, their costs keep to the bucket together, with
// what each answer did not use given back, and the server refuses next to
// nothing (0.975-1.012 of the quota, 0% refused, in 25 runs of 25 on
// 2026-12-06). It had been refused 2-15% in about one run of ten: the
// first sends, gone before the quota was known, are not booked, and each
// bound the server's answers set Redis's bucket to forgot the sends
// booked ahead of it, so that the bucket never came down to the server's
// (see TestBoundReadBeforeBookingsHoldsLessThem). Each
// process pacing its costs alone, from what the server says, is refused
// far more (10-30%: their controllers slow down for one another from the
// throttles, but no process sees what the others take). Under the race
// detector, Redis's answers take longer than the default timeout allows
// a healthy Redis, as in manyKeys.run (beside 8 busy loops on 2 cores,
// every process fell back to local pacing for 5-150 ms, 0.3 s into a run):
// a fallback within the measured seconds would count as sharing's
// refusals, where each process alone is refused a fifth of the time. Each
// fallback is logged.
func TestFleetSharesATokenQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("short: two runs of four Transports for 5 s in real time")
	}
	run := func(t *testing.T, shared bool) (use, refused float64) {
		srv := &tokenServer{capacity: 2000, rate: 2000, latency: 100 * time.Millisecond}
		start := time.Now()
		srv.from, srv.to = start.Add(time.Second), start.Add(5*time.Second)
		hs := httptest.NewServer(srv)
		defer hs.Close()
		addr, ns := sharedAddr(t), uniqueNamespace(t)
		var wg sync.WaitGroup
		for p := range 4 {
			opts := []polite.Option{polite.WithCost(costOfHeaders), polite.WithUsage(usageOfTotal)}
			if shared {
				timeout := fleet.DefaultTimeout
				if raceDetector {
					timeout = 5 * fleet.DefaultTimeout
				}
				f := newFleet(t, newClient(t, addr), fleet.WithNamespace(ns), fleet.WithMember(fmt.Sprint("p", p)),
					fleet.WithTimeout(timeout),
					fleet.WithOnChange(func(available bool, err error) {
						t.Logf("p%d at %v: shared pacing %v (%v)", p, time.Since(start).Round(time.Millisecond), available, err)
					}))
				// A call that goes alone with the breaker closed (its
				// round trip late while Redis answers others) is logged
				// too: the first of each second.
				var logged atomic.Int64
				f.Observe(fleet.Observer{OnFallback: func(op string, err error) {
					if s := int64(time.Since(start) / time.Second); logged.Swap(s+1) != s+1 {
						t.Logf("p%d at %v: %s alone (%v)", p, time.Since(start).Round(time.Millisecond), op, err)
					}
				}})
				opts = append(opts, polite.WithFleet(f))
			}
			tr := polite.New(http.DefaultTransport.(*http.Transport).Clone(), opts...)
			defer tr.CloseIdleConnections()
			defer func() {
				// What each process made of the quota, for a failure's
				// log.
				for ks := range tr.Keys() {
					t.Logf("p%d (shared %v) at the end: %s costs %+v", p, shared, ks.Key, ks.Costs)
				}
			}()
			for range 4 {
				wg.Go(func() {
					for time.Now().Before(srv.to) {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat", nil)
						req.Header.Set("X-Estimate", "200")
						req.Header.Set("X-Actual", "150")
						resp, err := tr.RoundTrip(req)
						if err != nil {
							cancel()
							t.Errorf("a call failed (shared %v, at %v): %v", shared, time.Since(start).Round(time.Millisecond), err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						cancel()
					}
				})
			}
		}
		wg.Wait()
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.billed / (srv.rate * srv.to.Sub(srv.from).Seconds()), float64(srv.refused) / float64(max(srv.attempts, 1))
	}
	alone, aloneRefused := run(t, false)
	use, refused := run(t, true)
	t.Logf("sharing through Redis: %.3f of the token quota, %.2f%% refused; each alone: %.3f, %.2f%% refused",
		use, 100*refused, alone, 100*aloneRefused)
	assert.GreaterOrEqual(t, use, 0.9, "the share of the token quota used")
	assert.LessOrEqual(t, refused, 0.01, "the share of attempts refused")
}

// An adjustment Redis could not be told is kept whole, its quota with
// it, for the next flush.
func TestAdjustKeptWhileRedisIsDown(t *testing.T) {
	srv := startRedis(t)
	f := newFleet(t, newClient(t, srv.addr))
	srv.stop()
	adj := fleetapi.Adjust{Unit: polite.UnitTokens, Limit: 1000, Per: time.Second, GiveBack: 100}
	f.Adjust("llm.example", []fleetapi.Adjust{adj})
	require.Eventually(t, func() bool { return !fleet.CostsFlushing(f) }, 2*time.Second, time.Millisecond)
	kept, ok := fleet.PendingAdjust(f, "llm.example", polite.UnitTokens)
	require.True(t, ok, "kept for the next flush")
	assert.Equal(t, adj, kept)
}
