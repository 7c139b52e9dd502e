package control

import (
	"math"
	"time"
)

// Constants of the AWS SDKs' adaptive retry mode (aws-sdk-go-v2
// aws/retry/adaptive_ratelimit.go; botocore retries/throttling.py).
const (
	cubicBeta        = 0.7 // multiplicative decrease
	cubicScale       = 0.4 // the CUBIC constant C
	cubicSmooth      = 0.8 // weight of a new sample of the measured rate
	cubicMinFillRate = 0.5 // requests per second
	cubicBucketWidth = 0.5 // seconds of a measurement bucket, aligned to Unix time
)

// Cubic is the send-rate controller of the AWS SDKs' adaptive retry mode,
// reproduced number for number from AWS SDK for Go v2: it measures the
// rate of responses in half-second buckets aligned to Unix time (smoothed,
// weight 0.8); on a throttle it remembers the rate it was sending at
// (W_max: the measured rate, or the lower fill rate once enabled) and cuts
// the rate to 0.7·W_max; otherwise the rate follows the CUBIC curve
// 0.4·(t−K)³ + W_max, with t the time since the last throttle and
// K = ∛(W_max·0.3/0.4). The rate never exceeds twice the measured rate and
// never falls below 0.5 per second. It limits nothing until the first
// throttle, and from then on always.
//
// Cubic is polite's AdaptiveCubic mode and the baseline that the default
// controller ([Gentle]) is measured against. A Cubic is safe for concurrent
// use. Create it with [NewCubic], or Init one in place.
type Cubic struct {
	plain // the fill rate, and the lock that guards the fields below

	capacity     float64 // the token bucket's capacity
	responses    meter   // the rate of responses
	wMax         float64 // the rate at the last throttle
	lastThrottle time.Time
}

// NewCubic returns a Cubic created at now: not enabled, with no measured
// rate, its first measurement bucket starting at the whole second before
// now, as in the AWS SDK.
func NewCubic(now time.Time) *Cubic {
	c := new(Cubic)
	c.Init(now)
	return c
}

// Init makes c a Cubic created at now (see [NewCubic]).
func (c *Cubic) Init(now time.Time) {
	c.responses, c.lastThrottle = newMeter(now), now
}

// Observe feeds the outcome of one attempt that ended at now. As in the
// AWS SDKs, any answer but a throttle counts as a success; Cubic measures
// no limit the server states, and tells no attempts apart.
func (c *Cubic) Observe(now time.Time, o Outcome, _ float64, _ Mark, _ time.Duration) Rate {
	r, b, e := c.update(now, o == Throttled)
	return Rate{PerSecond: r, Burst: b, Enabled: e}
}

// update feeds the outcome of one attempt that ended at now: throttled
// reports whether the server throttled it.
func (c *Cubic) update(now time.Time, throttled bool) (float64, int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	measured := c.responses.add(now)
	var calculated float64
	if throttled {
		rate := measured
		if c.enabled {
			rate = math.Min(measured, c.rate)
		}
		c.wMax = rate
		c.lastThrottle = now
		calculated = rate * cubicBeta
		c.enabled = true
	} else {
		calculated = cubicCurve(now.Sub(c.lastThrottle).Seconds(), c.wMax)
	}
	rate := math.Min(calculated, 2*measured)
	c.rate = math.Max(rate, cubicMinFillRate)
	c.capacity = math.Max(rate, 1)
	return c.rate, int(c.capacity), c.enabled
}

// ServerLimit returns W_max, the rate at the last throttle; 0 before the
// first.
func (c *Cubic) ServerLimit() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled {
		return 0
	}
	return c.wMax
}

// Estimate returns W_max, the rate at the last throttle; 0 before the
// first.
func (c *Cubic) Estimate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wMax
}

// State returns Unthrottled until the first throttle, then Climbing since
// the last: Cubic regrows toward the rate of its last throttle.
func (c *Cubic) State() (State, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled {
		return Unthrottled, time.Time{}
	}
	return Climbing, c.lastThrottle
}

// MeasuredRate returns the smoothed rate of responses, per second.
func (c *Cubic) MeasuredRate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.responses.rate
}

// cubicCurve is the CUBIC rate t seconds after a throttle at wMax:
// C·(t−K)³ + W_max.
func cubicCurve(t, wMax float64) float64 {
	return cubicScale*math.Pow(t-cubicK(wMax), 3) + wMax
}

// cubicK is the time the CUBIC curve takes to climb back to wMax after a
// throttle: ∛(W_max·(1−β)/C).
func cubicK(wMax float64) float64 {
	return math.Pow(wMax*(1-cubicBeta)/cubicScale, 1.0/3)
}

// meter measures a rate of events as the AWS SDKs do: it counts events in
// half-second buckets aligned to Unix time, and folds the rate of a bucket
// into a smoothed rate (weight 0.8 for the new sample) when the first event
// of a later bucket arrives. The first bucket starts at the whole second
// before the meter was made.
type meter struct {
	bucket float64 // start of the current bucket, Unix seconds
	rate   float64 // smoothed rate, per second
	count  int32   // events in the current bucket
}

func newMeter(now time.Time) meter {
	return meter{bucket: math.Floor(unixSeconds(now))}
}

// add counts one event at now and returns the smoothed rate.
func (m *meter) add(now time.Time) float64 {
	b := math.Floor(unixSeconds(now)*2) / 2
	m.count++
	if b > m.bucket {
		current := float64(m.count) / (b - m.bucket)
		m.rate = current*cubicSmooth + m.rate*(1-cubicSmooth)
		m.count = 0
		m.bucket = b
	}
	return m.rate
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / float64(time.Second)
}

// Counted returns the responses counted in the current measurement bucket.
func (c *Cubic) Counted() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.responses.count
}
