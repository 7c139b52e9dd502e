package signals

import (
	"slices"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/units"
)

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
		if _, ok := units.Named(q.Unit); ok && keep(q) && !slices.ContainsFunc(out, func(o Quota) bool { return o.Unit == q.Unit }) {
			out = append(out, q)
		}
	}
	return out
}

func (qs *quotas) add(q Quota) {
	if q.Unit != "" {
		_, known := units.Named(q.Unit)
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
	if age, ok := ParseDecimal(strings.TrimSpace(r.age)); ok && age > 0 {
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
		u, okU := ParseDecimal(strings.TrimSpace(used))
		l, okL := ParseDecimal(strings.TrimSpace(limit))
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
			s.Quotas = qs.inUnits(func(q Quota) bool { return !split || q.Unit != units.NameTokens || !q.Refill })
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
		f, ok := ParseDecimal(v)
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
