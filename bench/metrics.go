package main

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// A result is one row of the table: one client against one server.
type result struct {
	Server string `json:"server"`
	Client string `json:"client"`

	// Utilization is the server-counted 2xx answers divided by the limit's
	// allowance over the run, ∫L(t)dt (nothing during an outage).
	Utilization float64 `json:"utilization"`
	// Rejected is the server-counted refusals (429, 503, 403) divided by the
	// server-counted attempts; the 503s of an outage are failures, not
	// refusals.
	Rejected float64 `json:"rejected"`
	// AttemptsPerCall is the server-counted attempts divided by the calls.
	AttemptsPerCall float64 `json:"attempts_per_call"`
	// P50 and P99 are percentiles of the completed calls' durations.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// Calls is the calls the client completed before the run's end, and
	// Failed those of them that ended in an error or a non-2xx.
	Calls  int `json:"calls"`
	Failed int `json:"failed"`

	// The callers' view. Local is the calls the client failed without an
	// answer from the server (a refused wait, an empty retry budget: see
	// isLocal), LocalPerSecond the same per second of the run; TimedOut is
	// the calls that ran into their deadline; P99OK is the 99th percentile
	// of the durations of the calls that ended in a 2xx.
	Local          int           `json:"local"`
	LocalPerSecond float64       `json:"local_per_second"`
	TimedOut       int           `json:"timed_out"`
	P99OK          time.Duration `json:"p99_ok_ns"`

	// Attempts, OK and Refusals are the server's counts, of arrivals in the
	// run; Allowance is ∫L(t)dt.
	Attempts  int     `json:"attempts"`
	OK        int     `json:"ok"`
	Refusals  int     `json:"refusals"`
	Allowance float64 `json:"allowance"`

	// Timeline is the server's counts in bins of timelineBin from the
	// run's start: what went through, and what was refused.
	Timeline []bin `json:"timeline,omitempty"`

	// FirstSecond is the utilization of the run's first second, for a
	// client that restarts with memory (client.learn); 0 for others.
	FirstSecond float64 `json:"first_second,omitempty"`

	// Joined is what the process that joined a fleet half-way sent and
	// had refused, for polite-fleet-join; nil for others.
	Joined *joinCount `json:"joined,omitempty"`

	// Skipped says why the pair was not run, Err why it failed.
	Skipped string `json:"skipped,omitempty"`
	Err     string `json:"error,omitempty"`
}

// summarize computes a result from the server's arrivals, of which it
// counts those in [origin, origin+d), and the workers' stats.
func summarize(srv, cl string, p profile, origin time.Time, d time.Duration, arrivals []arrival, stats []workerStats) result {
	r := result{Server: srv, Client: cl, Allowance: p.allowance(d)}
	end := origin.Add(d)
	for _, a := range arrivals {
		if a.at.Before(origin) || !a.at.Before(end) {
			continue
		}
		r.Attempts++
		i := int(a.at.Sub(origin) / timelineBin)
		for len(r.Timeline) <= i {
			r.Timeline = append(r.Timeline, bin{})
		}
		switch {
		case a.status/100 == 2:
			r.OK++
			r.Timeline[i].OK++
		case a.status == http.StatusServiceUnavailable && p.downAt(a.at.Sub(origin), d):
			r.Timeline[i].Refused++ // the outage, not the limiter: failed, not refused
		case isRefusal(a.status):
			r.Refusals++
			r.Timeline[i].Refused++
		}
	}
	var durations, ok []time.Duration
	for _, s := range stats {
		durations = append(durations, s.durations...)
		ok = append(ok, s.ok...)
		r.Failed += s.failed
		r.Local += s.local
		r.TimedOut += s.timedOut
	}
	r.Calls = len(durations)
	slices.Sort(durations)
	slices.Sort(ok)
	r.P50 = percentile(durations, 0.50)
	r.P99 = percentile(durations, 0.99)
	r.P99OK = percentile(ok, 0.99)
	r.LocalPerSecond = ratio(float64(r.Local), d.Seconds())
	r.Utilization = ratio(float64(r.OK), r.Allowance)
	r.Rejected = ratio(float64(r.Refusals), float64(r.Attempts))
	r.AttemptsPerCall = ratio(float64(r.Attempts), float64(r.Calls))
	return r
}

// timelineBin is the width of a bin of Result.Timeline.
const timelineBin = 250 * time.Millisecond

// A bin is what the server counted in one bin of a timeline.
type bin struct {
	OK      int `json:"ok"`
	Refused int `json:"refused"`
}

// timeline returns r's timeline as one line: "ok/refused" per bin.
func (r result) timeline() string {
	var b strings.Builder
	for i, t := range r.Timeline {
		if i > 0 && i%4 == 0 {
			b.WriteString(" |")
		}
		fmt.Fprintf(&b, " %d/%d", t.OK, t.Refused)
	}
	return b.String()
}

// isRefusal reports whether status is one a limiter refuses with.
func isRefusal(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusForbidden:
		return true
	}
	return false
}

// percentile returns the q-quantile (nearest rank) of sorted, or 0 if it is
// empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
