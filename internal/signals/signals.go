// Package signals reads what a server's response says of its limits: a
// Retry-After, the quotas of every common rate-limit header dialect (the
// IETF RateLimit fields of every draft, X-RateLimit-*, OpenAI's,
// Anthropic's, Shopify's), into one Signals value, with no trust in a
// malformed value. It is a pure function of the headers and the moment
// they were received; polite's ParseSignals and the engine's judgement of
// a response both read through it.
package signals

import (
	"math"
	"time"
)

// Signals is what a response tells about the server's limits, read from
// its headers by [Parse]. Values a server did not send, or sent
// malformed, are zero, and the matching Has… field is false: a bad value is
// ignored, never trusted.
type Signals struct {
	// RetryAfter is the delay the server asked for before the next
	// request: Retry-After (seconds, fractional seconds, or an HTTP-date),
	// retry-after-ms, x-ms-retry-after-ms or x-amz-retry-after
	// (milliseconds, which win over Retry-After), or X-RateLimit-Retry-After.
	RetryAfter    time.Duration
	HasRetryAfter bool

	// RetryAfterSlack is how far from the server's true delay RetryAfter
	// may be, either way: a second when it counts whole seconds (or is a
	// date), 0 when it counts milliseconds or has a fraction.
	RetryAfterSlack time.Duration

	// Quota is the most constraining quota the response reports: an
	// exhausted one with the latest reset, or else the request quota with
	// the least remaining per second until its reset.
	Quota    Quota
	HasQuota bool

	// Quotas are the quotas the response reports in units other than
	// requests (tokens, input and output tokens, points), each unit once:
	// what a [Cost] is counted against. nil when it reports none.
	Quotas []Quota

	// Bucket is the server's name for the limiter that the request counted
	// against, shared by other routes: X-RateLimit-Bucket (Discord), the
	// IETF partition key pk, or x-ratelimit-resource (GitHub).
	Bucket string

	// Global reports a limit on the whole client rather than a route
	// (Discord's X-RateLimit-Global).
	Global bool

	// Cached reports that the response came from a cache (Age > 0): its
	// quota describes the past and is left out.
	Cached bool
}

// Quota is one quota a server reports.
type Quota struct {
	Limit     float64       // units allowed per window; 0 if not given
	Remaining float64       // units left before Reset
	Reset     time.Time     // when the quota is renewed; zero if not given
	Slack     time.Duration // how far from the true renewal, either way, Reset may be (it counts whole seconds)
	Window    time.Duration // the window's length; 0 if not given
	Policy    string        // the policy's or dimension's name; "" if none
	Unit      string        // "" for requests; "tokens", "content-bytes", …
	// Refill reports a bucket that refills continuously, whose Reset is
	// when it is full again (OpenAI's and Anthropic's), rather than a
	// window renewed whole at Reset.
	Refill bool
}

// Delay returns the delay before the next request that the signals ask
// for, by the precedence of the IETF draft: Retry-After first, then, when
// the quota is spent, the time until its reset (for a quota that refills,
// until one unit is back).
func (s Signals) Delay(now time.Time) (time.Duration, bool) {
	switch {
	case s.HasRetryAfter:
		return s.RetryAfter, true
	case s.HasQuota && s.Quota.Remaining < 1 && !s.Quota.Reset.IsZero():
		return max(s.Quota.Renewal(now).Sub(now), 0), true
	}
	return 0, false
}

// Renewal returns when a request may go again after q is spent, q's
// figures read at now: its reset, or for a bucket that refills (whose
// reset is when it is full again), when one unit of its limit is back.
func (q Quota) Renewal(now time.Time) time.Time {
	if !q.Refill || q.Limit < 1 || !q.Reset.After(now) {
		return q.Reset
	}
	return now.Add(time.Duration(float64(q.Reset.Sub(now)) / q.Limit))
}

// RefillWindow returns the window over which a bucket that refills gets
// its limit back, read from q at now: what it lacks comes back by its
// reset, so at limit/window a second, window is the time to its reset
// times limit over what it lacks. The figures must be far above their
// rounding (slack for what is left; the reset's slack and a millisecond
// for the reset) for the window to be read from them; a window near one
// of the common ones (a second, ten, a minute, an hour, a day) is taken
// to be it. It reports false when the figures say too little.
func RefillWindow(q Quota, now time.Time, slack float64) (time.Duration, bool) {
	lack, ahead := q.Limit-q.Remaining, q.Reset.Sub(now)
	if !q.Refill || q.Limit <= 0 || lack < math.Max(q.Limit/100, 4*slack+1) || ahead < max(50*time.Millisecond, 4*q.Slack) {
		return 0, false
	}
	w := time.Duration(float64(ahead) * q.Limit / lack)
	for _, common := range [...]time.Duration{time.Second, 10 * time.Second, time.Minute, time.Hour, 24 * time.Hour} {
		if math.Abs(w.Seconds()/common.Seconds()-1) <= 0.15 {
			return common, true
		}
	}
	return w, true
}

// epochThreshold separates the two meanings of a numeric reset: a number
// at least this large (2024-01-01T00:00:00Z) is a Unix time, a smaller one
// is seconds from now.
const epochThreshold = 1704067200
