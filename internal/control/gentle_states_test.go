package control

import (
	"flag"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Gentle was restructured into explicit states (issue 36); these tests
// hold it to what it did before, bit for bit. The traces come from
// simulated servers (token buckets, servers that count refusals or queue,
// fixed windows; limits that drop and rise, outages, stated limits,
// memories) driven by a client that paces at Gentle's rate, from random
// calls, and from one trace a rule, so that every rule is reached. Every
// value Gentle returns on a trace goes into the trace's digest, and the
// digests must be those in testdata/gentle_traces.golden: a frozen copy of
// Gentle as it was before the states (5a2e28f, gentle_frozen_test.go)
// returned the same values, bit for bit, on every trace when the file
// was written, and -update writes it anew after a change meant to change
// Gentle's behaviour.

// twin drives a Gentle through a trace and keeps the digest of every
// value it returns.
type twin struct {
	t     testing.TB
	g     *Gentle
	h     hash.Hash64
	now   time.Time
	start time.Time
	marks []Mark // what Sending said, oldest first
}

// A call is one call of a trace.
type call struct {
	what   string
	o      Outcome
	stated float64
	mark   Mark
	rtt    time.Duration
	recall Recalled
}

func newTwin(t testing.TB, start time.Time) *twin {
	tw := &twin{t: t, g: NewGentle(start), h: fnv.New64a(), now: start, start: start}
	tw.log(call{what: "new"})
	tw.check("new")
	return tw
}

// log puts c, made now, into the digest: a change of the calls changes
// it, as a change of what Gentle says does.
func (tw *twin) log(c call) {
	fmt.Fprintf(tw.h, "%d %s %d %x %d %d %+v;", tw.now.Sub(tw.start), c.what, c.o, math.Float64bits(c.stated), c.mark, c.rtt, c.recall)
}

// put puts v, a value Gentle returned, into the digest.
func (tw *twin) put(v any) {
	switch v := v.(type) {
	case float64:
		fmt.Fprintf(tw.h, "%x,", math.Float64bits(v))
	default:
		fmt.Fprintf(tw.h, "%v,", v)
	}
}

// digest returns the trace's digest.
func (tw *twin) digest() uint64 { return tw.h.Sum64() }

func (tw *twin) rate(r Rate) {
	tw.put(r.PerSecond)
	tw.put(r.Burst)
	tw.put(r.Enabled)
	tw.put(r.Forgot)
}

// check puts what Gentle says into the digest, without changing it.
func (tw *twin) check(string) {
	tw.put(tw.g.Rate())
	tw.put(tw.g.Limit())
	tw.put(tw.g.Estimate())
	tw.put(tw.g.Enabled())
	tw.put(tw.g.ServerLimit())
	tw.put(tw.g.Timed())
	k := tw.g.Known(tw.now)
	tw.put(k.Limit)
	tw.put(k.Stated)
	tw.put(k.Stood)
	tw.put(k.NoBurst)
	tw.put(k.CountsRefusals)
	r, b, ok := tw.g.StartRate(tw.now)
	tw.put(r)
	tw.put(b)
	tw.put(ok)
}

// at moves the clock to t (never back).
func (tw *twin) at(t time.Time) {
	if t.Before(tw.now) {
		tw.t.Fatalf("the clock goes back: %v before %v", t, tw.now)
	}
	tw.now = t
}

// send takes what Sending says now, for an attempt.
func (tw *twin) send() Mark {
	m := tw.g.Sending()
	tw.put(m)
	tw.marks = append(tw.marks, m)
	if len(tw.marks) > 256 {
		tw.marks = tw.marks[128:]
	}
	return m
}

// observe feeds Gentle an outcome.
func (tw *twin) observe(o Outcome, stated float64, mark Mark, rtt time.Duration) Rate {
	tw.log(call{what: "Observe", o: o, stated: stated, mark: mark, rtt: rtt})
	r := tw.g.Observe(tw.now, o, stated, mark, rtt)
	tw.rate(r)
	tw.check("Observe")
	return r
}

// grown asks Gentle for the rate grown with time.
func (tw *twin) grown() (float64, bool) {
	tw.log(call{what: "Grown"})
	r, ok := tw.g.Grown(tw.now)
	tw.put(r)
	tw.put(ok)
	tw.check("Grown")
	return r, ok
}

// recall starts Gentle from a memory.
func (tw *twin) recall(r Recalled) {
	tw.log(call{what: "Recall", recall: r})
	x, ok := tw.g.Recall(tw.now, r)
	tw.put(x)
	tw.put(ok)
	tw.check("Recall")
}

// mark returns a mark taken back sends ago; NoMark if back < 0 or no
// send was.
func (tw *twin) mark(back int) Mark {
	if back < 0 || len(tw.marks) == 0 {
		return NoMark
	}
	return tw.marks[max(len(tw.marks)-1-back, 0)]
}

// Random calls.

// randomTrace feeds tw the calls bytes b say (see op); whatever b holds
// is a trace.
func randomTrace(tw *twin, b []byte) {
	for len(b) >= 4 {
		op(tw, b[0], b[1], b[2], b[3])
		b = b[4:]
	}
}

// statedLimits are the limits a trace's server may state.
var statedLimits = [8]float64{0.3, 1, 2.5, 10, 50, 100, 1000, 1e12}

// op makes one call of four bytes: b0 what (an outcome, a send, Grown),
// b1 how long before it, b2 which mark and what stated limit, b3 the
// round trip.
func op(tw *twin, b0, b1, b2, b3 byte) {
	tw.at(tw.now.Add(step(b1)))
	switch k := b0 & 15; {
	case k < 10:
		o := [8]Outcome{OK, OK, OK, OK, Throttled, Throttled, Failed, OK}[(b0>>4)&7]
		stated := 0.0
		if b2>>5 == 7 {
			stated = statedLimits[b2&7]
		}
		back := int(b2 & 15)
		if back == 15 || b0>>7 == 1 && b2&16 != 0 {
			back = -1
		}
		tw.observe(o, stated, tw.mark(back), roundTrip(b3))
	case k < 14:
		for range 1 + int(b0>>4)&3 {
			tw.send()
		}
	case k == 14:
		tw.grown()
	default:
		tw.check("nothing")
	}
}

// step returns a step of time from b: none, microseconds, milliseconds,
// tens of milliseconds, a fraction of a second, seconds, tens of seconds,
// or a long quiet: minutes to hours.
func step(b byte) time.Duration {
	x := time.Duration(b & 31)
	switch b >> 5 {
	case 0:
		return 0
	case 1:
		return x * time.Microsecond * 37
	case 2:
		return x * time.Millisecond
	case 3:
		return x * 7 * time.Millisecond
	case 4:
		return x * 31 * time.Millisecond
	case 5:
		return x * 190 * time.Millisecond
	case 6:
		return x * 1300 * time.Millisecond
	}
	return x * x * 17 * time.Second
}

// roundTrip returns a round trip from b: unknown, a few milliseconds,
// tens of milliseconds, or up to seconds.
func roundTrip(b byte) time.Duration {
	x := time.Duration(b & 63)
	switch b >> 6 {
	case 0:
		return 0
	case 1:
		return time.Millisecond + x*50*time.Microsecond
	case 2:
		return x * time.Millisecond
	}
	return x * x * time.Millisecond
}

// Simulated servers.

// A simServer answers a client's attempts as a server that limits its
// rate would.
type simServer struct {
	kind   int     // simBucket, simCounts, simQueue, simWindow
	limit  float64 // requests per second
	burst  float64 // a bucket's size; a window's length in seconds; a queue's length in requests
	tokens float64
	last   time.Time
	// simCounts and simWindow: the window in progress and the last one.
	window   time.Time
	count    float64
	previous float64
	// simQueue: when the server is free again.
	free time.Time
	// What else the server does.
	rtt     time.Duration // the least round trip
	jitter  time.Duration
	stated  float64 // a limit the answers state; 0 if none
	stateP  float64 // the share of answers that state it
	failP   float64 // the share of answers that fail
	junkP   float64 // the share of answers that are any outcome
	outage  [2]time.Time
	changes []simChange
}

// A simChange moves a simServer's limit at a moment.
type simChange struct {
	at    time.Time
	limit float64
}

// The kinds of simServer.
const (
	simBucket = iota // a token bucket
	simCounts        // a sliding window that counts refusals too (HAProxy)
	simQueue         // a queue served at the limit, refusing when full (nginx without nodelay)
	simWindow        // a fixed window (a spent quota)
)

// answer returns the outcome of an attempt that reaches s at t, and how
// long the server held it.
func (s *simServer) answer(r *rand.Rand, t time.Time) (Outcome, time.Duration) {
	for len(s.changes) > 0 && !t.Before(s.changes[0].at) {
		s.limit = s.changes[0].limit
		s.changes = s.changes[1:]
	}
	if !t.Before(s.outage[0]) && t.Before(s.outage[1]) {
		return Failed, 0
	}
	if r.Float64() < s.failP {
		return Failed, 0
	}
	if r.Float64() < s.junkP {
		return Outcome(r.IntN(3)), 0
	}
	switch s.kind {
	case simBucket:
		s.tokens = min(s.burst, s.tokens+s.limit*max(t.Sub(s.last).Seconds(), 0))
		s.last = t
		if s.tokens >= 1 {
			s.tokens--
			return OK, 0
		}
		return Throttled, 0
	case simCounts, simWindow:
		length := time.Duration(s.burst * float64(time.Second))
		if d := t.Sub(s.window); d >= length {
			s.previous = s.count
			if d >= 2*length {
				s.previous = 0
			}
			s.window = s.window.Add(d / length * length)
			s.count = 0
		}
		allowed := s.limit * s.burst
		if s.kind == simWindow {
			if s.count+1 > allowed {
				return Throttled, 0
			}
			s.count++
			return OK, 0
		}
		s.count++ // counted, refused or not
		elapsed := t.Sub(s.window).Seconds() / s.burst
		if s.count+s.previous*(1-elapsed) > allowed {
			return Throttled, 0
		}
		return OK, 0
	}
	wait := max(s.free.Sub(t), 0)
	if wait.Seconds()*s.limit > s.burst {
		return Throttled, 0
	}
	s.free = t.Add(wait + time.Duration(float64(time.Second)/s.limit))
	return OK, wait
}

// newSimServer makes a random server, starting at start.
func newSimServer(r *rand.Rand, start time.Time) *simServer {
	s := &simServer{kind: r.IntN(4), last: start, window: start, free: start}
	s.limit = []float64{0.7, 3, 10, 25, 50, 100, 200, 400, 1000, 3000}[r.IntN(10)] * (0.8 + 0.4*r.Float64())
	switch s.kind {
	case simBucket:
		s.burst = []float64{1, 2, 5, 10, 0.5 * s.limit, s.limit}[r.IntN(6)]
		s.burst = max(s.burst, 1)
		s.tokens = s.burst
	case simCounts, simWindow:
		s.burst = []float64{0.5, 1, 2, 10}[r.IntN(4)]
	case simQueue:
		s.burst = []float64{2, 5, 20}[r.IntN(3)]
	}
	s.rtt = []time.Duration{0, 200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 150 * time.Millisecond}[r.IntN(6)]
	s.jitter = time.Duration(r.Float64() * float64(s.rtt) * 0.5)
	if r.IntN(4) == 0 {
		s.stated = s.limit * []float64{1, 1, 0.5, 2}[r.IntN(4)]
		s.stateP = []float64{1, 0.3, 0.02}[r.IntN(3)]
	}
	if r.IntN(5) == 0 {
		s.failP = 0.05
	}
	if r.IntN(6) == 0 {
		s.junkP = 0.02
	}
	if r.IntN(3) == 0 {
		from := start.Add(time.Duration(r.Float64() * float64(time.Minute)))
		s.outage = [2]time.Time{from, from.Add(time.Duration(r.Float64() * float64(15*time.Second)))}
	}
	t := start
	for range r.IntN(4) {
		t = t.Add(time.Duration((2 + r.Float64()*40) * float64(time.Second)))
		s.changes = append(s.changes, simChange{t, s.limit * []float64{0.2, 0.4, 0.9, 1.3, 3}[r.IntN(5)]})
	}
	return s
}

// simTrace runs a client of a random demand against a random server for
// about steps calls: it sends at Gentle's rate (its first contact's,
// before a throttle), as many at once as its concurrency allows, and
// hands back each attempt's mark, outcome and round trip.
func simTrace(tw *twin, r *rand.Rand, steps int) {
	s := newSimServer(r, tw.now)
	if r.IntN(4) == 0 {
		limit := s.limit * []float64{1, 1, 0.5, 2, 10}[r.IntN(5)]
		stood := []time.Duration{0, 3 * time.Second, 20 * time.Second, time.Hour}[r.IntN(4)]
		tw.recall(Recalled{Limit: limit, Stated: r.IntN(4) == 0, Stood: stood, NoBurst: r.IntN(4) == 0, CountsRefusals: r.IntN(4) == 0})
	}
	type flight struct {
		done time.Time
		mark Mark
		o    Outcome
		rtt  time.Duration
	}
	var out []flight
	workers := []int{1, 2, 4, 8, 32}[r.IntN(5)]
	demand := []float64{1e9, 1e9, 5, 50, 2 * s.limit}[r.IntN(5)]
	noMark := []float64{0, 0, 0.1, 1}[r.IntN(4)]
	next := tw.now
	for range steps {
		first := -1
		for i := range out {
			if first < 0 || out[i].done.Before(out[first].done) {
				first = i
			}
		}
		if first >= 0 && (len(out) >= workers || !out[first].done.After(next)) {
			f := out[first]
			out = append(out[:first], out[first+1:]...)
			tw.at(f.done)
			stated := 0.0
			if s.stated > 0 && r.Float64() < s.stateP {
				stated = s.stated
			}
			mark := f.mark
			if r.Float64() < noMark {
				mark = NoMark
			}
			rtt := f.rtt
			if r.IntN(8) == 0 {
				rtt = 0
			}
			tw.observe(f.o, stated, mark, rtt)
			continue
		}
		if next.After(tw.now) {
			tw.at(next)
		}
		mark := tw.send()
		o, held := s.answer(r, tw.now.Add(s.rtt/2))
		rtt := s.rtt + held + time.Duration(r.Float64()*float64(s.jitter)) + time.Microsecond
		out = append(out, flight{tw.now.Add(rtt), mark, o, rtt})
		// The next send: at Gentle's rate once throttled (Grown while it
		// finds the limit, as a waiting call asks), at its first
		// contact's before, and never above the demand.
		perSecond := demand
		if tw.g.Enabled() {
			x := tw.g.Rate()
			if r.IntN(3) == 0 {
				if g, ok := tw.grown(); ok {
					x = g
				}
			}
			perSecond = min(perSecond, x)
		} else if x, _, ok := tw.g.StartRate(tw.now); ok {
			perSecond = min(perSecond, x)
		}
		gap := time.Duration(float64(time.Second) / perSecond * (0.6 + 0.8*r.Float64()))
		if r.IntN(200) == 0 {
			gap += time.Duration(r.Float64() * float64([]time.Duration{5 * time.Second, time.Minute, 2 * time.Hour}[r.IntN(3)]))
		}
		next = tw.now.Add(min(gap, 3*time.Hour))
	}
}

// traceStart returns a random instant to start a trace at, so that
// quarter seconds, whole seconds and epochs of round trips fall anywhere.
func traceStart(r *rand.Rand) time.Time {
	return epoch.Add(time.Duration(r.Int64N(int64(100 * time.Second))))
}

// Traces written by hand, one a rule, so that each is reached whatever
// the random ones do.

// ok feeds n successes sent and answered evenly over d from now, each
// round trip rtt.
func (tw *twin) ok(n int, d, rtt time.Duration) {
	for range n {
		m := tw.send()
		tw.at(tw.now.Add(d / time.Duration(n)))
		tw.observe(OK, 0, m, rtt)
	}
}

// refuse feeds a throttle of an attempt sent now, after d.
func (tw *twin) refuse(d time.Duration) {
	m := tw.send()
	tw.at(tw.now.Add(d))
	tw.observe(Throttled, 0, m, 0)
}

// after moves the clock on by d.
func (tw *twin) after(d time.Duration) { tw.at(tw.now.Add(d)) }

var gentleRules = []struct {
	rule  string
	trace func(tw *twin)
}{
	{"first contact", func(tw *twin) {
		for range 40 {
			tw.after(7 * time.Millisecond)
			tw.check("first contact")
		}
		tw.ok(20, 200*time.Millisecond, 30*time.Millisecond)
		tw.after(time.Second)
		tw.refuse(0)
	}},
	{"floor, finding, holds, probes, verify", func(tw *twin) {
		tw.refuse(0)
		tw.ok(200, 2*time.Second, 0)
		tw.refuse(0)
		tw.ok(100, time.Second, 0)
		tw.refuse(0)
		for range 6 {
			tw.ok(800, 8*time.Second, 0)
			tw.refuse(0)
		}
	}},
	{"risen", func(tw *twin) {
		tw.recall(Recalled{Limit: 100, Stood: time.Hour})
		for range 40 {
			tw.ok(100, time.Second, 0)
			tw.grown()
		}
		tw.refuse(0)
	}},
	{"a memory of a server with no burst", func(tw *twin) {
		tw.recall(Recalled{Limit: 85, Stood: 20 * time.Second, NoBurst: true})
		tw.ok(150, 2*time.Second, 0)
		tw.refuse(0) // below the limit: measured, not stale
		tw.ok(3, 100*time.Millisecond, 0)
		tw.refuse(0) // an aftershock
	}},
	{"aftershock", func(tw *twin) {
		tw.recall(Recalled{Limit: 100})
		tw.ok(450, 4500*time.Millisecond, 0)
		tw.refuse(0)
		tw.ok(3, 100*time.Millisecond, 0)
		tw.refuse(0)
	}},
	{"lockout after a probe and after a hold", func(tw *twin) {
		tw.recall(Recalled{Limit: 100})
		tw.ok(450, 4500*time.Millisecond, 0)
		tw.refuse(0)
		tw.refuse(10 * time.Millisecond) // twice in a row: the server counts refusals
		tw.refuse(10 * time.Millisecond)
		tw.ok(100, 4*time.Second, 0)
		tw.refuse(0) // a probe's crossing
		tw.ok(20, 600*time.Millisecond, 0)
		tw.refuse(0) // its lockout
		tw.refuse(10 * time.Millisecond)
		tw.ok(100, 1500*time.Millisecond, 0)
		tw.refuse(0)
		tw.ok(245, 2500*time.Millisecond, 0)
		tw.refuse(0) // while holding
		tw.ok(1, 20*time.Millisecond, 0)
		tw.refuse(0) // its lockout, once
		tw.ok(24, 470*time.Millisecond, 0)
		tw.refuse(0)
	}},
	{"bursty", func(tw *twin) {
		tw.ok(10, 100*time.Millisecond, 0)
		tw.refuse(0)
		tw.ok(10, time.Second, 0)
		tw.refuse(0)
		tw.ok(40, 4*time.Second, 0)
	}},
	{"drop", func(tw *twin) {
		tw.recall(Recalled{Limit: 40, Stood: time.Minute})
		tw.ok(250, 31*time.Second, 0)
		tw.refuse(0)
		tw.ok(30, 2*time.Second, 0)
		tw.refuse(0)
		for range 30 {
			tw.ok(15, time.Second, 0)
		}
		tw.refuse(0)
	}},
	{"halvings while refused, the frozen curve", func(tw *twin) {
		tw.ok(1, time.Millisecond, time.Millisecond)
		tw.refuse(0)
		for range 6 {
			tw.refuse(time.Millisecond)
		}
		tw.after(time.Second)
		tw.grown()
		tw.ok(5, 10*time.Millisecond, time.Millisecond)
		tw.grown()
	}},
	{"the demand cap", func(tw *twin) {
		tw.refuse(0)
		tw.ok(50, time.Second, 0)
		for range 20 {
			tw.after(100 * time.Millisecond)
			tw.grown()
		}
	}},
	{"queueing", func(tw *twin) {
		tw.refuse(0)
		tw.ok(200, 2*time.Second, time.Millisecond)
		tw.refuse(0)
		tw.ok(100, time.Second, time.Millisecond)
		tw.refuse(0)
		tw.ok(396, 4*time.Second, time.Millisecond)
		tw.ok(40, 400*time.Millisecond, 40*time.Millisecond)
	}},
	{"a round at one instant", func(tw *twin) {
		tw.refuse(0)
		tw.ok(100, time.Second, time.Millisecond)
		tw.refuse(0)
		for range 16 {
			tw.observe(OK, 0, tw.send(), 3*time.Millisecond)
		}
	}},
	{"outage", func(tw *twin) {
		tw.refuse(0)
		tw.ok(200, 2*time.Second, 0)
		for range 100 {
			tw.after(100 * time.Millisecond)
			tw.observe(Failed, 0, tw.send(), 0)
		}
		tw.ok(150, time.Second, 0)
		tw.refuse(0)
	}},
	{"stated limits", func(tw *twin) {
		tw.ok(10, 20*time.Millisecond, 0)
		tw.refuse(0)
		tw.observe(OK, 100, tw.send(), 0)
		tw.ok(100, 10*time.Second, 0)
		tw.observe(Throttled, 50, tw.send(), 0)
		tw.ok(100, 10*time.Second, 0)
	}},
	{"recall and forget", func(tw *twin) {
		tw.recall(Recalled{Limit: 100, Stated: true, Stood: time.Minute})
		tw.ok(10, 100*time.Millisecond, 0)
		tw.refuse(0)
		tw.ok(10, 100*time.Millisecond, 0)
		tw.refuse(0)
	}},
	{"recall, then a probe", func(tw *twin) {
		tw.recall(Recalled{Limit: 10})
		tw.ok(100, 6*time.Second, 0)
		tw.refuse(0)
		tw.after(2 * time.Hour)
		tw.ok(100, 6*time.Second, 0)
	}},
}

// gentleTraces is how many random traces TestGentleKeepsItsTraces runs,
// in groups of gentleGroup, each group with one digest.
const (
	gentleTraces = 5000
	gentleGroup  = 50
)

var updateGentle = flag.Bool("update", false, "write testdata/gentle_traces.golden from what Gentle does now")

const gentleGolden = "testdata/gentle_traces.golden"

// TestGentleKeepsItsTraces runs each rule's trace and 5,000 random ones,
// and holds their digests to testdata/gentle_traces.golden (see twin).
func TestGentleKeepsItsTraces(t *testing.T) {
	got := map[string]uint64{}
	var names []string
	for _, tt := range gentleRules {
		tw := newTwin(t, epoch.Add(123456789))
		tt.trace(tw)
		got[tt.rule] = tw.digest()
		names = append(names, tt.rule)
	}
	traces := gentleTraces
	if testing.Short() || raceDetector {
		traces = 300 // CI runs them all without the race detector, which takes them from 4 s to 100
	}
	group := fnv.New64a()
	for i := range traces {
		seed := uint64(i)
		r := rand.New(rand.NewPCG(36, seed))
		tw := newTwin(t, traceStart(r))
		if i%3 == 2 {
			if r.IntN(3) == 0 {
				tw.recall(Recalled{Limit: statedLimits[r.IntN(8)], Stated: r.IntN(3) == 0, Stood: time.Duration(r.IntN(100)) * time.Second})
			}
			b := make([]byte, 4*(100+r.IntN(600)))
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			randomTrace(tw, b)
		} else {
			simTrace(tw, r, 200+r.IntN(1500))
		}
		fmt.Fprintf(group, "%x;", tw.digest())
		if (i+1)%gentleGroup == 0 {
			name := fmt.Sprintf("traces %d to %d", i+1-gentleGroup, i)
			got[name] = group.Sum64()
			names = append(names, name)
			group.Reset()
		}
	}
	if *updateGentle {
		var b strings.Builder
		b.WriteString("# The digests of Gentle's traces (internal/control/gentle_states_test.go): go test ./internal/control -run TestGentleKeepsItsTraces -update\n")
		for _, n := range names {
			fmt.Fprintf(&b, "%016x %s\n", got[n], n)
		}
		require.NoError(t, os.WriteFile(gentleGolden, []byte(b.String()), 0o644))
		return
	}
	text, err := os.ReadFile(gentleGolden)
	require.NoError(t, err)
	want := map[string]uint64{}
	for line := range strings.Lines(string(text)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		digest, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		require.True(t, ok, "a line of %s: %q", gentleGolden, line)
		d, err := strconv.ParseUint(digest, 16, 64)
		require.NoError(t, err)
		want[name] = d
	}
	for _, n := range names {
		w, ok := want[n]
		require.True(t, ok, "%s has no digest of %q", gentleGolden, n)
		assert.Equal(t, fmt.Sprintf("%016x", w), fmt.Sprintf("%016x", got[n]), "%s: Gentle no longer does what it did", n)
	}
}
