package main

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scenarioNamed returns the demo's scenario called name.
func scenarioNamed(t *testing.T, name string) scenario {
	t.Helper()
	for _, sc := range scenarios(demoLimit) {
		if sc.name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return scenario{}
}

// TestScenarioSchedule checks each scenario's limit, outage, next change
// and allowance at times in and around a run.
func TestScenarioSchedule(t *testing.T) {
	const d = 24 * time.Second
	tests := []struct {
		name      string
		at        time.Duration
		rate      float64
		down      bool
		allowed   float64
		next      time.Duration // 0: no change after at
		allowance float64
	}{
		{name: "bucket", at: 0, rate: 100, allowed: 100, allowance: 2400},
		{name: "bucket", at: 12 * time.Second, rate: 100, allowed: 100, allowance: 2400},
		{name: "window", at: 23 * time.Second, rate: 100, allowed: 100, allowance: 2400},
		{name: "drop", at: 0, rate: 100, allowed: 100, next: 8 * time.Second, allowance: 1800},
		{name: "drop", at: 8 * time.Second, rate: 25, allowed: 25, next: 16 * time.Second, allowance: 1800},
		{name: "drop", at: 16 * time.Second, rate: 100, allowed: 100, allowance: 1800},
		{name: "drop", at: -time.Second, rate: 100, allowed: 100, next: 8 * time.Second, allowance: 1800},
		{name: "drop", at: 30 * time.Second, rate: 100, allowed: 100, allowance: 1800},
		{name: "outage", at: 7 * time.Second, rate: 100, allowed: 100, allowance: 1600},
		{name: "outage", at: 8 * time.Second, rate: 100, down: true, allowed: 0, allowance: 1600},
		{name: "outage", at: 16 * time.Second, rate: 100, allowed: 100, allowance: 1600},
	}
	for _, tt := range tests {
		t.Run(tt.name+"@"+tt.at.String(), func(t *testing.T) {
			sc := scenarioNamed(t, tt.name)
			assert.Equal(t, tt.rate, sc.rateAt(tt.at, d))
			assert.Equal(t, tt.down, sc.downAt(tt.at, d))
			assert.Equal(t, tt.allowed, sc.allowedAt(tt.at, d))
			assert.InDelta(t, tt.allowance, sc.allowance(d), 1e-9)
			next, ok := sc.nextChange(tt.at, d)
			assert.Equal(t, tt.next != 0, ok)
			assert.Equal(t, tt.next, next)
		})
	}
}

// TestScenarioIntegral checks the tokens the drop's bucket gains over
// intervals across its changes, and before and after the run.
func TestScenarioIntegral(t *testing.T) {
	const d = 24 * time.Second
	drop := scenarioNamed(t, "drop")
	tests := []struct {
		from, to time.Duration
		want     float64
	}{
		{from: 0, to: d, want: 1800},
		{from: 7 * time.Second, to: 9 * time.Second, want: 125},            // across the drop
		{from: 15 * time.Second, to: 17 * time.Second, want: 125},          // across the rise
		{from: -time.Second, to: 0, want: 100},                             // before the run: the first third's rate
		{from: d, to: d + time.Second, want: 100},                          // after it: the last third's
		{from: 10 * time.Second, to: 10*time.Second + binWidth, want: 2.5}, // one bin of the middle third
		{from: 9 * time.Second, to: 8 * time.Second, want: 0},
	}
	for _, tt := range tests {
		assert.InDelta(t, tt.want, drop.integral(tt.from, tt.to, d), 1e-9, "[%v, %v)", tt.from, tt.to)
	}
}

// TestBucket checks the token bucket's burst, refill, rounding of
// Retry-After, and capacity.
func TestBucket(t *testing.T) {
	origin := time.Unix(1_800_000_000, 0)
	const d = 24 * time.Second

	t.Run("burst, then one a token", func(t *testing.T) {
		b := &bucket{sc: scenarioNamed(t, "bucket"), origin: origin, d: d, tokens: demoBurst}
		for i := range demoBurst {
			h := http.Header{}
			require.Equal(t, http.StatusOK, b.admit(origin, h), "request %d of the burst", i)
			assert.Empty(t, h.Get("Retry-After"))
		}
		h := http.Header{}
		assert.Equal(t, http.StatusTooManyRequests, b.admit(origin, h))
		assert.Equal(t, "1", h.Get("Retry-After"), "a 10-ms wait, rounded up to whole seconds")
		assert.Equal(t, http.StatusOK, b.admit(origin.Add(10*time.Millisecond), http.Header{}))
		assert.Equal(t, http.StatusTooManyRequests, b.admit(origin.Add(10*time.Millisecond), http.Header{}))
	})

	t.Run("the drop's slow third", func(t *testing.T) {
		b := &bucket{sc: scenarioNamed(t, "drop"), origin: origin, d: d, tokens: 0, last: 8 * time.Second}
		at := origin.Add(8 * time.Second)
		assert.Equal(t, http.StatusTooManyRequests, b.admit(at.Add(39*time.Millisecond), http.Header{}))
		assert.Equal(t, http.StatusOK, b.admit(at.Add(41*time.Millisecond), http.Header{}), "a token every 40 ms at 25/s")
	})

	t.Run("Retry-After rounded up", func(t *testing.T) {
		slow := scenario{name: "slow", rates: [3]float64{0.4, 0.4, 0.4}}
		b := &bucket{sc: slow, origin: origin, d: d, tokens: 0}
		h := http.Header{}
		assert.Equal(t, http.StatusTooManyRequests, b.admit(origin, h))
		assert.Equal(t, "3", h.Get("Retry-After"), "2.5 s until a token")
	})

	t.Run("full at most", func(t *testing.T) {
		b := &bucket{sc: scenarioNamed(t, "bucket"), origin: origin, d: d, tokens: demoBurst}
		later := origin.Add(time.Minute)
		for range demoBurst {
			require.Equal(t, http.StatusOK, b.admit(later, http.Header{}))
		}
		assert.Equal(t, http.StatusTooManyRequests, b.admit(later, http.Header{}))
	})
}

// TestFixedWindow checks the GitHub-style window: its quota, its headers,
// its 429 without Retry-After, and its reset at the next Unix second.
func TestFixedWindow(t *testing.T) {
	f := &fixedWindow{quota: 100}
	start := time.Unix(1_800_000_000, 300*int64(time.Millisecond))
	for i := range 100 {
		h := http.Header{}
		require.Equal(t, http.StatusOK, f.admit(start, h), "request %d", i)
		assert.Equal(t, strconv.Itoa(99-i), h.Get("X-RateLimit-Remaining"))
	}
	h := http.Header{}
	assert.Equal(t, http.StatusTooManyRequests, f.admit(start.Add(600*time.Millisecond), h))
	assert.Equal(t, "100", h.Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", h.Get("X-RateLimit-Remaining"))
	assert.Equal(t, "100", h.Get("X-RateLimit-Used"))
	assert.Equal(t, "1800000001", h.Get("X-RateLimit-Reset"), "the window's end in Unix seconds")
	assert.Empty(t, h.Get("Retry-After"), "GitHub sends none")

	h = http.Header{}
	assert.Equal(t, http.StatusOK, f.admit(time.Unix(1_800_000_001, 0), h), "a new window")
	assert.Equal(t, "99", h.Get("X-RateLimit-Remaining"))
	assert.Equal(t, "1800000002", h.Get("X-RateLimit-Reset"))
}

// TestTally checks that answers are counted in their bins and classes,
// and not outside the run.
func TestTally(t *testing.T) {
	origin := time.Unix(1_800_000_000, 0)
	ta := newTally(origin, time.Second)
	require.Len(t, ta.series(), 10)
	ta.add(origin, http.StatusOK)
	ta.add(origin.Add(99*time.Millisecond), http.StatusOK)
	ta.add(origin.Add(100*time.Millisecond), http.StatusTooManyRequests)
	ta.add(origin.Add(950*time.Millisecond), http.StatusServiceUnavailable)
	ta.add(origin.Add(-time.Millisecond), http.StatusOK) // before the run
	ta.add(origin.Add(time.Second), http.StatusOK)       // after it

	s := ta.series()
	assert.Equal(t, counts{accepted: 2}, s[0])
	assert.Equal(t, counts{rejected: 1}, s[1])
	assert.Equal(t, counts{failed: 1}, s[9])
	assert.Equal(t, counts{accepted: 2, rejected: 1, failed: 1}, ta.totals())
	assert.Equal(t, int64(4), ta.totals().sent())
}

// TestPercent checks how the chart's captions write percentages.
func TestPercent(t *testing.T) {
	for v, want := range map[float64]string{0: "0%", 0.04: "<0.1%", 0.44: "0.4%", 3.25: "3.2%", 9.94: "9.9%", 10: "10%", 80.4: "80%", 100: "100%"} {
		assert.Equal(t, want, percent(v), "%v", v)
	}
}
