package main

import "time"

// A profile is the limit a server enforces over one run: a rate, in
// requests per second, that is constant within each third of the run, and
// optionally a full outage during the middle third.
type profile struct {
	rates  [3]float64 // the limit in each third of the run, requests per second
	outage bool       // the middle third answers 503 to every request
}

// constant returns the profile of a server whose limit is perSecond for the
// whole run.
func constant(perSecond float64) profile {
	return profile{rates: [3]float64{perSecond, perSecond, perSecond}}
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

// rateAt returns the limit, in requests per second, elapsed into a run of
// length d. During an outage it is the limit the server enforces around it.
func (p profile) rateAt(elapsed, d time.Duration) float64 {
	return p.rates[third(elapsed, d)]
}

// downAt reports whether the server is in its outage elapsed into a run of
// length d.
func (p profile) downAt(elapsed, d time.Duration) bool {
	return p.outage && third(elapsed, d) == 1
}

// allowance returns ∫L(t)dt over a run of length d: the number of requests
// the limit allows, with nothing allowed during an outage. It is the
// denominator of utilization.
func (p profile) allowance(d time.Duration) float64 {
	var n float64
	for i, r := range p.rates {
		if p.outage && i == 1 {
			continue
		}
		n += r * d.Seconds() / 3
	}
	return n
}

// integral returns the integral of rateAt over [from, to) of a run of length
// d (outage or not): the tokens a bucket following the profile gains in that
// time. It is 0 when to <= from.
func (p profile) integral(from, to, d time.Duration) float64 {
	var n float64
	for i, r := range p.rates {
		lo := max(from, time.Duration(i)*d/3)
		hi := min(to, time.Duration(i+1)*d/3)
		switch {
		case i == 0:
			lo = from // the first third extends back before the run
		case i == 2:
			hi = to // and the last one past it
		}
		if hi > lo {
			n += r * (hi - lo).Seconds()
		}
	}
	return n
}

// nextChange returns when, elapsed into a run of length d, the rate next
// changes, and false if it does not change again.
func (p profile) nextChange(elapsed, d time.Duration) (time.Duration, bool) {
	cur := third(elapsed, d)
	for i := cur + 1; i < len(p.rates); i++ {
		if p.rates[i] != p.rates[cur] {
			return time.Duration(i) * d / 3, true
		}
	}
	return 0, false
}
