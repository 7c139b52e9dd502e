package main

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
)

// An llmResult is one row of the LLM table: one client against one dialect
// of the fake. The measures count from the end of the run's first period
// (the window), when the bucket that started full has been spent.
type llmResult struct {
	Dialect string `json:"dialect"`
	Client  string `json:"client"`

	// Use is the token quota's use: what the fake's token quota kept for
	// the requests it admitted in the window (their bills, once settled:
	// prompt and output; on Azure, which settles nothing, their charge:
	// prompt and max_tokens), over the quota of the window (the limit
	// times the window in periods). Anthropic has two token quotas: Use is
	// the larger use, the quota that binds. UseByQuota has each quota's,
	// requests too.
	Use        float64            `json:"use"`
	UseByQuota map[string]float64 `json:"use_by_quota"`
	// Refused is the attempts the fake refused (429) over the attempts it
	// saw in the window; RefusedBy counts them by the quota that refused
	// (requests, tokens, input-tokens, output-tokens, too-large).
	Refused   float64        `json:"refused"`
	Attempts  int            `json:"attempts"`
	Refusals  int            `json:"refusals"`
	RefusedBy map[string]int `json:"refused_by,omitempty"`
	// AttemptsPerCall is the attempts the fake saw for the calls that
	// ended in the window, over those calls.
	AttemptsPerCall float64 `json:"attempts_per_call"`

	// Calls is the calls that ended in the window (but those drawn too
	// large), OK those answered 200, Failed the others, Errors those the client failed in
	// its caller's hands (an error instead of an answer: a refused wait,
	// an empty retry budget, a deadline), ErrorsPerSecond the same per
	// second of the window, ErrorsBy the same by kind (see errorKind),
	// TimedOut those of them that ran into their deadline.
	Calls           int            `json:"calls"`
	OK              int            `json:"ok"`
	Failed          int            `json:"failed"`
	Errors          int            `json:"errors"`
	ErrorsBy        map[string]int `json:"errors_by,omitempty"`
	ErrorsPerSecond float64        `json:"errors_per_second"`
	TimedOut        int            `json:"timed_out"`
	// P50 and P99 are percentiles of the durations of the calls answered
	// 200 in the window, from the caller's call to the body read.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`

	// BigShare is the big requests' share of the calls answered 200 in the
	// window over their share of the calls drawn in it (but those too
	// large; those cut by the run's end included): 1 when big requests
	// fare as well as small ones, below when they are passed over. The
	// calls in progress at the window's start (answered in it, drawn
	// before) and at its end (drawn in it, cut) weigh alike, but a window
	// of a few minutes holds a few dozen big requests: ±0.2 is noise.
	BigShare float64 `json:"big_share"`
	BigOK    int     `json:"big_ok"`
	BigDrawn int     `json:"big_drawn"`
	Drawn    int     `json:"drawn"`

	// FIFOExcess is the worst excess, over the calls answered 200 in the
	// window, of a call's wait over its FIFO bound (see fifoBound);
	// OverFIFO counts the calls whose wait passed it. Negative: every wait
	// was within its bound, by that much at least.
	FIFOExcess time.Duration `json:"fifo_excess_ns"`
	OverFIFO   int           `json:"over_fifo"`

	// TooLargeDrawn is the calls of the whole run drawn larger than the
	// server's token limit (with -too-large) and not cut by its end (a
	// call that waits its turn in a gate the end cancels has no outcome),
	// TooLargeSent those of them the fake saw an attempt of, TooLargeTyped
	// the calls the client failed with a typed error unsent
	// (*polite.CostError, or the oracle's and the cookbook's
	// errLLMTooLarge).
	TooLargeDrawn int `json:"too_large_drawn"`
	TooLargeSent  int `json:"too_large_sent"`
	TooLargeTyped int `json:"too_large_typed"`

	// Timeline is the fake's decisions in bins of a twelfth of a period
	// from the run's start.
	Timeline []llmBin `json:"timeline,omitempty"`

	Skipped string `json:"skipped,omitempty"`
	Err     string `json:"error,omitempty"`
}

// An llmBin is what the fake decided in one bin of a timeline: the
// requests it admitted, what its quotas keep of them, and its refusals by
// quota.
type llmBin struct {
	Admitted     int            `json:"admitted"`
	Tokens       int            `json:"tokens"`
	OutputTokens int            `json:"output_tokens,omitempty"`
	Refused      map[string]int `json:"refused,omitempty"`
}

// fifoSlack is the FIFO bound's slack at a period of a minute; it scales
// with the period.
const fifoSlack = time.Second

// fifoBound returns the FIFO bound of a call made at start and admitted
// (its last attempt) at admit: the time the server's quotas take to refill
// what the fake admitted from start to admit, that call's charge included
// (the costs of the calls that went ahead of it, and its own), in the
// quota that takes longest, plus fifoSlack (scaled by the period). A
// server bucket never holds less than nothing at start, and gives back
// what it does not keep, so a client that keeps its calls in order and
// sends each as soon as the quotas hold its charge admits each within its
// bound: a wait past it is time lost, or a call passed over by later ones.
// admitted is the admissions in time order, sums their charges' running
// totals (sums[i] = the charges of admitted[:i]).
func fifoBound(start, admit time.Time, admitted []llmDecision, sums []llmfake.Charge, d llmDialect, period time.Duration) time.Duration {
	lo := sort.Search(len(admitted), func(i int) bool { return !admitted[i].at.Before(start) })
	hi := sort.Search(len(admitted), func(i int) bool { return admitted[i].at.After(admit) })
	ahead := llmfake.Charge{
		Requests:     sums[hi].Requests - sums[lo].Requests,
		Tokens:       sums[hi].Tokens - sums[lo].Tokens,
		OutputTokens: sums[hi].OutputTokens - sums[lo].OutputTokens,
	}
	refill := func(n int, limit float64) time.Duration {
		if limit <= 0 {
			return 0
		}
		return time.Duration(float64(n) / limit * float64(period))
	}
	slack := time.Duration(float64(fifoSlack) * float64(period) / float64(time.Minute))
	return max(refill(ahead.Requests, d.rpm), refill(ahead.Tokens, d.tpm), refill(ahead.OutputTokens, d.otpm)) + slack
}

// summarizeLLM computes a row from a run's record.
func summarizeLLM(d llmDialect, client string, cfg llmConfig, rec llmRecord) llmResult {
	r := llmResult{Dialect: d.name, Client: client, UseByQuota: map[string]float64{}, RefusedBy: map[string]int{}, ErrorsBy: map[string]int{}}
	from, to := rec.start.Add(cfg.period), rec.start.Add(cfg.duration)
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	window := to.Sub(from)
	periods := float64(window) / float64(cfg.period)

	decisions := slices.Clone(rec.decisions)
	slices.SortStableFunc(decisions, func(a, b llmDecision) int { return a.at.Compare(b.at) })
	tooLarge := map[int]bool{}
	for _, c := range rec.calls {
		if c.tooLarge {
			tooLarge[c.id] = true
		}
	}
	bin := max(cfg.period/12, time.Millisecond)
	var kept llmfake.Charge
	var admitted []llmDecision
	attemptsOf := map[int]int{}
	admittedAt := map[int]time.Time{}
	sentTooLarge := map[int]bool{}
	for _, dec := range decisions {
		attemptsOf[dec.id]++
		if dec.refused == llmfake.TooLarge || tooLarge[dec.id] {
			sentTooLarge[dec.id] = true
		}
		i := int(dec.at.Sub(rec.start) / bin)
		for len(r.Timeline) <= i {
			r.Timeline = append(r.Timeline, llmBin{})
		}
		b := &r.Timeline[i]
		if dec.refused != "" {
			if b.Refused == nil {
				b.Refused = map[string]int{}
			}
			b.Refused[dec.refused]++
		} else {
			admitted = append(admitted, dec)
			admittedAt[dec.id] = dec.at
			b.Admitted++
			b.Tokens += dec.kept.Tokens
			b.OutputTokens += dec.kept.OutputTokens
		}
		if !in(dec.at) {
			continue
		}
		r.Attempts++
		if dec.refused != "" {
			r.Refusals++
			r.RefusedBy[dec.refused]++
			continue
		}
		kept.Requests += dec.kept.Requests
		kept.Tokens += dec.kept.Tokens
		kept.OutputTokens += dec.kept.OutputTokens
	}
	sums := make([]llmfake.Charge, len(admitted)+1)
	for i, a := range admitted {
		sums[i+1] = llmfake.Charge{
			Requests:     sums[i].Requests + a.charged.Requests,
			Tokens:       sums[i].Tokens + a.charged.Tokens,
			OutputTokens: sums[i].OutputTokens + a.charged.OutputTokens,
		}
	}

	r.TooLargeSent = len(sentTooLarge)

	use := func(n int, limit float64) float64 { return ratio(float64(n), limit*periods) }
	r.UseByQuota[llmfake.QuotaRequests] = use(kept.Requests, d.rpm)
	if d.name == llmfake.Anthropic {
		r.UseByQuota[llmfake.QuotaInputTokens] = use(kept.Tokens, d.tpm)
		r.UseByQuota[llmfake.QuotaOutputTokens] = use(kept.OutputTokens, d.otpm)
		r.Use = max(r.UseByQuota[llmfake.QuotaInputTokens], r.UseByQuota[llmfake.QuotaOutputTokens])
	} else {
		r.UseByQuota[llmfake.QuotaTokens] = use(kept.Tokens, d.tpm)
		r.Use = r.UseByQuota[llmfake.QuotaTokens]
	}
	r.Refused = ratio(float64(r.Refusals), float64(r.Attempts))

	var ok []time.Duration
	attempts := 0
	r.FIFOExcess = time.Duration(math.MinInt64)
	for _, c := range rec.calls {
		if c.tooLarge {
			if c.cut && c.err != nil {
				continue
			}
			r.TooLargeDrawn++
			var ce *polite.CostError
			if errors.As(c.err, &ce) || errors.Is(c.err, errLLMTooLarge) {
				r.TooLargeTyped++
			}
			continue
		}
		if in(c.start) {
			r.Drawn++
			if c.draw.Big {
				r.BigDrawn++
			}
		}
		if c.cut || !in(c.end) {
			continue
		}
		r.Calls++
		attempts += attemptsOf[c.id]
		if c.status != 200 {
			r.Failed++
		}
		switch {
		case c.err != nil:
			r.Errors++
			r.ErrorsBy[errorKind(c.err)]++
			if errors.Is(c.err, context.DeadlineExceeded) {
				r.TimedOut++
			}
		case c.status == 200:
			r.OK++
			if c.draw.Big {
				r.BigOK++
			}
			ok = append(ok, c.end.Sub(c.start))
			if at, found := admittedAt[c.id]; found {
				excess := at.Sub(c.start) - fifoBound(c.start, at, admitted, sums, d, cfg.period)
				r.FIFOExcess = max(r.FIFOExcess, excess)
				if excess > 0 {
					r.OverFIFO++
				}
			}
		}
	}
	if r.FIFOExcess == time.Duration(math.MinInt64) {
		r.FIFOExcess = 0
	}
	slices.Sort(ok)
	r.P50, r.P99 = percentile(ok, 0.5), percentile(ok, 0.99)
	r.ErrorsPerSecond = ratio(float64(r.Errors), window.Seconds())
	r.AttemptsPerCall = ratio(float64(attempts), float64(r.Calls))
	r.BigShare = ratio(ratio(float64(r.BigOK), float64(r.OK)), ratio(float64(r.BigDrawn), float64(r.Drawn)))
	return r
}

// errorKind names the kind of a call's error: "throttled" (polite refused
// a wait that would pass the deadline: *polite.ThrottledError), "cost" (a
// *polite.CostError for a request within the server's limits: a limit
// learnt wrong), "budget" (polite's retry budget spent), "deadline" (the
// call's deadline passed during a wait or an answer), or "other".
func errorKind(err error) string {
	var throttled *polite.ThrottledError
	var ce *polite.CostError
	switch {
	case errors.As(err, &throttled):
		return "throttled"
	case errors.As(err, &ce):
		return "cost"
	case errors.Is(err, polite.ErrRetryBudgetExhausted):
		return "budget"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "other"
}
