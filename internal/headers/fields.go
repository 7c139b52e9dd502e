package headers

import (
	"slices"
	"strings"

	"github.com/politehttp/polite/internal/signals"
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
	q     [8]signals.Quota
	n     int
	units bool // one of them counts in a unit a Cost counts in
}

// inUnits returns the quotas in units a Cost counts in that keep says to
// keep, the first of each unit; nil if there are none.
func (qs *quotas) inUnits(keep func(signals.Quota) bool) []signals.Quota {
	var out []signals.Quota
	for _, q := range qs.q[:qs.n] {
		if _, ok := units.Named(q.Unit); ok && keep(q) && !slices.ContainsFunc(out, func(o signals.Quota) bool { return o.Unit == q.Unit }) {
			out = append(out, q)
		}
	}
	return out
}

func (qs *quotas) add(q signals.Quota) {
	if q.Unit != "" {
		_, known := units.Named(q.Unit)
		qs.units = qs.units || known
	}
	if qs.n < len(qs.q) {
		qs.q[qs.n] = q
		qs.n++
	}
}
