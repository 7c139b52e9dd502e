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
// its headers by [Parse]: polite's Signals, field for field, where each
// is documented for users. Values a server did not send, or sent
// malformed, are zero, and the matching Has… field is false.
type Signals struct {
	RetryAfter      time.Duration
	HasRetryAfter   bool
	RetryAfterSlack time.Duration
	Quota           Quota
	HasQuota        bool
	Quotas          []Quota // in units other than requests, each unit once
	Bucket          string
	Global          bool
	Cached          bool
}

// Quota is one quota a server reports: polite's Quota, field for field.
type Quota struct {
	Limit     float64
	Remaining float64
	Reset     time.Time
	Slack     time.Duration
	Window    time.Duration
	Policy    string
	Unit      string // "" for requests
	Refill    bool   // a bucket that refills, whose Reset is when it is full again
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
