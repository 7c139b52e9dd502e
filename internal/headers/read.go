// Package headers reads what a response's header fields say of the
// server's limits (every common rate-limit dialect, Retry-After, the
// IETF structured fields) into the engine's signals.Signals, with no
// trust in a malformed value. It is the HTTP edge's: the engine reads
// only the values (package signals), and knows no header.
package headers

import (
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/signals"
	"github.com/politehttp/polite/internal/units"
)

// signals interprets what was read.
func (r *reading) signals(now time.Time) signals.Signals {
	var s signals.Signals
	skew, _ := r.skew(now)
	if r.retryAfterMs != "" {
		s.RetryAfter, s.HasRetryAfter = millis(r.retryAfterMs)
	}
	if !s.HasRetryAfter && r.retryAfter != "" {
		s.RetryAfter, s.HasRetryAfter = retryAfterValue(r.retryAfter, now, skew)
		if s.HasRetryAfter {
			s.RetryAfterSlack = wholeSlack(strings.TrimSpace(r.retryAfter))
		}
	}
	if !s.HasRetryAfter && r.xRetryAfter != "" {
		if t, slack, ok := parseInstant(strings.TrimSpace(r.xRetryAfter), now, skew); ok {
			s.RetryAfter, s.HasRetryAfter, s.RetryAfterSlack = max(t.Sub(now), 0), true, slack
		}
	}
	if age, ok := signals.ParseDecimal(strings.TrimSpace(r.age)); ok && age > 0 {
		s.Cached = true
	}
	s.Global = strings.EqualFold(strings.TrimSpace(r.global), "true")
	s.Bucket = strings.TrimSpace(r.bucket)
	if s.Bucket == "" {
		s.Bucket = strings.TrimSpace(r.resource)
	}

	var qs quotas
	r.ietfQuotas(&qs, &s, now)
	r.legacyQuotas(&qs, now, skew)
	for d, dim := range r.openai {
		if q, ok := vendorQuota(dim, now, skew, true); ok {
			q.Unit = [...]string{"", units.NameTokens}[d]
			qs.add(q)
		}
	}
	for d, dim := range r.anthropic {
		if q, ok := vendorQuota(dim, now, skew, false); ok {
			q.Unit = [...]string{"", units.NameTokens, units.NameInputTokens, units.NameOutputTokens}[d]
			qs.add(q)
		}
	}
	if used, limit, ok := strings.Cut(r.shopify, "/"); ok {
		u, okU := signals.ParseDecimal(strings.TrimSpace(used))
		l, okL := signals.ParseDecimal(strings.TrimSpace(limit))
		if okU && okL && u <= l {
			qs.add(signals.Quota{Limit: l, Remaining: l - u})
		}
	}
	if !s.Cached {
		s.Quota, s.HasQuota = qs.binding(now)
		if qs.units {
			// Anthropic's "tokens" is the more restrictive of its input
			// and output tokens: a Cost counts in those two when they are
			// stated.
			split := r.anthropic[2] != [3]string{} || r.anthropic[3] != [3]string{}
			s.Quotas = qs.inUnits(func(q signals.Quota) bool { return !split || q.Unit != units.NameTokens || !q.Refill })
		}
	}
	return s
}

// skew returns how far the server's clock, by its Date, is ahead of ours,
// in whole seconds, or 0 if the response has no Date. Date counts whole
// seconds, truncated, so a clock in step with ours shows a Date up to a
// second behind, and one a fraction of a second off shows it either side
// of ours by turns: a Date within a second of ours, beyond its truncation,
// is a clock in step, and its skew is 0, so that the times a server states
// stay put from one response to the next. A larger difference is rounded
// up to the second. Times the server states, moved by it, are off by less
// than a second either way. Date is read only when such a time was sent.
func (r *reading) skew(now time.Time) (time.Duration, bool) {
	absolute := func(v string) bool { // not a small number of seconds
		v = strings.TrimSpace(v)
		f, ok := signals.ParseDecimal(v)
		return v != "" && (!ok || f >= epochThreshold)
	}
	if r.date == "" || !(absolute(r.reset) || absolute(r.xRetryAfter) || absolute(r.retryAfter) || r.anthropic != [4][3]string{}) {
		return 0, false
	}
	d, err := parseHTTPDate(strings.TrimSpace(r.date))
	if err != nil {
		return 0, false
	}
	skew := d.Sub(now)
	if skew > -2*time.Second && skew < time.Second {
		return 0, true
	}
	whole := skew.Truncate(time.Second)
	if whole < skew {
		whole += time.Second
	}
	return whole, true
}

// Parse reads the rate-limit signals of a response whose headers are
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
// copy of it. Parse is a pure function of h and
// now.
func Parse(h http.Header, now time.Time) signals.Signals {
	var s signals.Signals
	ParseInto(&s, h, now)
	return s
}

// ParseInto is Parse into *s, which it overwrites: on the path of every
// response, the signals are read where they are kept, not copied there.
func ParseInto(s *signals.Signals, h http.Header, now time.Time) {
	var r reading
	for name, values := range h {
		if len(values) == 0 {
			continue
		}
		took := r.take(name, values)
		if !took && !isCanonical(name) {
			took = r.take(textproto.CanonicalMIMEHeaderKey(name), values)
		}
		r.any = r.any || took && name != "Date" && name != "Age"
	}
	if !r.any {
		*s = signals.Signals{}
		return
	}
	*s = r.signals(now)
}

// IsHeader reports whether [Parse] reads the header field
// named name (in any case): the Retry-After and rate-limit fields it
// understands, and Date and Age, by which it corrects them.
func IsHeader(name string) bool {
	var r reading
	return r.take(textproto.CanonicalMIMEHeaderKey(name), []string{""})
}
