package polite

import (
	"math"
	"sync"
	"time"
)

// A controller sets a key's send rate from the outcomes of its attempts.
// Cubic, AIMD and Gentle implement it.
type controller interface {
	// observe feeds the outcome of one attempt that ended at now, with the
	// limit the server states in its headers (requests per second; 0 if
	// none), and returns the rate to send at (requests per second), how
	// many requests the key's bucket may hold, and whether they apply:
	// controllers limit nothing until the server first throttles.
	observe(now time.Time, throttled bool, stated float64) (perSecond float64, burst int, enabled bool)

	// serverLimit returns the controller's estimate of the server's limit,
	// in requests per second; 0 while it has none. A call is refused a
	// wait only if it cannot end in time at this rate, not at the
	// controller's own, which may be lower for a while.
	serverLimit() float64
}

// An outcome is what an attempt says of the server's rate.
type outcome int8

const (
	outcomeOK        outcome = iota // the server answered, and did not throttle
	outcomeThrottled                // the server throttled: 429, 503 with Retry-After, a spent quota's 403
	outcomeFailed                   // a 5xx that is no throttle, or a transport error: nothing of the rate
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
// controller ([Gentle]) is measured against. It is usable outside HTTP:
// feed it the outcome of every attempt with Update and send at Rate once
// Enabled. A Cubic is safe for concurrent use. Create it with [NewCubic].
type Cubic struct {
	// mu guards the fields below.
	mu           sync.Mutex
	enabled      bool
	fillRate     float64 // the rate to send at
	capacity     float64 // the token bucket's capacity
	responses    meter   // the rate of responses
	wMax         float64 // the rate at the last throttle
	lastThrottle time.Time
}

// NewCubic returns a Cubic created at now: not enabled, with no measured
// rate, its first measurement bucket starting at the whole second before
// now, as in the AWS SDK.
func NewCubic(now time.Time) *Cubic {
	return &Cubic{responses: newMeter(now), lastThrottle: now}
}

// Update feeds the outcome of one attempt that ended at now: throttled
// reports whether the server throttled it (429, or 503 with Retry-After,
// in polite).
func (c *Cubic) Update(now time.Time, throttled bool) { c.observe(now, throttled, 0) }

func (c *Cubic) observe(now time.Time, throttled bool, _ float64) (float64, int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	measured := c.responses.add(now)
	var calculated float64
	if throttled {
		rate := measured
		if c.enabled {
			rate = math.Min(measured, c.fillRate)
		}
		c.wMax = rate
		c.lastThrottle = now
		calculated = rate * cubicBeta
		c.enabled = true
	} else {
		calculated = cubicCurve(now.Sub(c.lastThrottle).Seconds(), c.wMax)
	}
	rate := math.Min(calculated, 2*measured)
	c.fillRate = math.Max(rate, cubicMinFillRate)
	c.capacity = math.Max(rate, 1)
	return c.fillRate, int(c.capacity), c.enabled
}

// Rate returns the fill rate of the send bucket, in requests per second.
func (c *Cubic) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fillRate
}

// serverLimit returns W_max, the rate at the last throttle; 0 before the
// first.
func (c *Cubic) serverLimit() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled {
		return 0
	}
	return c.wMax
}

// MeasuredRate returns the smoothed rate of responses, per second.
func (c *Cubic) MeasuredRate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.responses.rate
}

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (c *Cubic) Enabled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enabled
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

// Constants of AIMD.
const (
	aimdIncrease = 2.0         // requests per second added each second
	aimdDecrease = 0.5         // multiplicative decrease
	aimdCooldown = time.Second // throttles within this time of a decrease count once
)

// AIMD is an additive-increase, multiplicative-decrease send-rate
// controller: each second without a throttle adds 2 requests per second to
// the rate; a throttle halves it, at most once a second, so that the burst
// of throttles from one overload counts once. At the first throttle the
// rate starts from half the measured rate of responses. As [Cubic], it
// never grows past twice the measured rate, never falls below 0.5 per
// second, and limits nothing until the first throttle.
//
// AIMD is polite's AdaptiveAIMD mode. It is usable outside HTTP and safe
// for concurrent use. Create it with [NewAIMD].
type AIMD struct {
	// mu guards the fields below.
	mu           sync.Mutex
	enabled      bool
	rate         float64
	peak         float64 // the rate before the last decrease
	responses    meter
	last         time.Time // the last update
	lastDecrease time.Time
}

// NewAIMD returns an AIMD created at now, not enabled.
func NewAIMD(now time.Time) *AIMD {
	return &AIMD{responses: newMeter(now), last: now}
}

// Update feeds the outcome of one attempt that ended at now.
func (a *AIMD) Update(now time.Time, throttled bool) { a.observe(now, throttled, 0) }

func (a *AIMD) observe(now time.Time, throttled bool, _ float64) (float64, int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	measured := a.responses.add(now)
	elapsed := max(now.Sub(a.last).Seconds(), 0)
	a.last = now
	switch {
	case throttled && !a.enabled:
		a.enabled = true
		a.peak = measured
		a.rate = math.Max(measured*aimdDecrease, cubicMinFillRate)
		a.lastDecrease = now
	case throttled:
		if now.Sub(a.lastDecrease) >= aimdCooldown {
			a.peak = a.rate
			a.rate = math.Max(a.rate*aimdDecrease, cubicMinFillRate)
			a.lastDecrease = now
		}
	case a.enabled:
		grown := a.rate + aimdIncrease*elapsed
		a.rate = math.Max(a.rate, math.Min(grown, 2*measured))
	}
	return a.rate, max(int(a.rate), 1), a.enabled
}

// Rate returns the rate to send at, in requests per second.
func (a *AIMD) Rate() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rate
}

// serverLimit returns the rate before the last decrease; 0 before the
// first throttle.
func (a *AIMD) serverLimit() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.enabled {
		return 0
	}
	return math.Max(a.peak, a.rate)
}

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (a *AIMD) Enabled() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.enabled
}
