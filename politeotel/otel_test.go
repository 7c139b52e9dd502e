package politeotel_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/internal/redistest"
	"github.com/politehttp/polite/politeotel"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
)

const (
	method = "http.request.method=GET"
	get    = method + ","
	hostA  = ",server.address=a.test"
)

// A call throttled with a Retry-After, then failed, then answered: every
// instrument it touches counts it once, under the right attributes.
func TestMetricsOfACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := reader()
		next := answer(status(429, "Retry-After", "2"), status(503), ok())
		tr := polite.New(next, polite.WithBackoff(0, 0), polite.WithAdaptive(polite.AdaptiveOff),
			politeotel.New(politeotel.WithMeterProvider(mp)))
		start := time.Now()
		resp, err := call(t, t.Context(), tr, "http://a.test/x?q=secret")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, 2*time.Second, time.Since(start), "the call waited the Retry-After")

		got := collect(t, r)
		assert.Equal(t, map[string]float64{
			get + "http.response.status_code=429,polite.priority=default,polite.retry=false" + hostA: 1,
			get + "http.response.status_code=503,polite.priority=default,polite.retry=true" + hostA:  1,
			get + "http.response.status_code=200,polite.priority=default,polite.retry=true" + hostA:  1,
		}, values(got["polite.client.attempts"]))
		assert.Equal(t, map[string]float64{
			get + "http.response.status_code=429,polite.reason=throttled" + hostA:    1,
			get + "http.response.status_code=503,polite.reason=server_error" + hostA: 1,
		}, values(got["polite.client.retries"]))
		assert.Equal(t, map[string]float64{get + "polite.priority=default,polite.wait=pause" + hostA: 2}, values(got["polite.client.wait.duration"]))
		assert.Equal(t, map[string]uint64{get + "polite.priority=default,polite.wait=pause" + hostA: 1}, counts(got["polite.client.wait.duration"]))
		// 500 tokens, two retries at 5, a success that gives 1 and the
		// successful retry's 5 back.
		assert.Equal(t, map[string]float64{"": 496}, values(got["polite.client.retry_budget"]))
		assert.Equal(t, 496, tr.RetryBudget().Remaining())
		assert.NotContains(t, got, "polite.client.refusals", "nothing was refused")

		metricdatatest.AssertEqual(t, metricdata.Metrics{
			Name:        "polite.client.throttles",
			Description: "Responses by which the server throttled the client: 429, 503 with Retry-After, or 403 with the quota reported spent.",
			Unit:        "{response}",
			Data: metricdata.Sum[int64]{
				Temporality: metricdata.CumulativeTemporality,
				IsMonotonic: true,
				DataPoints: []metricdata.DataPoint[int64]{{
					Attributes: attribute.NewSet(
						attribute.String("server.address", "a.test"),
						attribute.String("http.request.method", "GET"),
						attribute.String("polite.throttle", "429")),
					Value: 1,
				}},
			},
		}, got["polite.client.throttles"], metricdatatest.IgnoreTimestamp())
		for name, m := range got {
			for attrs := range values(m) {
				assert.NotContains(t, attrs, "secret", "%s carries no URL", name)
				assert.NotContains(t, attrs, "/x", "%s carries no path", name)
			}
		}
	})
}

// Each instrument carries the key of at most WithMaxKeys keys; the others
// share one value.
func TestKeyAttributeIsBounded(t *testing.T) {
	mp, r := reader()
	tr := polite.New(answer(ok()), politeotel.New(politeotel.WithMeterProvider(mp), politeotel.WithMaxKeys(2)))
	for _, host := range []string{"h0", "h1", "h2", "h3", "h0", "h4"} {
		_, err := call(t, t.Context(), tr, "http://"+host+"/")
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]float64{
		get + "http.response.status_code=200,polite.priority=default,polite.retry=false,server.address=h0":     2,
		get + "http.response.status_code=200,polite.priority=default,polite.retry=false,server.address=h1":     1,
		get + "http.response.status_code=200,polite.priority=default,polite.retry=false,server.address=_OTHER": 3,
	}, values(collect(t, r)["polite.client.attempts"]))
}

// Attribute sets are bounded even when keys are not: past 999 sets, new
// ones are counted under otel.metric.overflow, as the SDK does past its
// own cap, and no count is lost.
func TestAttributeSetsAreBounded(t *testing.T) {
	mp, r := reader()
	tr := polite.New(answer(ok()), polite.WithAdaptive(polite.AdaptiveOff),
		politeotel.New(politeotel.WithMeterProvider(mp), politeotel.WithMaxKeys(1<<20)))
	const hosts = 5000
	for i := range hosts {
		_, err := call(t, t.Context(), tr, "http://h"+strconv.Itoa(i)+".test/")
		require.NoError(t, err)
	}
	got := values(collect(t, r)["polite.client.attempts"])
	assert.Equal(t, 1000, len(got), "999 sets of their own and the overflow")
	assert.Equal(t, float64(hosts-999), got["otel.metric.overflow=true"])
	var sum float64
	for _, v := range got {
		sum += v
	}
	assert.Equal(t, float64(hosts), sum)
}

// The gauges name the keys that requests were counted under, and make no
// room for others: a key past the cap is OverflowValue there too.
func TestGaugesKeepToTheKeyCap(t *testing.T) {
	mp, r := reader()
	tr := polite.New(answer(ok()), polite.WithRate(10, 1), politeotel.New(politeotel.WithMeterProvider(mp), politeotel.WithMaxKeys(1)))
	for _, host := range []string{"a.test", "b.test", "c.test"} {
		_, err := call(t, t.Context(), tr, "http://"+host+"/")
		require.NoError(t, err)
	}
	got := collect(t, r)
	assert.Equal(t, map[string]float64{"server.address=a.test": 10, "server.address=_OTHER": 20}, values(got["polite.client.rate"]))
	assert.Equal(t, map[string]float64{
		get + "http.response.status_code=200,polite.priority=default,polite.retry=false,server.address=a.test": 1,
		get + "http.response.status_code=200,polite.priority=default,polite.retry=false,server.address=_OTHER": 2,
	}, values(got["polite.client.attempts"]))
}

// A key with a port is a server.address and a server.port.
func TestKeyWithAPort(t *testing.T) {
	mp, r := reader()
	tr := polite.New(answer(ok()), politeotel.New(politeotel.WithMeterProvider(mp)))
	_, err := call(t, t.Context(), tr, "http://api.test:8443/")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{
		get + "http.response.status_code=200,polite.priority=default,polite.retry=false,server.address=api.test,server.port=8443": 1,
	}, values(collect(t, r)["polite.client.attempts"]))
}

// Calls that polite refuses are counted by why, and attempts that failed
// without a response by their error.
func TestRefusalsAndErrors(t *testing.T) {
	refused := func(t *testing.T, r reply, opts ...polite.Option) map[string]float64 {
		t.Helper()
		var got map[string]float64
		synctest.Test(t, func(t *testing.T) {
			mp, rd := reader()
			tr := polite.New(answer(r), append(opts, politeotel.New(politeotel.WithMeterProvider(mp)))...)
			for range 2 {
				_, _ = call(t, t.Context(), tr, "http://a.test/")
			}
			m := collect(t, rd)
			got = values(m["polite.client.refusals"])
			for k, v := range values(m["polite.client.attempts"]) {
				got["attempt "+k] = v
			}
		})
		return got
	}
	t.Run("a pause over the cap", func(t *testing.T) {
		assert.Equal(t, map[string]float64{
			"error.type=throttled," + method + ",polite.priority=default" + hostA:                                 1,
			"attempt " + get + "http.response.status_code=429,polite.priority=default,polite.retry=false" + hostA: 1,
		}, refused(t, status(429, "Retry-After", "3600"), polite.WithMaxRetryAfter(time.Minute)))
	})
	t.Run("an empty retry budget", func(t *testing.T) {
		assert.Equal(t, map[string]float64{
			"error.type=retry_budget_exhausted," + method + ",polite.priority=default" + hostA:                    2,
			"attempt " + get + "http.response.status_code=503,polite.priority=default,polite.retry=false" + hostA: 2,
		}, refused(t, status(503), polite.WithRetryBudget(polite.NewRetryBudget(4))))
	})
	t.Run("robots.txt unreachable", func(t *testing.T) {
		assert.Equal(t, map[string]float64{
			"error.type=robots_unreachable," + method + ",polite.priority=default" + hostA: 2,
		}, refused(t, status(503), polite.WithCrawlDelay(true)))
	})
	t.Run("connection refused", func(t *testing.T) {
		refusedErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		assert.Equal(t, map[string]float64{
			"attempt error.type=connection_refused," + get + "polite.priority=default,polite.retry=false" + hostA: 2,
		}, refused(t, reply{err: refusedErr}, polite.WithMaxAttempts(1)))
	})
}

// Every wait is recorded under what it waited for, for as long as it
// lasted.
func TestWaitsByCause(t *testing.T) {
	waits := func(t *testing.T, next *script, calls int, opts ...polite.Option) metricdata.Metrics {
		t.Helper()
		var got metricdata.Metrics
		synctest.Test(t, func(t *testing.T) {
			mp, r := reader()
			tr := polite.New(next, append(opts, polite.WithAdaptive(polite.AdaptiveOff), politeotel.New(politeotel.WithMeterProvider(mp)))...)
			for range calls {
				_, err := call(t, t.Context(), tr, "http://a.test/")
				require.NoError(t, err)
			}
			got = collect(t, r)["polite.client.wait.duration"]
		})
		return got
	}
	t.Run("rate", func(t *testing.T) {
		got := waits(t, answer(ok()), 3, polite.WithRate(1, 1))
		assert.Equal(t, map[string]float64{get + "polite.priority=default,polite.wait=rate" + hostA: 2}, values(got))
		assert.Equal(t, map[string]uint64{get + "polite.priority=default,polite.wait=rate" + hostA: 2}, counts(got))
	})
	t.Run("backoff", func(t *testing.T) {
		got := waits(t, answer(status(503), ok()), 1, polite.WithBackoff(4*time.Second, 4*time.Second))
		assert.Equal(t, map[string]uint64{get + "polite.priority=default,polite.wait=backoff" + hostA: 1}, counts(got))
		v := values(got)[get+"polite.priority=default,polite.wait=backoff"+hostA]
		assert.Greater(t, v, 0.0)
		assert.Less(t, v, 4.0, "full jitter under 4 s, in seconds")
	})
	t.Run("pause", func(t *testing.T) {
		got := waits(t, answer(status(503, "Retry-After", "7"), ok()), 1)
		assert.Equal(t, map[string]float64{get + "polite.priority=default,polite.wait=pause" + hostA: 7}, values(got))
	})
	t.Run("slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mp, r := reader()
			release := make(chan struct{})
			next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				<-release
				return answer(ok()).RoundTrip(req)
			})
			tr := polite.New(next, polite.WithMaxInFlight(1), politeotel.New(politeotel.WithMeterProvider(mp)))
			done := make(chan struct{})
			for range 2 {
				go func() {
					_, _ = call(t, t.Context(), tr, "http://a.test/")
					done <- struct{}{}
				}()
				// One after the other: the first out and holding the slot
				// before the second comes. (Two calls that find a key
				// with no history at the same instant may open its first
				// contact both at once, and one waits a hundredth of a
				// second for it: a wait for the rate, not the slot.)
				synctest.Wait()
			}
			time.Sleep(3 * time.Second) // fake time: the first holds the slot 3 s
			close(release)
			<-done
			<-done
			got := collect(t, r)["polite.client.wait.duration"]
			assert.Equal(t, map[string]float64{get + "polite.priority=default,polite.wait=slot" + hostA: 3}, values(got))
		})
	})
}

// The gauges read each key's rate and limit, and the retry budget, at
// collection.
func TestGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := reader()
		opt := politeotel.New(politeotel.WithMeterProvider(mp))
		paced := polite.New(answer(ok()), polite.WithRate(10, 1), opt)
		stated := polite.New(answer(status(200, "RateLimit-Policy", `"default";q=100;w=10`, "RateLimit", `"default";r=99;t=10`)), opt)
		learnt := polite.New(answer(status(429), ok()), polite.WithBackoff(0, 0), opt)
		for _, c := range []struct {
			tr  *polite.Transport
			url string
		}{{paced, "http://paced.test/"}, {stated, "http://stated.test/"}, {learnt, "http://learnt.test/"}} {
			_, err := call(t, t.Context(), c.tr, c.url)
			require.NoError(t, err)
		}
		got := collect(t, r)
		rates, limits := values(got["polite.client.rate"]), values(got["polite.client.limit"])
		assert.Equal(t, 10.0, rates["server.address=paced.test"])
		assert.NotContains(t, limits, "server.address=paced.test", "a configured rate says nothing of the server")
		assert.InDelta(t, 10.0, limits["server.address=stated.test"], 1e-9, "100 per 10 s")
		assert.InDelta(t, 9.8, rates["server.address=stated.test"], 1e-9, "the stated rate less polite's margin")
		var learntLimit float64
		for ks := range learnt.Keys() {
			learntLimit = ks.Limit
		}
		assert.Positive(t, learntLimit, "the controller's estimate after a throttle")
		assert.Equal(t, learntLimit, limits["server.address=learnt.test"])
		// Three budgets of their own: 500, 500 and 500 - 5 + 1 + 5.
		assert.Equal(t, map[string]float64{"": 1500}, values(got["polite.client.retry_budget"]))
	})
}

// A Transport no longer in use is no longer read by the gauges, and can
// be collected.
func TestGaugesForgetTransports(t *testing.T) {
	mp, r := reader()
	opt := politeotel.New(politeotel.WithMeterProvider(mp))
	func() {
		tr := polite.New(answer(ok()), opt)
		_, err := call(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err)
		assert.Equal(t, map[string]float64{"": 501 - 1}, values(collect(t, r)["polite.client.retry_budget"]))
	}()
	for range 3 {
		runtime.GC()
	}
	assert.Empty(t, values(collect(t, r)["polite.client.retry_budget"]))
}

// A Fleet's calls to Redis are timed, and calls it could not make are
// counted as fallbacks, by their cause.
func TestFleetMetrics(t *testing.T) {
	t.Run("redis down", func(t *testing.T) {
		mp, r := reader()
		rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
		defer rdb.Close()
		f := fleet.New(rdb, fleet.WithTimeout(time.Second))
		defer f.Close()
		tr := polite.New(answer(ok()), polite.WithFleet(f), polite.WithRate(100, 10), politeotel.New(politeotel.WithMeterProvider(mp)))
		for range 2 {
			_, err := call(t, t.Context(), tr, "http://a.test/")
			require.NoError(t, err, "a fleet that cannot answer fails open")
		}
		got := collect(t, r)
		assert.Equal(t, map[string]float64{
			"error.type=redis_error,polite.fleet.op=reserve":  1,
			"error.type=breaker_open,polite.fleet.op=reserve": 1,
		}, values(got["polite.fleet.fallbacks"]))
		assert.Equal(t, map[string]uint64{"error.type=redis_error,polite.fleet.op=reserve": 1},
			counts(got["polite.fleet.duration"]), "a call the breaker held never went")
	})
	t.Run("redis up", func(t *testing.T) {
		mp, r := reader()
		rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		defer rdb.Close()
		f := fleet.New(rdb, fleet.WithNamespace("politeotel-"+t.Name()))
		defer f.Close()
		tr := polite.New(answer(ok()), polite.WithFleet(f), polite.WithRate(1000, 1), politeotel.New(politeotel.WithMeterProvider(mp)))
		for range 3 {
			_, err := call(t, t.Context(), tr, "http://a.test/")
			require.NoError(t, err)
		}
		got := collect(t, r)
		n := counts(got["polite.fleet.duration"])["polite.fleet.op=reserve"]
		assert.GreaterOrEqual(t, n, uint64(1), "the bookings' round trips are timed")
		assert.LessOrEqual(t, n, uint64(3))
		h := got["polite.fleet.duration"].Data.(metricdata.Histogram[float64])
		require.Len(t, h.DataPoints, 1)
		longest, ok := h.DataPoints[0].Max.Value()
		require.True(t, ok)
		assert.Greater(t, longest, 0.0)
		assert.Less(t, longest, 0.06, "seconds: no call outlives the fleet's 50-ms timeout")
		assert.Empty(t, values(got["polite.fleet.fallbacks"]))
	})
}

// A Redis that does not answer in time: the call is timed to its timeout,
// and counted as a fallback for a timeout. It is the Fleet's first round
// trip, which has a second whatever the Fleet's timeout (the first dials
// Redis and may load the scripts; see the fleet's docs): the client's own
// read timeout is longer, so that the Fleet's deadline is the one met.
func TestFleetMetricsOfATimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("short: waits 3 s in real time on a Redis that never answers")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept() // and never answer
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { // after the fleet and its client are closed
		l.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	mp, r := reader()
	rdb := redis.NewClient(&redis.Options{Addr: l.Addr().String(), MaxRetries: -1,
		ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	defer rdb.Close()
	f := fleet.New(rdb, fleet.WithTimeout(20*time.Millisecond))
	defer f.Close()
	tr := polite.New(answer(ok()), polite.WithFleet(f), polite.WithRate(100, 10), politeotel.New(politeotel.WithMeterProvider(mp)))
	_, err = call(t, t.Context(), tr, "http://a.test/")
	require.NoError(t, err)
	got := collect(t, r)
	assert.Equal(t, map[string]float64{"error.type=timeout,polite.fleet.op=reserve": 1}, values(got["polite.fleet.fallbacks"]))
	assert.InDelta(t, 1, values(got["polite.fleet.duration"])["error.type=timeout,polite.fleet.op=reserve"], 0.1, "seconds")
}

// closedAddr returns an address of 127.0.0.1 where nothing listens.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// One Option may serve the Transport of a caller that has hooks of its
// own: both hear every event.
func TestCallerHooksStillRun(t *testing.T) {
	mp, r := reader()
	var mine int
	tr := polite.New(answer(ok()), polite.WithHooks(polite.Hooks{OnAttempt: func(polite.Event) { mine++ }}),
		politeotel.New(politeotel.WithMeterProvider(mp)))
	_, err := call(t, t.Context(), tr, "http://a.test/")
	require.NoError(t, err)
	assert.Equal(t, 1, mine)
	assert.Len(t, values(collect(t, r)["polite.client.attempts"]), 1)
}

// A context that was cancelled while the call waited is the attempt's
// error type, not a transport error.
func TestErrorTypeOfACancelledCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := reader()
		next := http.RoundTripper(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}))
		tr := polite.New(next, politeotel.New(politeotel.WithMeterProvider(mp)))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := call(t, ctx, tr, "http://a.test/")
		require.True(t, errors.Is(err, context.DeadlineExceeded), err)
		assert.Equal(t, map[string]float64{"error.type=deadline_exceeded," + get + "polite.priority=default,polite.retry=false" + hostA: 1},
			values(collect(t, r)["polite.client.attempts"]))
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
