package main

import (
	"fmt"
	"time"
)

// demoBurst is the capacity of the demo's token buckets: the requests a
// full bucket lets through at once.
const demoBurst = 10

// A scenario is one kind of server the demo drives every client against.
// Its limit follows a schedule over thirds of the run.
type scenario struct {
	name   string     // short name: bucket, window, drop, outage
	title  string     // what the server does, as the chart and the table say it
	rates  [3]float64 // the limit in each third of the run, requests a second
	outage bool       // the middle third answers 503 to everything
	window bool       // fixed one-second windows with X-RateLimit-* headers, else a token bucket
}

// scenarios returns the demo's scenarios for a limit of perSecond, in the
// order the table and the chart show them.
func scenarios(perSecond float64) []scenario {
	l := perSecond
	return []scenario{
		{
			name:  "bucket",
			title: fmt.Sprintf("token bucket, %g/s, burst %d: 429 + Retry-After", l, demoBurst),
			rates: [3]float64{l, l, l},
		},
		{
			name:   "window",
			title:  fmt.Sprintf("fixed 1-s windows of %g: X-RateLimit-* headers, 429 without Retry-After (GitHub)", l),
			rates:  [3]float64{l, l, l},
			window: true,
		},
		{
			name:  "drop",
			title: fmt.Sprintf("token bucket whose limit drops and rises, %g → %g → %g/s: 429 + Retry-After", l, l/4, l),
			rates: [3]float64{l, l / 4, l},
		},
		{
			name:   "outage",
			title:  fmt.Sprintf("token bucket, %g/s, down in the middle third: 503 without Retry-After", l),
			rates:  [3]float64{l, l, l},
			outage: true,
		},
	}
}

// panelTitle is the first line of the title of sc's panel in the chart.
func (s scenario) panelTitle() string {
	return s.name + " — " + s.title
}

// third returns the third, 0 to 2, of a run of length d that elapsed falls
// in; times before the run count as the first third, times after it as the
// last.
func third(elapsed, d time.Duration) int {
	if elapsed <= 0 || d <= 0 {
		return 0
	}
	return min(int(3*elapsed/d), 2)
}

// rateAt returns the limit, in requests a second, elapsed into a run of
// length d. During an outage it is the limit the server keeps around it.
func (s scenario) rateAt(elapsed, d time.Duration) float64 {
	return s.rates[third(elapsed, d)]
}

// downAt reports whether the server is in its outage elapsed into a run of
// length d.
func (s scenario) downAt(elapsed, d time.Duration) bool {
	return s.outage && third(elapsed, d) == 1
}

// allowedAt returns what the server lets through elapsed into a run of
// length d, in requests a second: its limit, or 0 in its outage.
func (s scenario) allowedAt(elapsed, d time.Duration) float64 {
	if s.downAt(elapsed, d) {
		return 0
	}
	return s.rateAt(elapsed, d)
}

// allowance returns ∫L(t)dt over a run of length d: the requests the limit
// allows, none during an outage. It is the denominator of utilization.
func (s scenario) allowance(d time.Duration) float64 {
	var n float64
	for i, r := range s.rates {
		if s.outage && i == 1 {
			continue
		}
		n += r * d.Seconds() / 3
	}
	return n
}

// integral returns the integral of rateAt over [from, to) of a run of
// length d, outage or not: the tokens a bucket following the schedule gains
// in that time. It is 0 when to <= from.
func (s scenario) integral(from, to, d time.Duration) float64 {
	var n float64
	for i, r := range s.rates {
		lo := max(from, time.Duration(i)*d/3)
		hi := min(to, time.Duration(i+1)*d/3)
		switch i {
		case 0:
			lo = from // the first third extends back before the run
		case 2:
			hi = to // and the last one past it
		}
		if hi > lo {
			n += r * (hi - lo).Seconds()
		}
	}
	return n
}

// nextChange returns when, counted from the run's start, the limit next
// changes after elapsed, and false if it does not change again.
func (s scenario) nextChange(elapsed, d time.Duration) (time.Duration, bool) {
	for i := third(elapsed, d); i < 2; i++ {
		if s.rates[i+1] != s.rates[i] {
			return time.Duration(i+1) * d / 3, true
		}
	}
	return 0, false
}
