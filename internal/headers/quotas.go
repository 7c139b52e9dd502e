package headers

import (
	"math"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/signals"
	"github.com/politehttp/polite/internal/units"
)

// ietfQuotas reads the IETF draft-10 RateLimit and RateLimit-Policy lists,
// or draft-07's RateLimit dictionary. A malformed field is ignored whole.
func (r *reading) ietfQuotas(qs *quotas, s *signals.Signals, now time.Time) {
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
		q := signals.Quota{Remaining: remaining, Policy: name}
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
	var q signals.Quota
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
			if d, ok := signals.Seconds(v); ok {
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
		if f, ok := signals.ParseDecimal(v); ok {
			if d, ok := signals.Seconds(f); ok {
				resetAfter, resetAfterSlack = now.Add(d), wholeSlack(v)
			}
		}
	}
	var unit string
	if strings.EqualFold(strings.TrimSpace(r.resource), "graphql") {
		unit = units.NamePoints // GitHub's GraphQL API counts points, a query at least one
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
		remaining, ok := signals.ParseDecimal(strings.TrimSpace(rem))
		if !ok {
			return // a malformed list: trust none of it
		}
		q := signals.Quota{Remaining: remaining, Unit: unit}
		// The window: "100;w=60" in the limit (draft-polli), or "1;w=5"
		// in X-RateLimit-Policy.
		limit, limitParams := splitParams(lim)
		q.Limit, _ = signals.ParseDecimal(limit)
		_, policyParams := splitParams(pol)
		for _, params := range [...]string{limitParams, policyParams} {
			if w, _, ok := paramSeconds(params, "w"); ok {
				q.Window = w
			}
		}
		if f, ok := signals.ParseDecimal(strings.TrimSpace(r.duration)); ok && q.Window == 0 {
			q.Window, _ = signals.Seconds(f)
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
func vendorQuota(v [3]string, now time.Time, skew time.Duration, duration bool) (signals.Quota, bool) {
	remaining, ok := signals.ParseDecimal(strings.TrimSpace(v[1]))
	if !ok {
		return signals.Quota{}, false
	}
	q := signals.Quota{Remaining: remaining, Refill: true}
	q.Limit, _ = signals.ParseDecimal(strings.TrimSpace(v[0]))
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
func (qs *quotas) binding(now time.Time) (signals.Quota, bool) {
	if qs.n == 0 {
		return signals.Quota{}, false
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
		if bestRate < 0 || q.Unit != "" && q.Unit != units.NamePoints || !q.Reset.After(now) {
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
