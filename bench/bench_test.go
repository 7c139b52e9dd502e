package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests: a server, a
// client or a limiter of the bench left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke runs the oracle against a real httprate server over loopback
// for a second: it must use about all of the limit, with about no refusal
// and one attempt a call.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("short: runs a real server for a second over loopback")
	}
	srv := find(t, servers(), serverName, "httprate")
	cl := find(t, clients(), clientName, "oracle")
	r, err := run(srv, cl, runConfig{limit: 100, duration: time.Second, workers: 4})
	require.NoError(t, err)

	assert.InDelta(t, 100, r.Allowance, 1e-9)
	assert.InDelta(t, 1, r.Utilization, 0.15, "2xx counted by the server ÷ allowance")
	assert.LessOrEqual(t, r.Rejected, 0.03)
	assert.InDelta(t, 1, r.AttemptsPerCall, 0.05, "the oracle never retries")
	assert.GreaterOrEqual(t, r.Calls, 85)
	assert.LessOrEqual(t, r.Failed, 3)
	assert.Less(t, r.P99, 500*time.Millisecond, "the oracle waits for its turn, never for a Retry-After")
	// 4 workers sharing 100/s wait about 40ms each.
	assert.InDelta(t, 40*time.Millisecond, r.P50, float64(20*time.Millisecond))
}

// percentile is the nearest rank: the smallest sample with at least q of
// them at or below it.
func TestPercentile(t *testing.T) {
	var samples []time.Duration
	for i := 1; i <= 200; i++ {
		samples = append(samples, time.Duration(i))
	}
	assert.Equal(t, time.Duration(100), percentile(samples, 0.5))
	assert.Equal(t, time.Duration(198), percentile(samples, 0.99))
	assert.Equal(t, time.Duration(1), percentile(samples, 0))
	assert.Equal(t, time.Duration(200), percentile(samples, 1))
	assert.Equal(t, time.Duration(7), percentile([]time.Duration{7}, 0.99))
	assert.Zero(t, percentile(nil, 0.5))
}

func TestProfile(t *testing.T) {
	const d = 3 * time.Second
	tests := []struct {
		name      string
		p         profile
		allowance float64
		integral  float64 // over [-1s, 4s)
		downAt1s  bool
	}{
		{"constant", constant(100), 300, 500, false},
		{"gcra-drop", dropProfile(2, 0.5)(100), 450, 850, false},
		{"drop4x", dropProfile(1, 0.25)(100), 225, 425, false},
		{"outage", outageProfile(100), 200, 500, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.allowance, tt.p.allowance(d), 1e-9)
			assert.InDelta(t, tt.integral, tt.p.integral(-time.Second, 4*time.Second, d), 1e-9)
			assert.InDelta(t, 0, tt.p.integral(2*time.Second, time.Second, d), 1e-9)
			assert.Equal(t, tt.downAt1s, tt.p.downAt(1500*time.Millisecond, d))
			assert.False(t, tt.p.downAt(500*time.Millisecond, d))
		})
	}
}

func TestParseLogLine(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		at   time.Time
		code int
	}{
		{"1795464053.568 200", true, time.UnixMilli(1795464053568), 200},
		{"1795464068712 429", true, time.UnixMilli(1795464068712), 429},
		{"Proxy bench stopped (cumulated conns: FE: 1, BE: 0).", false, time.Time{}, 0},
		{"1795464053.5 200", false, time.Time{}, 0},
		{"1795464053.568 20x", false, time.Time{}, 0},
		{"", false, time.Time{}, 0},
	}
	for _, tt := range tests {
		a, ok := parseLogLine(tt.line)
		if assert.Equal(t, tt.ok, ok, tt.line) && ok {
			assert.True(t, tt.at.Equal(a.at), tt.line)
			assert.Equal(t, tt.code, a.status, tt.line)
		}
	}
}

// find returns the item of all named name.
func find[T any](t *testing.T, all []T, name func(T) string, want string) T {
	t.Helper()
	for _, x := range all {
		if name(x) == want {
			return x
		}
	}
	require.FailNow(t, "not found", want)
	panic("unreachable")
}

func TestLookBinaryMissing(t *testing.T) {
	_, err := lookBinary("polite-bench-no-such-program")
	assert.ErrorIs(t, err, errMissing, "a missing server is skipped, not failed")
}

func TestFailures(t *testing.T) {
	results := []result{
		{Server: "a", Client: "polite", Utilization: 0.95, Rejected: 0.01},
		{Server: "b", Client: "polite", Utilization: 0.69, Rejected: 0.01},
		{Server: "c", Client: "polite", Utilization: 0.95, Rejected: 0.051},
		{Server: "d", Client: "polite", Err: "boom"},
		{Server: "e", Client: "polite", Skipped: "nginx: not installed"},
		{Server: "f", Client: "plain", Utilization: 0.1, Rejected: 0.99},
		{Server: "g", Client: "polite", Utilization: 0.99, Rejected: 0.001, Local: 1},
		{Server: "h", Client: "polite", Utilization: 0.9, Rejected: 0.01, Local: 500}, // its limit changes
		{Server: "i", Client: "oracle", Utilization: 0.58, Rejected: 0.4},
		{Server: "i", Client: "polite", Utilization: 0.40, Rejected: 0.02}, // the oracle is refused too: 0.348 is enough
		{Server: "j", Client: "oracle", Utilization: 0.58, Rejected: 0.4},
		{Server: "j", Client: "polite", Utilization: 0.34, Rejected: 0.02},
		{Server: "k", Client: "polite-memory", Utilization: 0.5, Rejected: 0.01},
		{Server: "l", Client: "polite-fleet", Utilization: 0.97, Rejected: 0.06},
		{Server: "l", Client: "polite-fleet-own", Utilization: 0.5, Rejected: 0.06}, // a comparison, not judged
	}
	steady := map[string]bool{"a": true, "b": true, "c": true, "d": true, "e": true, "f": true, "g": true, "i": true, "j": true, "k": true, "l": true}
	bad := failures(results, steady)
	require.Len(t, bad, 7)
	assert.Contains(t, bad[0], "b × polite")
	assert.Contains(t, bad[1], "c × polite")
	assert.Contains(t, bad[2], "d × polite")
	assert.Contains(t, bad[3], "g × polite: 1 calls failed locally")
	assert.Contains(t, bad[4], "j × polite: utilization 0.34 (min 0.35)")
	assert.Contains(t, bad[5], "k × polite-memory: utilization 0.50 (min 0.70)")
	assert.Contains(t, bad[6], "l × polite-fleet: utilization 0.97 (min 0.70), rejected 6.0%")
}

func TestSteadyServers(t *testing.T) {
	steady := steadyServers(servers(), 100)
	for _, name := range []string{"httprate", "burst1", "nginx", "nginx-queue", "haproxy", "github", "window-aligned", "window-seconds", "delay"} {
		assert.True(t, steady[name], name)
	}
	for _, name := range []string{"gcra-drop", "drop4x", "outage"} {
		assert.False(t, steady[name], name)
	}
}

// The callers' view: a call polite refused to wait for is local, and so
// is the oracle's; a server's refusal, a transport error and a deadline
// are not.
func TestIsLocal(t *testing.T) {
	assert.True(t, isLocal(&polite.ThrottledError{Key: "a", Wait: time.Minute}))
	assert.True(t, isLocal(&url.Error{Op: "Get", URL: "http://a/", Err: &polite.ThrottledError{}}))
	assert.True(t, isLocal(fmt.Errorf("%w: x", errOracleRefused)))
	assert.False(t, isLocal(nil))
	assert.False(t, isLocal(context.DeadlineExceeded))
	assert.False(t, isLocal(io.ErrUnexpectedEOF))
}

// A fleet client of 4 on a real Redis (the bench's own redis-server)
// against httprate for a second: told the limit, it keeps to it together.
func TestFleetSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts redis-server and runs a real server for a second over loopback")
	}
	addr, stop, err := startRedis()
	require.NoError(t, err, "the fleet clients need redis-server")
	defer stop()
	srv := find(t, servers(), serverName, "httprate")
	cl := find(t, clients(), clientName, "polite-fleet-told")
	r, err := run(srv, cl, runConfig{limit: 100, duration: time.Second, workers: 4, fleet: 4, redis: addr})
	require.NoError(t, err)
	assert.InDelta(t, 1, r.Utilization, 0.15)
	assert.LessOrEqual(t, r.Rejected, 0.05)
}

// spread sends each request through the next RoundTripper in turn.
func TestSpreadTakesTurns(t *testing.T) {
	var counts [3]int
	rts := make([]http.RoundTripper, 3)
	for i := range rts {
		rts[i] = tally(&counts[i], http.StatusOK)
	}
	send(t, &spread{rts: rts}, 9)
	assert.Equal(t, [3]int{3, 3, 3}, counts)
}

// joinSpread takes turns among the processes there from the start until
// the join, then builds the one that joins, once, and takes turns among
// all; counting counts that one's attempts and refusals.
func TestJoinSpreadTakesTurnsFromTheJoin(t *testing.T) {
	var counts [3]int
	rts := []http.RoundTripper{tally(&counts[0], http.StatusOK), tally(&counts[1], http.StatusOK)}
	joined := &joinCount{At: time.Hour}
	builds := 0
	s := &joinSpread{before: spread{rts: rts}, at: time.Now().Add(time.Hour), join: func() http.RoundTripper {
		builds++
		return &counting{next: tally(&counts[2], http.StatusTooManyRequests), c: joined}
	}}
	send(t, s, 4)
	assert.Equal(t, [3]int{2, 2, 0}, counts, "before the join")
	assert.Zero(t, builds)
	s.at = time.Now()
	send(t, s, 9)
	assert.Equal(t, [3]int{5, 5, 3}, counts, "after it, in turn")
	assert.Equal(t, 1, builds)
	assert.Equal(t, int64(3), joined.Attempts.Load())
	assert.Equal(t, int64(3), joined.Refused.Load())
	assert.Equal(t, "joined at 1h0m0s: 3 of 3 refused (fleet: 0 of 0)", firstSecondNote(result{Joined: joined}))
	joined.At = timelineBin
	assert.Equal(t, "joined at 250ms: 3 of 3 refused (fleet: 4 of 10)",
		firstSecondNote(result{Joined: joined, Timeline: []bin{{OK: 9, Refused: 1}, {OK: 5, Refused: 3}, {OK: 1, Refused: 1}}}))
}

// tally returns a RoundTripper that answers status to every request,
// counting them in n.
func tally(n *int, status int) http.RoundTripper {
	return roundTripper(func(*http.Request) (*http.Response, error) {
		*n++
		return &http.Response{StatusCode: status, Body: http.NoBody}, nil
	})
}

// send sends n GET requests through rt, one after another.
func send(t *testing.T, rt http.RoundTripper, n int) {
	t.Helper()
	for range n {
		req, err := http.NewRequest(http.MethodGet, "http://a.test/", nil)
		require.NoError(t, err)
		_, err = rt.RoundTrip(req)
		require.NoError(t, err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
