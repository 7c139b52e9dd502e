package polite

import (
	"net/http"
	"time"

	"github.com/politehttp/polite/internal/headers"
	"github.com/politehttp/polite/internal/signals"
)

// Signals is what a response tells about the server's limits, read from
// its headers by [ParseSignals]. Values a server did not send, or sent
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

// ParseSignals reads the rate-limit signals of a response whose headers are
// h, received at now. It understands:
//
//   - Retry-After (delta-seconds, fractional seconds, all three HTTP-date
//     formats), retry-after-ms, x-ms-retry-after-ms, x-amz-retry-after;
//   - the IETF draft-10 RateLimit and RateLimit-Policy structured fields
//     (q, qu, w, r, t, pk; with several policies the most constraining
//     wins), draft-07's RateLimit dictionary, and the older
//     RateLimit-Limit, -Remaining and -Reset;
//   - X-RateLimit-* and X-Rate-Limit-* (GitHub, GitLab, Twitter/X, Reddit,
//     Discord with Reset-After, Bucket and Global; parallel lists with
//     X-RateLimit-Policy; the window in seconds in X-Rate-Limit-Duration,
//     as tollbooth sends it);
//   - OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens}, whose
//     resets are durations (6m0s, 1s, 20ms);
//   - Anthropic's anthropic-ratelimit-*-{limit,remaining,reset}, whose
//     resets are RFC 3339 times;
//   - Shopify's X-Shopify-Shop-Api-Call-Limit (used/limit).
//
// A numeric reset at least 1704067200 is a Unix time, a smaller one is
// seconds from now. Times the server states are corrected by how far its
// Date is from now, so that they come late rather than early. Malformed values
// are ignored; none can overflow. A value read as a date that is longer
// than any date of its form (33 bytes for an HTTP-date, 35 for an RFC 3339
// time) is malformed, and ignored unparsed: a megabyte of header costs no
// copy of it. ParseSignals is a pure function of h and
// now.
func ParseSignals(h http.Header, now time.Time) Signals { return signalsOf(headers.Parse(h, now)) }

// IsSignalHeader reports whether [ParseSignals] reads the header field
// named name (in any case): the Retry-After and rate-limit fields it
// understands, and Date and Age, by which it corrects them.
func IsSignalHeader(name string) bool { return headers.IsHeader(name) }

// Delay returns the delay before the next request that the signals ask
// for, by the precedence of the IETF draft: Retry-After first, then, when
// the quota is spent, the time until its reset (for a quota that refills,
// until one unit is back).
func (s Signals) Delay(now time.Time) (time.Duration, bool) { return s.internal().Delay(now) }

// MarshalJSON encodes s as a JSON object whose field names are the
// fields' in snake_case (retry_after, has_retry_after, retry_after_slack,
// quota, has_quota, bucket, global, cached, and quotas when there are
// any), with durations in seconds (fractional) and times in RFC 3339.
func (s Signals) MarshalJSON() ([]byte, error) { return s.internal().MarshalJSON() }

// UnmarshalJSON decodes what [Signals.MarshalJSON] encodes. A duration
// that is negative or too long for a time.Duration is an error.
func (s *Signals) UnmarshalJSON(data []byte) error {
	in := s.internal()
	if err := in.UnmarshalJSON(data); err != nil {
		return err
	}
	*s = signalsOf(in)
	return nil
}

// MarshalJSON encodes q as a JSON object with the field names limit,
// remaining, reset (RFC 3339, left out when zero), slack and window (in
// seconds), policy, unit, and refill when it is true.
func (q Quota) MarshalJSON() ([]byte, error) { return signals.Quota(q).MarshalJSON() }

// UnmarshalJSON decodes what [Quota.MarshalJSON] encodes.
func (q *Quota) UnmarshalJSON(data []byte) error { return (*signals.Quota)(q).UnmarshalJSON(data) }

// signalsOf returns s as the Signals users read. (The two types have the
// same fields: signals.Signals is what polite's engine reads, at the bottom
// of its packages; Signals, with Quota, is its documented face.)
func signalsOf(s signals.Signals) Signals {
	return Signals{
		RetryAfter: s.RetryAfter, HasRetryAfter: s.HasRetryAfter, RetryAfterSlack: s.RetryAfterSlack,
		Quota: Quota(s.Quota), HasQuota: s.HasQuota, Quotas: quotasOf(s.Quotas),
		Bucket: s.Bucket, Global: s.Global, Cached: s.Cached,
	}
}

// internal returns s as polite's engine reads it (see signalsOf).
func (s Signals) internal() signals.Signals {
	return signals.Signals{
		RetryAfter: s.RetryAfter, HasRetryAfter: s.HasRetryAfter, RetryAfterSlack: s.RetryAfterSlack,
		Quota: signals.Quota(s.Quota), HasQuota: s.HasQuota, Quotas: internalQuotas(s.Quotas),
		Bucket: s.Bucket, Global: s.Global, Cached: s.Cached,
	}
}

// quotasOf returns qs as the Quotas users read; nil for none.
func quotasOf(qs []signals.Quota) []Quota {
	if qs == nil {
		return nil
	}
	out := make([]Quota, len(qs))
	for i, q := range qs {
		out[i] = Quota(q)
	}
	return out
}

// internalQuotas returns qs as the engine reads them; nil for none.
func internalQuotas(qs []Quota) []signals.Quota {
	if qs == nil {
		return nil
	}
	out := make([]signals.Quota, len(qs))
	for i, q := range qs {
		out[i] = signals.Quota(q)
	}
	return out
}
