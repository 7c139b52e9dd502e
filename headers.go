package polite

import (
	"errors"
	"math"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
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

// Delay returns the delay before the next request that the signals ask
// for, by the precedence of the IETF draft: Retry-After first, then, when
// the quota is spent, the time until its reset (for a quota that refills,
// until one unit is back).
func (s Signals) Delay(now time.Time) (time.Duration, bool) {
	switch {
	case s.HasRetryAfter:
		return s.RetryAfter, true
	case s.HasQuota && s.Quota.Remaining < 1 && !s.Quota.Reset.IsZero():
		return max(s.Quota.renewal(now).Sub(now), 0), true
	}
	return 0, false
}

// renewal returns when a request may go again after q is spent, q's
// figures read at now: its reset, or for a bucket that refills (whose
// reset is when it is full again), when one unit of its limit is back.
func (q Quota) renewal(now time.Time) time.Time {
	if !q.Refill || q.Limit < 1 || !q.Reset.After(now) {
		return q.Reset
	}
	return now.Add(time.Duration(float64(q.Reset.Sub(now)) / q.Limit))
}

// refillWindow returns the window over which a bucket that refills gets
// its limit back, read from q at now: what it lacks comes back by its
// reset, so at limit/window a second, window is the time to its reset
// times limit over what it lacks. The figures must be far above their
// rounding (slack for what is left; the reset's slack and a millisecond
// for the reset) for the window to be read from them; a window near one
// of the common ones (a second, ten, a minute, an hour, a day) is taken
// to be it. It reports false when the figures say too little.
func refillWindow(q Quota, now time.Time, slack float64) (time.Duration, bool) {
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
func ParseSignals(h http.Header, now time.Time) Signals {
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
		return Signals{}
	}
	return r.signals(now)
}

// IsSignalHeader reports whether [ParseSignals] reads the header field
// named name (in any case): the Retry-After and rate-limit fields it
// understands, and Date and Age, by which it corrects them.
func IsSignalHeader(name string) bool {
	var r reading
	return r.take(textproto.CanonicalMIMEHeaderKey(name), []string{""})
}

// reading collects the raw values of the headers that matter, so that they
// are interpreted in one place, after the Date that corrects them is known.
type reading struct {
	any                                     bool // a header that matters, besides Date and Age
	date, age                               string
	retryAfter, retryAfterMs, xRetryAfter   string
	ietf, ietfPolicy                        []string
	limit, remaining, reset, resetAfter     string // X-RateLimit-*, X-Rate-Limit-*, RateLimit-* (older drafts)
	duration                                string // X-Rate-Limit-Duration (tollbooth): the window, in seconds
	policy, bucket, resource, global, scope string
	openai                                  [2][3]string // requests, tokens × limit, remaining, reset
	anthropic                               [4][3]string // requests, tokens, input-tokens, output-tokens × …
	shopify                                 string
}

// take records the header name if it matters, and reports whether it does.
func (r *reading) take(name string, values []string) bool {
	v := values[0]
	switch name {
	case "Date":
		r.date = v
	case "Age":
		r.age = v
	case "Retry-After":
		r.retryAfter = v
	case "Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After":
		r.retryAfterMs = v
	case "X-Ratelimit-Retry-After":
		r.xRetryAfter = v
	case "Ratelimit":
		r.ietf = values
	case "Ratelimit-Policy":
		r.ietfPolicy = values
	case "X-Ratelimit-Limit", "X-Rate-Limit-Limit", "Ratelimit-Limit":
		r.limit = v
	case "X-Ratelimit-Remaining", "X-Rate-Limit-Remaining", "Ratelimit-Remaining":
		r.remaining = v
	case "X-Ratelimit-Reset", "X-Rate-Limit-Reset", "Ratelimit-Reset":
		r.reset = v
	case "X-Ratelimit-Reset-After":
		r.resetAfter = v
	case "X-Rate-Limit-Duration", "X-Ratelimit-Duration":
		r.duration = v
	case "X-Ratelimit-Policy":
		r.policy = v
	case "X-Ratelimit-Bucket":
		r.bucket = v
	case "X-Ratelimit-Resource":
		r.resource = v
	case "X-Ratelimit-Global":
		r.global = v
	case "X-Ratelimit-Scope":
		r.scope = v
	case "X-Shopify-Shop-Api-Call-Limit":
		r.shopify = v
	default:
		return r.takeVendor(name, v)
	}
	return true
}

// takeVendor records OpenAI's X-Ratelimit-{Limit,Remaining,Reset}-{Requests,
// Tokens} and Anthropic's Anthropic-Ratelimit-{dimension}-{field}.
func (r *reading) takeVendor(name, v string) bool {
	fields := []string{"Limit", "Remaining", "Reset"}
	if rest, ok := strings.CutPrefix(name, "X-Ratelimit-"); ok {
		field, dim, _ := strings.Cut(rest, "-")
		f, d := slices.Index(fields, field), slices.Index([]string{"Requests", "Tokens"}, dim)
		if f < 0 || d < 0 {
			return false
		}
		r.openai[d][f] = v
		return true
	}
	if rest, ok := strings.CutPrefix(name, "Anthropic-Ratelimit-"); ok {
		i := strings.LastIndexByte(rest, '-')
		if i < 0 {
			return false
		}
		f, d := slices.Index(fields, rest[i+1:]), slices.Index([]string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"}, rest[:i])
		if f < 0 || d < 0 {
			return false
		}
		r.anthropic[d][f] = v
		return true
	}
	return false
}

// quotas holds the quotas of a response; few responses report more than a
// handful, and the rest are dropped.
type quotas struct {
	q     [8]Quota
	n     int
	units bool // one of them counts in a unit a Cost counts in
}

// inUnits returns the quotas in units a Cost counts in that keep says to
// keep, the first of each unit; nil if there are none.
func (qs *quotas) inUnits(keep func(Quota) bool) []Quota {
	var out []Quota
	for _, q := range qs.q[:qs.n] {
		if _, ok := unitNamed(q.Unit); ok && keep(q) && !slices.ContainsFunc(out, func(o Quota) bool { return o.Unit == q.Unit }) {
			out = append(out, q)
		}
	}
	return out
}

func (qs *quotas) add(q Quota) {
	if q.Unit != "" {
		_, known := unitNamed(q.Unit)
		qs.units = qs.units || known
	}
	if qs.n < len(qs.q) {
		qs.q[qs.n] = q
		qs.n++
	}
}

// signals interprets what was read.
func (r *reading) signals(now time.Time) Signals {
	var s Signals
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
	if age, ok := parseDecimal(strings.TrimSpace(r.age)); ok && age > 0 {
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
			q.Unit = [...]string{"", UnitTokens}[d]
			qs.add(q)
		}
	}
	for d, dim := range r.anthropic {
		if q, ok := vendorQuota(dim, now, skew, false); ok {
			q.Unit = [...]string{"", UnitTokens, UnitInputTokens, UnitOutputTokens}[d]
			qs.add(q)
		}
	}
	if used, limit, ok := strings.Cut(r.shopify, "/"); ok {
		u, okU := parseDecimal(strings.TrimSpace(used))
		l, okL := parseDecimal(strings.TrimSpace(limit))
		if okU && okL && u <= l {
			qs.add(Quota{Limit: l, Remaining: l - u})
		}
	}
	if !s.Cached {
		s.Quota, s.HasQuota = qs.binding(now)
		if qs.units {
			// Anthropic's "tokens" is the more restrictive of its input
			// and output tokens: a Cost counts in those two when they are
			// stated.
			split := r.anthropic[2] != [3]string{} || r.anthropic[3] != [3]string{}
			s.Quotas = qs.inUnits(func(q Quota) bool { return !split || q.Unit != UnitTokens || !q.Refill })
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
		f, ok := parseDecimal(v)
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

// ietfQuotas reads the IETF draft-10 RateLimit and RateLimit-Policy lists,
// or draft-07's RateLimit dictionary. A malformed field is ignored whole.
func (r *reading) ietfQuotas(qs *quotas, s *Signals, now time.Time) {
	if len(r.ietf) == 0 {
		return
	}
	field := trimOWS(joinLines(r.ietf))
	var policies [8]sfMember
	np := 0
	for rest := trimOWS(joinLines(r.ietfPolicy)); rest != ""; {
		m, next, ok := sfNext(rest, false)
		if !ok {
			np = 0 // malformed: ignored whole
			break
		}
		if np < len(policies) {
			policies[np] = m
			np++
		}
		rest = next
	}
	if !strings.HasPrefix(field, `"`) {
		r.draft7(qs, field, policies[:np], now)
		return
	}
	var found quotas
	for rest := field; rest != ""; {
		m, next, ok := sfNext(rest, false)
		if !ok {
			return // malformed: ignored whole
		}
		rest = next
		name, ok := sfString(m.item)
		rv, okR := sfParam(m.params, "r")
		remaining, okN := sfNumber(rv)
		if !ok || !okR || !okN {
			continue
		}
		q := Quota{Remaining: remaining, Policy: name}
		if d, tv, ok := paramSeconds(m.params, "t"); ok {
			q.Reset, q.Slack = now.Add(d), wholeSlack(tv)
		}
		if pk, ok := sfParam(m.params, "pk"); ok && s.Bucket == "" {
			s.Bucket = pk
		}
		for _, p := range policies[:np] {
			if pname, ok := sfString(p.item); !ok || pname != name {
				continue
			}
			if v, ok := sfParam(p.params, "q"); ok {
				q.Limit, _ = sfNumber(v)
			}
			if w, _, ok := paramSeconds(p.params, "w"); ok {
				q.Window = w
			}
			if v, ok := sfParam(p.params, "qu"); ok {
				if unit, ok := sfString(v); ok && unit != "requests" {
					q.Unit = unit
				}
			}
			break
		}
		found.add(q)
	}
	for _, q := range found.q[:found.n] {
		qs.add(q)
	}
}

// draft7 reads draft-07's `RateLimit: limit=100, remaining=50, reset=5`
// and `RateLimit-Policy: 100;w=10`.
func (r *reading) draft7(qs *quotas, field string, policies []sfMember, now time.Time) {
	var q Quota
	var okR bool
	for rest := field; rest != ""; {
		m, next, ok := sfNext(rest, true)
		if !ok {
			return
		}
		rest = next
		v, okN := sfNumber(m.item)
		switch {
		case !okN:
		case m.key == "limit":
			q.Limit = v
		case m.key == "remaining":
			q.Remaining, okR = v, true
		case m.key == "reset":
			if d, ok := seconds(v); ok {
				q.Reset, q.Slack = now.Add(d), wholeSlack(m.item)
			}
		}
	}
	if !okR {
		return
	}
	for _, p := range policies {
		if limit, ok := sfNumber(p.item); ok && (q.Limit == 0 || limit == q.Limit) {
			if w, _, ok := paramSeconds(p.params, "w"); ok {
				q.Window = w
			}
			break
		}
	}
	qs.add(q)
}

// legacyQuotas reads X-RateLimit-*, X-Rate-Limit-* and the older drafts'
// RateLimit-*: one quota, or several when the values are parallel lists.
func (r *reading) legacyQuotas(qs *quotas, now time.Time, skew time.Duration) {
	if r.remaining == "" {
		return
	}
	var resetAfter time.Time
	var resetAfterSlack time.Duration
	if v := strings.TrimSpace(r.resetAfter); v != "" { // Discord: relative, so immune to skew
		if f, ok := parseDecimal(v); ok {
			if d, ok := seconds(f); ok {
				resetAfter, resetAfterSlack = now.Add(d), wholeSlack(v)
			}
		}
	}
	var unit string
	if strings.EqualFold(strings.TrimSpace(r.resource), "graphql") {
		unit = UnitPoints // GitHub's GraphQL API counts points, a query at least one
	}
	var found quotas
	limits, remainings, resets, policies := r.limit, r.remaining, r.reset, r.policy
	single := strings.IndexByte(remainings, ',') < 0
	for remainings != "" {
		var rem, lim, res, pol string
		rem, remainings, _ = strings.Cut(remainings, ",")
		lim, limits, _ = strings.Cut(limits, ",")
		if single {
			res = resets // an HTTP-date has a comma of its own
		} else {
			res, resets, _ = strings.Cut(resets, ",")
		}
		pol, policies, _ = strings.Cut(policies, ",")
		remaining, ok := parseDecimal(strings.TrimSpace(rem))
		if !ok {
			return // a malformed list: trust none of it
		}
		q := Quota{Remaining: remaining, Unit: unit}
		// The window: "100;w=60" in the limit (draft-polli), or "1;w=5"
		// in X-RateLimit-Policy.
		limit, limitParams := splitParams(lim)
		q.Limit, _ = parseDecimal(limit)
		_, policyParams := splitParams(pol)
		for _, params := range [...]string{limitParams, policyParams} {
			if w, _, ok := paramSeconds(params, "w"); ok {
				q.Window = w
			}
		}
		if f, ok := parseDecimal(strings.TrimSpace(r.duration)); ok && q.Window == 0 {
			q.Window, _ = seconds(f)
		}
		if !resetAfter.IsZero() {
			q.Reset, q.Slack = resetAfter, resetAfterSlack
		} else if t, slack, ok := parseInstant(strings.TrimSpace(res), now, skew); ok {
			q.Reset, q.Slack = t, slack
		}
		found.add(q)
	}
	for _, q := range found.q[:found.n] {
		qs.add(q)
	}
}

// vendorQuota reads one dimension's limit, remaining and reset, whose
// reset is a duration (OpenAI) or an instant (Anthropic).
func vendorQuota(v [3]string, now time.Time, skew time.Duration, duration bool) (Quota, bool) {
	remaining, ok := parseDecimal(strings.TrimSpace(v[1]))
	if !ok {
		return Quota{}, false
	}
	q := Quota{Remaining: remaining, Refill: true}
	q.Limit, _ = parseDecimal(strings.TrimSpace(v[0]))
	reset := strings.TrimSpace(v[2])
	if duration {
		if d, err := time.ParseDuration(reset); err == nil && d >= 0 {
			q.Reset = now.Add(d)
		}
	} else if t, slack, ok := parseInstant(reset, now, skew); ok {
		q.Reset, q.Slack = t, slack
	}
	return q, true
}

// binding returns the most constraining quota: of the exhausted ones, the
// one renewed last; else, of the quotas of requests (or of points, of which
// a request costs at least one) with a reset, the one with the least
// remaining per second until it; else the first.
func (qs *quotas) binding(now time.Time) (Quota, bool) {
	if qs.n == 0 {
		return Quota{}, false
	}
	best, bestRate := -1, math.Inf(1)
	for i := range qs.n {
		q := &qs.q[i]
		if q.Remaining < 1 {
			if best < 0 || qs.q[best].Remaining >= 1 || q.Reset.After(qs.q[best].Reset) {
				best, bestRate = i, -1
			}
			continue
		}
		if bestRate < 0 || q.Unit != "" && q.Unit != UnitPoints || !q.Reset.After(now) {
			continue
		}
		if rate := q.Remaining / q.Reset.Sub(now).Seconds(); rate < bestRate {
			best, bestRate = i, rate
		}
	}
	if best < 0 {
		best = 0
	}
	return qs.q[best], true
}

// retryAfterValue reads a Retry-After value received at now from a server
// whose clock is skew ahead of ours (RFC 9110 §10.2.3): delta-seconds, also
// fractional ("2.5"), or an HTTP-date in any of the three formats of
// [http.ParseTime], which is a time by the server's clock, as its Date is.
// A date in the past gives 0. A
// well-formed value too large for a time.Duration (a date in the year 9999)
// means "not before then": it saturates to the longest Duration, which is
// over any WithMaxRetryAfter. It reports false for garbage and negative
// values.
func retryAfterValue(v string, now time.Time, skew time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, ok := parseSeconds(v); ok {
		return d, true
	}
	if isDecimal(v) {
		return math.MaxInt64, true // overflows a Duration
	}
	t, err := parseHTTPDate(v)
	if err != nil {
		return 0, false
	}
	return max(t.Add(-skew).Sub(now), 0), true // Time.Sub saturates
}

// parseInstant reads a reset instant: a Unix time (at least
// epochThreshold, fractions allowed), seconds from now (fractions allowed),
// an RFC 3339 time or an HTTP-date. Stated times are moved by the server's
// clock skew. It returns how much later than the true instant the result
// may be: a second when it counts whole seconds or comes through Date.
func parseInstant(v string, now time.Time, skew time.Duration) (t time.Time, slack time.Duration, ok bool) {
	if v == "" {
		return time.Time{}, 0, false
	}
	if f, ok := parseDecimal(v); ok {
		whole := strings.IndexByte(v, '.') < 0
		if f >= epochThreshold {
			if f >= 1e11 { // past the year 5000: not a time this century
				return time.Time{}, 0, false
			}
			sec, frac := math.Modf(f) // a float64 Unix time is good to a microsecond
			t := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).In(now.Location()).Add(-skew)
			return t, stateSlack(whole, skew), true
		}
		d, ok := seconds(f)
		return now.Add(d), wholeSlack(v), ok
	}
	if isDigit(v[0]) && strings.IndexByte(v, 'T') > 0 {
		if len(v) > maxRFC3339 {
			return time.Time{}, 0, false // not parsed: see maxRFC3339
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t.In(now.Location()).Add(-skew), stateSlack(t.Nanosecond() == 0, skew), true
		}
		return time.Time{}, 0, false
	}
	if t, err := parseHTTPDate(v); err == nil {
		return t.In(now.Location()).Add(-skew), time.Second, true
	}
	return time.Time{}, 0, false
}

// stateSlack is the slack of a time stated by the server's clock: a second
// if it counts whole seconds (truncated or rounded) or was moved by the
// skew from Date.
func stateSlack(whole bool, skew time.Duration) time.Duration {
	if whole || skew != 0 {
		return time.Second
	}
	return 0
}

// wholeSlack is the slack of a delay written as v: a second if it counts
// whole seconds (has no fraction).
func wholeSlack(v string) time.Duration {
	if strings.IndexByte(v, '.') < 0 {
		return time.Second
	}
	return 0
}

// paramSeconds reads the parameter name of the structured-field
// parameters params as non-negative seconds; raw is the value as written.
func paramSeconds(params, name string) (d time.Duration, raw string, ok bool) {
	raw, ok = sfParam(params, name)
	if !ok {
		return 0, "", false
	}
	f, ok := sfNumber(raw)
	if !ok {
		return 0, raw, false
	}
	d, ok = seconds(f)
	return d, raw, ok
}

// millis reads a non-negative number of milliseconds, fractions allowed;
// one too large for a Duration saturates, as in retryAfterValue.
func millis(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	f, ok := parseDecimal(v)
	switch {
	case ok && f/1000 <= maxSeconds:
		return time.Duration(f * float64(time.Millisecond)), true
	case isDecimal(v):
		return math.MaxInt64, true
	}
	return 0, false
}

// maxSeconds is the most seconds a time.Duration holds, in round terms.
const maxSeconds = float64(math.MaxInt64/int64(time.Second)) - 1

// seconds converts non-negative seconds to a Duration, to the nearest
// nanosecond, refusing overflow.
func seconds(f float64) (time.Duration, bool) {
	if !(f >= 0) || f > maxSeconds {
		return 0, false
	}
	return time.Duration(math.Round(f * float64(time.Second))), true
}

// parseDecimal reads a non-negative decimal number: digits with an
// optional fraction ("596.0"). No sign, exponent, spaces or specials.
func parseDecimal(s string) (float64, bool) {
	if len(s) > 32 {
		return 0, false
	}
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || (dot && frac == "") {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) && s[i] != '.' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	if !dot && len(s) <= 15 { // exact in a float64: no need for ParseFloat
		return float64(n), true
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// parseSeconds parses non-negative decimal seconds with an optional
// fraction ("120", "2.0", "0.25") into a Duration, truncated to the
// nanosecond, exactly. It rejects signs, exponents, spaces, empty parts
// ("1.", ".5") and values that overflow a Duration.
func parseSeconds(s string) (time.Duration, bool) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") {
		return 0, false
	}
	var secs int64
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if secs > (math.MaxInt64/int64(time.Second)-int64(c-'0'))/10 {
			return 0, false // overflows a Duration
		}
		secs = secs*10 + int64(c-'0')
	}
	var nanos int64
	scale := int64(time.Second)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		scale /= 10 // digits past the nanosecond are checked, then dropped
		nanos += int64(c-'0') * scale
	}
	d := secs*int64(time.Second) + nanos
	if d < 0 {
		return 0, false
	}
	return time.Duration(d), true
}

// The longest dates that ParseSignals reads. A longer value is not a date,
// and is refused before it is parsed: time.Parse, which fails on it, would
// copy it into its error (http.ParseTime tries three layouts, so a
// megabyte of Retry-After cost 6 MB).
const (
	// maxHTTPDate is the longest HTTP-date of RFC 9110 §5.6.7: the
	// obsolete RFC 850 form with the longest day name. An IMF-fixdate has
	// 29 bytes ("Sun, 06 Nov 1994 08:49:37 GMT"), an asctime date 24.
	maxHTTPDate = len("Wednesday, 09-Nov-94 08:49:37 GMT")
	// maxRFC3339 is the longest RFC 3339 time stated to the nanosecond,
	// the finest a time.Time holds.
	maxRFC3339 = len("2006-01-02T15:04:05.999999999+07:00")
)

// errLongDate is parseHTTPDate's error for a value longer than any
// HTTP-date.
var errLongDate = errors.New("polite: longer than an HTTP-date")

// parseHTTPDate reads an HTTP-date as [http.ParseTime] does, and also the
// dates some servers write with Go's time.RFC1123, whose zone is "UTC"
// where HTTP says "GMT" (sethvargo/go-limiter's reset and Retry-After). A
// value longer than maxHTTPDate is refused unread.
func parseHTTPDate(v string) (time.Time, error) {
	if len(v) > maxHTTPDate {
		return time.Time{}, errLongDate
	}
	t, err := http.ParseTime(v)
	if err != nil {
		if rest, ok := strings.CutSuffix(v, " UTC"); ok {
			if t, err2 := http.ParseTime(rest + " GMT"); err2 == nil {
				return t, nil
			}
		}
	}
	return t, err
}

// isDecimal reports whether s is digits with at most one inner dot ("12",
// "1.5"), of any length: a number as parseDecimal and parseSeconds read it,
// whether or not it fits their ranges.
func isDecimal(s string) bool {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	switch {
	case i == 0:
		return false
	case i == len(s):
		return true
	}
	return s[i] == '.' && allDigits(s[i+1:]) // stops at the first byte that is not a digit
}

func allDigits(s string) bool {
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// splitParams splits "100;w=60" into "100" and ";w=60", trimmed.
func splitParams(s string) (item, params string) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ';'); i >= 0 {
		return strings.TrimSpace(s[:i]), s[i:]
	}
	return s, ""
}

// joinLines joins the lines of a list field with commas, allocating only
// when there are several.
func joinLines(lines []string) string {
	if len(lines) == 1 {
		return lines[0]
	}
	return strings.Join(lines, ",")
}

// isCanonical reports whether a header name is in the form
// textproto.CanonicalMIMEHeaderKey gives it.
func isCanonical(name string) bool {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}
