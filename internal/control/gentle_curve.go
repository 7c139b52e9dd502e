package control

import (
	"math"
	"time"
)

// curve returns the rate at n (Unix nanoseconds): gentleHold·W through the
// hold, then a probe that doubles it every gentleDouble up to
// gentleRisen·W, and four times as fast past that, for the limit has
// risen; while W is found, no hold, and a doubling every findDouble (the
// curve standing still while refused). It is scaled to W, so that it
// behaves alike at 1 and at 10,000 requests a second, and is never above
// a stated limit. It requires g.mu held.
func (g *Gentle) curve(n int64) float64 {
	rate := gentleHold * g.limit
	t := nanosToSeconds(n-g.ramp) - g.hold(n)
	switch {
	case t <= 0:
	case g.seeking() && g.frozen != 0:
		rate *= math.Exp2(max(nanosToSeconds(g.frozen-g.ramp), 0) / g.findDouble())
	case g.seeking():
		rate *= math.Exp2(t / g.findDouble())
	default:
		rate *= math.Exp2(t / max(gentleDouble, g.lagDouble()))
		if risen := gentleRisen * g.limit; rate > risen {
			rate = risen * math.Exp2(4*math.Log2(rate/risen))
		}
	}
	if g.stated > 0 {
		rate = math.Min(rate, g.stated)
	}
	// Doubling four times a second, a probe that finds no limit would
	// overflow to +Inf within minutes.
	return math.Min(rate, gentleMaxRate)
}

// hold returns how long the rate holds before a probe, in seconds, at n
// (Unix nanoseconds): none while W is sought; gentleVerify before the
// probe that verifies a W just found; after a drop of a W that stood,
// gentleShorten of the time since the drop (gentleShortWait at least), so
// that a limit that comes back soon is found soon, until that is
// gentleWait; otherwise as long as W had stood when the hold began
// (gentleWait to gentleMaxWait), so that a limit the probes keep
// confirming is probed ever less often. It requires g.mu held.
func (g *Gentle) hold(n int64) float64 {
	switch {
	case g.seeking():
		return 0
	case g.verifies():
		return gentleVerify
	case g.dropped != 0:
		if since := nanosToSeconds(n) - float64(g.dropped); since < gentleWait/gentleShorten {
			return max(gentleShortWait, gentleShorten*since)
		}
	}
	return min(max(nanosToSeconds(g.ramp)-float64(g.found), gentleWait), gentleMaxWait)
}

// verifies reports whether the next probe verifies a W just found (by a
// climb or a probe that raised it, or after an aftershock): it comes after
// a hold of gentleVerify, and measures over the probe and that much of the
// hold, for a W found while callers were held, or on a loaded machine, is
// often low. Not where the server counts refusals (a probe so soon after
// a crossing locks the client out) or bursts (the probe would measure the
// burst). It requires g.mu held.
func (g *Gentle) verifies() bool { return g.state == holding && g.fresh && g.wary == 0 }

// probing reports whether the rate is past its hold at n (Unix
// nanoseconds): a probe, or W sought. It requires g.mu held.
func (g *Gentle) probing(n int64) bool { return nanosToSeconds(n-g.ramp) > g.hold(n) }

// rising reports whether the rate rises at n (Unix nanoseconds): W
// sought, or a probe. It requires g.mu held.
func (g *Gentle) rising(n int64) bool { return g.seeking() || g.probing(n) }

// findDouble returns the seconds in which the rate doubles while W is
// sought: from a floor, gentleFindRTTs of the least round trip, so that a
// floor far below the limit is left in round trips, but never faster than
// a sixteenth of gentleDouble (a thirty-second on a server with no burst,
// where the climb's crossing costs a request, not a burst's worth, and
// its floor is a single request), nor slower than a quarter of it (when
// round trips are long, or unknown), as while finding. It requires g.mu
// held.
func (g *Gentle) findDouble() float64 {
	base := g.baseLocked()
	if base == 0 || g.state != climbing {
		return max(gentleDouble/4, g.lagDouble())
	}
	least := gentleDouble / 16
	if g.tight == tightYes {
		least = gentleDouble / 32
	}
	return max(min(max(gentleFindRTTs*float64(base)/1e6, least), gentleDouble/4), g.lagDouble())
}

// lagDouble returns the least seconds in which the rate doubles after an
// event a hold made: gentleHeldRTTs of that hold's round trip, for the
// next hold tells as late, and each request sent past the limit meanwhile
// is held longer than the one before; 0 after an event a refusal made. It
// requires g.mu held.
func (g *Gentle) lagDouble() float64 { return gentleHeldRTTs * float64(g.lag) / 1e3 }

// findRate returns the rate at n (Unix nanoseconds) while W is sought:
// the curve, however little was sent, up to gentleDemand times the rate of
// the last successes (see demand), and no lower than twice gentleHold·W
// and a first contact's first round. Callers held by a refusal's
// Retry-After send nothing, and a curve that rose meanwhile would let them
// all go at once, into the same refusal. It requires g.mu held.
func (g *Gentle) findRate(n int64) float64 {
	return min(g.curve(n), max(2*gentleHold*g.limit, gentleDemand*g.demand(n), gentleInitial/g.roundLocked()))
}

// current returns the rate to send at, halved once for each refusal since
// the epoch began (while W is found from a floor, still a request every
// four doublings of the climb, so that the server is asked again within
// round trips), the burst, and whether the rate applies. It requires g.mu
// held.
func (g *Gentle) current() (float64, int, bool) {
	least := gentleMinRate
	if g.spent > 0 && g.seeking() {
		least = max(least, 1/(4*g.findDouble()))
	}
	return math.Max(math.Ldexp(g.rate, -int(g.spent)), least), 1, g.state != unthrottled
}

// ServerLimit returns the server's limit as far as g knows it: the limit
// it states, or W once a throttle has measured it; 0 while it is unknown
// (no throttle yet, or only a floor).
func (g *Gentle) ServerLimit() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.stated > 0:
		return g.stated
	case g.limitKnown():
		return g.limit
	}
	return 0
}

// Rate returns the rate to send at, in requests per second.
func (g *Gentle) Rate() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	rate, _, _ := g.current()
	return rate
}

// Limit returns W, the estimate of the server's limit, in requests per
// second: 0 until the first throttle.
func (g *Gentle) Limit() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// State returns where g stands, its gentleState one for one, and since
// when: when W was found at about its value, or else when the epoch
// began (the last congestion event).
func (g *Gentle) State() (State, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var since time.Time
	switch {
	case g.found > 0 && g.state != climbing:
		since = time.Unix(int64(g.found), 0)
	case g.since > 0:
		since = time.Unix(0, g.since)
	}
	switch g.state {
	case climbing:
		return Climbing, since
	case finding:
		return Finding, since
	case holding:
		return Holding, since
	}
	return Unthrottled, time.Time{}
}

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (g *Gentle) Enabled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state != unthrottled
}

// Tight reports whether the key's first contact showed a server that lets
// no burst through (see tightRate).
func (g *Gentle) Tight() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tight == tightYes
}

// Estimate returns W, as Limit does.
func (g *Gentle) Estimate() float64 { return g.Limit() }

// thaw ends at n a time of refusals that began while W was sought: the
// curve, which stood still meanwhile, goes on from where it stood. It
// requires g.mu held.
func (g *Gentle) thaw(n int64) {
	if g.frozen == 0 {
		return
	}
	g.ramp = min(g.ramp+max(n-g.frozen, 0), n)
	g.frozen = 0
}

// Grown returns the rate at now while W is sought, when the rate doubles
// however few requests come back, up to gentleDemand times the rate of the
// last successes (see findRate), so that a key climbing from a low floor
// sends more as the curve rises, not only when its few requests come
// back; and false otherwise.
func (g *Gentle) Grown(now time.Time) (float64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.seeking() {
		return 0, false
	}
	if r := g.findRate(now.UnixNano()); r > g.rate {
		g.rate = r
	}
	rate, _, _ := g.current()
	return rate, true
}

// count counts a success at n (Unix nanoseconds) in its quarter second.
// It requires g.mu held.
func (g *Gentle) count(n int64) {
	g.turn(n)
	if c := &g.second[g.slot%5]; *c < math.MaxUint16 {
		*c++
	}
}

// turn moves the quarter seconds on to the one n (Unix nanoseconds) falls
// in, forgetting those more than a second before it. It requires g.mu
// held.
func (g *Gentle) turn(n int64) {
	slot := uint32(n / int64(time.Second/4))
	if d := slot - g.slot; d != 0 {
		for i := range min(d, 5) {
			g.second[(g.slot+1+i)%5] = 0
		}
		g.slot = slot
	}
}

// demand returns the rate of the last successes at n (Unix nanoseconds):
// that of the last second (lastSecond), or of the last whole quarter
// second and the one in progress, whichever is more, so that a rate that
// rises fast is seen soon. It requires g.mu held.
func (g *Gentle) demand(n int64) float64 {
	return max(g.successRate(n, 5), g.successRate(n, 2))
}

// lastSecond returns the rate of successes over the last second and a
// bit, up to n (Unix nanoseconds): the last four whole quarter seconds
// and the one in progress. It requires g.mu held.
func (g *Gentle) lastSecond(n int64) float64 { return g.successRate(n, 5) }

// successRate returns the rate of successes over the last k quarter
// seconds up to n (Unix nanoseconds), k at most 5: the k−1 whole ones
// before the one in progress, and that one. It requires g.mu held.
func (g *Gentle) successRate(n int64, k uint32) float64 {
	g.turn(n)
	sum := 0
	for i := range k {
		sum += int(g.second[(g.slot+5-i)%5])
	}
	return float64(sum) / (float64(k-1)/4 + nanosToSeconds(n%int64(time.Second/4)))
}
