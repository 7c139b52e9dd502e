package fleet_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/politehttp/polite/fleet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rules by which a throttle that both controllers take as a congestion
// event is compared (see docs/fleet-learning.md, "The shared controller and
// Gentle, rule by rule"), and those by which they may take one throttle
// differently.
const (
	// Both measure the limit the same way: W within tolerance.
	ruleSame = "same"
	// The first event: the shared controller's floor (fa) is Gentle's, and
	// its W is at least that (it takes the last half second's rate too).
	ruleFloor = "floor"
	// The shared controller was finding the limit: its W is at least
	// Gentle's (it takes the rate of the last successes too, and half the
	// rate it last booked at).
	ruleFinding = "finding"
	// A probe after a hold longer than 4 seconds: Gentle's W is at least
	// the shared controller's (it counts the probe and the last 4 seconds
	// of the hold only).
	ruleLongProbe = "long probe"
	// Within half a second of an event, while holding, the shared
	// controller takes a throttle for that event's; Gentle for an event (or
	// a halving) of its own.
	ruleHalfSecond = "half second"
	// The send was booked under an earlier generation than the one it went
	// in: the shared controller tells a send by when it was booked, Gentle
	// by when it was sent.
	ruleBooked = "booked"
	// Gentle took the server for one that lets no burst through, and W for
	// gentleTight of the rate a climb or a probe crossed it at at least;
	// the shared controller has no such rule, and its W may be lower.
	ruleTight = "tight"
	// An event after the two diverged (W, their modes, or holding against
	// probing): compared by no rule.
	ruleApart = "apart"
)

// The shared controller (the fleet's Lua) re-implements Gentle: fed the
// same traces, one process alone against a simulated server (so that the
// fleet hears every answer, as Gentle does), the two take each throttle
// alike, measure the same limit, and set the same rate, but for the rules
// they were made to differ by, each of which a case expects by name. In
// short mode, the cold starts only.
func TestGentleAndTheSharedControllerAgree(t *testing.T) {
	fleet.UseClock(t)
	rdb := newClient(t, sharedAddr(t))
	s, ms := time.Second, time.Millisecond
	held := func(srv server, length time.Duration) scenario {
		return scenario{srv: srv, workers: 16, rtt: 20 * ms, length: length, held: 100, stood: 4 * s}
	}
	cold := func(srv server, length time.Duration) scenario {
		return scenario{srv: srv, workers: 16, rtt: 20 * ms, length: length}
	}
	for _, c := range []struct {
		name  string
		sc    scenario
		same  int      // events measured alike, at least
		rules []string // the other rules the trace shows
	}{
		{"held at a bucket's limit", held(&bucket{rate: steady(100), burst: 10}, 60*s), 3, nil},
		{"held at a limit with a burst of 1", held(&bucket{rate: steady(100), burst: 1}, 60*s), 4, nil},
		{"held at a window's limit", held(&window{n: 100}, 45*s), 3, nil},
		{"a limit that drops and comes back", held(&bucket{rate: steps([]float64{100, 40, 100}, []time.Duration{15 * s, 30 * s}), burst: 10}, 50*s),
			7, []string{ruleFinding, ruleHalfSecond, ruleBooked, ruleApart}},
		{"a limit that rises", held(&bucket{rate: steps([]float64{100, 200}, []time.Duration{12 * s}), burst: 10}, 45*s),
			1, []string{ruleFinding, ruleLongProbe, ruleHalfSecond, ruleApart}},
		{"a limit held too low", scenario{srv: &bucket{rate: steady(100), burst: 10}, workers: 16, rtt: 20 * ms, length: 40 * s, held: 80, stood: 4 * s},
			2, []string{ruleFinding, ruleLongProbe, ruleApart}},
		{"a cold start", cold(&bucket{rate: steady(100), burst: 10}, 30*s), 0, []string{ruleFloor, ruleFinding, ruleHalfSecond, ruleApart}},
		// Gentle, tight, holds at once below a climb's crossing taken whole,
		// where the shared controller, with no such rule, is still finding
		// the limit.
		{"a cold start with a burst of 1", cold(&bucket{rate: steady(100), burst: 1}, 20*s),
			0, []string{ruleFloor, ruleFinding, ruleTight, ruleHalfSecond, ruleBooked, ruleApart}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.sc.held > 0 {
				t.Skip("short: a trace of 40 to 60 s on Redis; the cold starts run")
			}
			tr := runTrace(t, rdb, c.sc)
			cmp := compare(tr, c.sc.rtt, c.sc.held > 0)
			for _, line := range cmp.log {
				t.Log(line)
			}
			assert.Empty(t, cmp.failures)
			assert.GreaterOrEqual(t, cmp.counts[ruleSame], c.same, "events measured alike")
			var rules []string
			for _, r := range []string{ruleFloor, ruleFinding, ruleTight, ruleLongProbe, ruleHalfSecond, ruleBooked, ruleApart} {
				if cmp.counts[r] > 0 {
					rules = append(rules, r)
				}
			}
			assert.Equal(t, c.rules, rules, "the rules the two differ by in this trace")
			if c.same > 0 {
				require.Positive(t, cmp.rates, "bookings at which both held")
			}
			t.Logf("%d sends; bookings both held at: %d, their rates at most %.2f%% apart (%.2f%% of the tolerance); %d probes began at most %v apart, reached 1.1·W at most %v apart",
				tr.sent, cmp.rates, 100*cmp.rateGap, 100*cmp.rateShare, cmp.probes, cmp.probeGap, cmp.climbGap)
		})
	}
}

// A comparison is what compare found in a trace: the events by rule, the
// bookings at which both held and how far apart their rates were, and
// what failed.
type comparison struct {
	counts    map[string]int
	rates     int           // bookings at which both held at a W they agree on
	rateGap   float64       // the widest gap of their rates there, as a share
	rateShare float64       // and as a share of its tolerance
	probes    int           // probes after one event whose beginnings were compared
	probeGap  time.Duration // the widest gap of their beginnings
	climbGap  time.Duration // and of the times they took to reach 1.1·W
	log       []string
	failures  []string
}

// A mode is where a controller stands in finding W, as its events show:
// both controllers move between them alike on the same Ws.
type mode uint8

const (
	unthrottled mode = iota
	seeking          // W a floor, or found more than 5% above the last: no hold
	fresh            // W just found: a hold of a second before the probe that verifies it
	settled          // W measured and verified: a hold as long as it stood
)

// A stand is a controller's mode; when its W was last found (moved more
// than 5%), for its hold, once settled, is as long as W has stood; and
// when a W that stood last dropped to less than half, for its hold is
// then 10% of the time since, until that is 4 seconds. Gentle keeps both
// instants in whole seconds (whole): found rounded, dropped truncated.
type stand struct {
	mode           mode
	found, dropped time.Duration
	whole          bool
}

// took moves st on by the event s at at.
func (st *stand) took(s said, at time.Duration) {
	if st.mode == unthrottled || math.Abs(s.w-s.wBefore) > 0.05*s.wBefore {
		st.found = at
		if st.whole {
			st.found = at.Round(time.Second)
		}
	}
	if s.hold < 0 && st.mode != unthrottled && s.w < 0.5*s.wBefore && (st.mode != fresh || s.span >= 750*time.Millisecond) {
		st.dropped = at
		if st.whole {
			st.dropped = at.Truncate(time.Second)
		}
	}
	switch {
	case st.mode == unthrottled || s.w > 1.05*s.wBefore:
		st.mode = seeking
	case st.mode == seeking:
		st.mode = fresh
	default:
		st.mode = settled
	}
}

// probeGap returns the least and the most by which the shared
// controller's probe after the event s, standing as lua, may begin after
// Gentle's, standing as g, and false if they hold differently (another
// mode, or a W found or dropped more than a second apart). The shared
// controller's hold begins again when its halvings end (restart after the
// event), and, as long as W had stood then, is that much longer but at its
// least (4 s) or most (30 s); after a drop, 10% of that longer. Gentle's
// instants in whole seconds move its hold by the difference. Each probe
// is seen at a booking: 2 round trips and an interval at W more.
func probeGap(s throttleSeen, lua, g stand, rtt time.Duration) (lo, hi time.Duration, ok bool) {
	near := func(a, b time.Duration) bool { return max(a-b, b-a) <= time.Second }
	recent := func(d time.Duration) bool { return d != 0 && s.at-d < 40*time.Second } // 4 s is 10% of it
	restart, want := s.lua.restart, s.lua.restart
	switch {
	case lua.mode != g.mode || lua.mode == unthrottled || lua.mode == seeking:
		return 0, 0, false
	case lua.mode == fresh:
	case recent(lua.dropped) || recent(g.dropped):
		if !near(lua.dropped, g.dropped) {
			return 0, 0, false
		}
		want = restart + time.Duration(0.10/0.90*float64(restart+g.dropped-lua.dropped))
	case !near(lua.found, g.found):
		return 0, 0, false
	default:
		want = 2*restart + g.found - lua.found
	}
	slack := 2*rtt + time.Duration(float64(time.Second)/s.gentle.wBefore)
	return min(restart, want) - slack, max(restart, want) + slack, true
}

// compare goes through tr's throttles and bookings in order. An event both
// take is compared by the rule it falls under. A throttle they take
// differently must be one the half-second rule or the generation of its
// booking explains, or come after one such since the last event both took.
// While the two agree (the same mode, and Ws within the last event's
// tolerance: from the start if they began holding one limit, held), the
// rates they hold at must too.
func compare(tr *trace, rtt time.Duration, held bool) *comparison {
	c := &comparison{counts: map[string]int{}}
	lua, g := stand{}, stand{whole: true}
	if held {
		lua, g = stand{mode: settled, found: -tr.stood}, stand{mode: settled, found: -tr.stood, whole: true}
	}
	aligned, tol, apart := held, 0.0, false
	samples := tr.samples
	rates := func(until time.Duration) {
		for len(samples) > 0 && samples[0].at < until {
			c.rate(samples[0], aligned, tol)
			samples = samples[1:]
		}
	}
	for _, s := range tr.seen {
		rates(s.at)
		if s.lua.kind == "event" && s.gentle.kind == "event" {
			same := aligned && lua.mode == g.mode && relative(s.lua.wBefore, s.gentle.wBefore) <= tol
			var rule string
			rule, tol = c.event(s, rtt, lua, g, same)
			lua.took(s.lua, s.at)
			g.took(s.gentle, s.at)
			// After a rule by which they differ, they agree again only once
			// they measure alike.
			aligned = (rule == ruleSame || rule == ruleApart) && lua.mode == g.mode && relative(s.lua.w, s.gentle.w) <= tol
			apart = false
			continue
		}
		if s.lua.kind == "event" {
			lua.took(s.lua, s.at)
		}
		if s.gentle.kind == "event" {
			g.took(s.gentle, s.at)
		}
		if s.lua.kind == s.gentle.kind {
			continue
		}
		rule := ruleApart
		switch {
		case s.halfSecond:
			rule = ruleHalfSecond
		case s.booked:
			rule = ruleBooked
		case !apart:
			c.fail(s, "a throttle the shared controller took as %s, Gentle as %s", s.lua.kind, s.gentle.kind)
			continue
		}
		c.counts[rule]++
		c.logf(s, rule, tol)
		aligned, apart = false, true
	}
	rates(math.MaxInt64)
	return c
}

// event compares an event both took, standing as lua and g, and returns
// the rule it fell under and how far apart its measures could be. same
// reports that the two agreed before it.
func (c *comparison) event(s throttleSeen, rtt time.Duration, lua, g stand, same bool) (string, float64) {
	tol := tolerance(s, rtt)
	near := relative(s.lua.w, s.gentle.w) <= tol
	rule := ruleSame
	switch {
	case lua.mode == unthrottled && g.mode == unthrottled:
		rule = ruleFloor
		if math.Abs(s.floor-s.gentle.w) > 1e-9*s.gentle.w {
			c.fail(s, "the floor counted differently: %.3f and Gentle's %.3f", s.floor, s.gentle.w)
		}
		if s.lua.w < s.gentle.w {
			c.fail(s, "the floor: %.1f below Gentle's %.1f", s.lua.w, s.gentle.w)
		}
	case s.tight && s.gentle.w > s.lua.w*(1+tol) && (g.mode == seeking || s.gentle.hold >= 0):
		rule = ruleTight
	case lua.mode == seeking && g.mode == seeking:
		rule = ruleFinding
		if s.lua.w < s.gentle.w*(1-tol) {
			c.fail(s, "finding: %.1f below Gentle's %.1f", s.lua.w, s.gentle.w)
		}
	case !same || (s.lua.hold < 0) != (s.gentle.hold < 0):
		rule = ruleApart
	case s.gentle.hold > 4*time.Second+rtt && !near:
		rule = ruleLongProbe
		if s.gentle.w < s.lua.w*(1-tol) {
			c.fail(s, "a probe after a long hold: Gentle's %.1f below %.1f", s.gentle.w, s.lua.w)
		}
	case !near:
		c.fail(s, "W %.2f and Gentle's %.2f, %.2f%% apart, more than %.2f%%", s.lua.w, s.gentle.w,
			100*relative(s.lua.w, s.gentle.w), 100*tol)
	}
	if lo, hi, ok := probeGap(s, lua, g, rtt); ok && s.lua.hold >= 0 && s.gentle.hold >= 0 {
		gap := s.lua.hold - s.gentle.hold
		c.probes++
		c.probeGap = max(c.probeGap, gap, -gap)
		if gap < lo || gap > hi {
			c.fail(s, "the probe began %v after Gentle's, not %v to %v", gap, lo, hi)
		}
		// Both probes double every second up to 1.1·W: seen at bookings
		// and successes, two intervals apart at most.
		if s.lua.climb >= 0 && s.gentle.climb >= 0 {
			d := s.lua.climb - s.gentle.climb
			c.climbGap = max(c.climbGap, d, -d)
			if max(d, -d) > time.Duration(2*float64(time.Second)/s.gentle.wBefore) {
				c.fail(s, "the probe took %v to reach 1.1·W, Gentle's %v", s.lua.climb, s.gentle.climb)
			}
		}
	}
	c.counts[rule]++
	c.logf(s, rule, tol)
	return rule, tol
}

// rate compares the rates of a booking: where one holds at a W the two
// agree on (halved as the shared controller is) and the other does not
// probe, the rates are as far apart as the Ws at most.
func (c *comparison) rate(x sample, aligned bool, tol float64) {
	if !aligned || x.luaW == 0 || x.goW == 0 {
		return
	}
	level := func(w float64) float64 { return hold * w / math.Exp2(float64(x.luaSpent)) }
	luaHolds, goHolds := relative(x.luaRate, level(x.luaW)) < 1e-3, relative(x.goRate, level(x.goW)) < 1e-3
	luaUnder, goUnder := x.luaRate < level(x.luaW)*1.001, x.goRate < level(x.goW)*1.001
	if !(luaHolds && goUnder || goHolds && luaUnder) {
		return
	}
	c.rates++
	gap := relative(x.luaRate, x.goRate)
	c.rateGap = max(c.rateGap, gap)
	if tol > 0 {
		c.rateShare = max(c.rateShare, gap/tol)
	}
	if gap > tol+1e-3 { // and the interval's rounding to a microsecond
		c.failures = append(c.failures, fmt.Sprintf("%.3fs: held at %.2f a second, Gentle at %.2f", x.at.Seconds(), x.luaRate, x.goRate))
	}
}

// tolerance returns how far apart, as a share, the two measures of W at the
// event s may be. The shared controller counts the sends that went since
// its last event, times the share of their answers told so far that were
// successes; Gentle counts the successes told. They differ by the sends in
// flight, a round trip's worth at the rate they went at, and by an answer
// at the event's instant, over the time since the last event: 3 requests
// in 5 s at 100 a second is 0.6%; in half a second, 6%.
func tolerance(s throttleSeen, rtt time.Duration) float64 {
	w := min(s.lua.w, s.gentle.w)
	return (s.lua.rateBefore*rtt.Seconds() + 1) / (w * s.lua.span.Seconds())
}

func (c *comparison) fail(s throttleSeen, format string, args ...any) {
	c.failures = append(c.failures, fmt.Sprintf("%.3fs: ", s.at.Seconds())+fmt.Sprintf(format, args...))
}

// logf records a throttle's figures for the test's log.
func (c *comparison) logf(s throttleSeen, rule string, tol float64) {
	held := func(d time.Duration) string {
		if d < 0 {
			return "holding"
		}
		return fmt.Sprintf("held %.2fs", d.Seconds())
	}
	c.log = append(c.log, fmt.Sprintf("%7.3fs %-11s shared: %-7s W %6.1f → %6.1f, %-12s | Gentle: %-7s W %6.1f → %6.1f, %-12s | tolerance %.2f%%",
		s.at.Seconds(), rule, s.lua.kind, s.lua.wBefore, s.lua.w, held(s.lua.hold), s.gentle.kind, s.gentle.wBefore, s.gentle.w,
		held(s.gentle.hold), 100*tol))
}
