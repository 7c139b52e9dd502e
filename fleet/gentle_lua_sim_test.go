package fleet_test

import (
	"container/heap"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/fleetgate"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A trace is one process of a fleet, alone, against a simulated server,
// in simulated time: the fleet's shared controller (its Lua, through a
// Fleet, on a clock the test sets) paces the sends as fleet.go drives it,
// each success told with the worker's next booking by the generation its
// send was booked under, each throttle told with it; and a Gentle hears the
// same answers at the same instants, with the mark it gave each send as it
// went. Alone, the process hears every answer, as Gentle does: where the two
// are meant to be the same machine, they measure the same limit and set the
// same rate.

// traceStart is when every trace begins: a fixed instant, so that Gentle's
// quarter seconds and the scripts' 100-ms bins fall alike in every run.
var traceStart = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// A server answers the requests that reach it: true to accept, false to
// throttle (a bare 429: no Retry-After).
type server interface {
	take(at time.Duration) bool
}

// bucket is a token bucket of rate(at) a second, burst deep, full at the
// start.
type bucket struct {
	rate   func(at time.Duration) float64
	burst  float64
	tokens float64
	last   time.Duration
	begun  bool
}

func (b *bucket) take(at time.Duration) bool {
	if !b.begun {
		b.tokens, b.begun = b.burst, true
	}
	b.tokens = min(b.burst, b.tokens+b.rate(at)*(at-b.last).Seconds())
	b.last = at
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// window accepts n requests in each fixed window of one second, from the
// start.
type window struct {
	n     int
	index int64
	used  int
}

func (w *window) take(at time.Duration) bool {
	if i := int64(at / time.Second); i != w.index {
		w.index, w.used = i, 0
	}
	if w.used >= w.n {
		return false
	}
	w.used++
	return true
}

// steady returns a constant limit of l a second.
func steady(l float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return l }
}

// steps returns a limit of the first of ls, then each next one from the
// instant in at that goes with it.
func steps(ls []float64, at []time.Duration) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		l := ls[0]
		for i, a := range at {
			if t >= a {
				l = ls[i+1]
			}
		}
		return l
	}
}

// A sample is what the two controllers say at one booking: the shared
// controller's rate (of the interval it booked at; 0 while its slow start
// paces nothing), its estimate W (0 before a throttle) and its halvings;
// Gentle's rate and W.
type sample struct {
	at            time.Duration
	luaRate, luaW float64
	luaSpent      int
	goRate, goW   float64
}

// A said is what one controller says as a throttle comes: W before it and
// after, its rate before it, and what it took the throttle for.
type said struct {
	wBefore, w, rateBefore float64
	kind                   string        // "event", "halving" or "late"
	span                   time.Duration // since the controller's last event
	hold                   time.Duration // how long the rate held before it probed since then; -1: it holds still
	climb                  time.Duration // how long its probe took to reach 1.1·W; -1: it did not
	restart                time.Duration // the shared controller's: how long after its last event its curve last began again
}

// A throttleSeen is how each controller took one throttle: as a congestion
// event, a halving, or neither (one that belongs to an event or halving
// already taken). floor is the shared controller's floor (its fa) after
// it. tight reports that Gentle took the server for one that lets no
// burst through. halfSecond reports that the shared controller took it
// for its last event's though the send was booked after that event and a
// success since (its rule of the half second after an event); booked,
// that the send was booked under an earlier generation than the one it
// went in.
type throttleSeen struct {
	at                 time.Duration
	lua, gentle        said
	floor              float64
	halfSecond, booked bool
	tight              bool
}

// An epoch is when a controller's last event came, when its rate first
// rose past the hold since, and when it first reached 1.1·W (0: not yet).
type epoch struct{ at, probe, top time.Duration }

// trace is one run of a scenario (see runTrace): what drives it, and what
// the two controllers said as it went.
type trace struct {
	t       *testing.T
	f       *fleet.Fleet
	rdb     redis.UniversalClient
	ns, key string
	ps      *redis.PubSub
	g       *control.Gentle
	fk      fleetgate.Key
	srv     server
	rtt     time.Duration
	stood   time.Duration // how long the limit held from the start had stood

	now      time.Duration // since traceStart
	queue    events
	seq      int64
	heard    uint64 // the last event or halving the key's channel published
	gen      uint64 // the shared controller's generation, as last told
	sent     int
	samples  []sample
	seen     []throttleSeen
	luaEpoch epoch
	goEpoch  epoch
}

// A scenario is what a trace runs: workers callers against a server, each
// round trip rtt long, for length; from a cold start, or from a limit
// both controllers hold as after an event that measured it, which had
// stood that long (Gentle's Recall, and the same fields of the shared
// controller's state).
type scenario struct {
	srv     server
	workers int
	rtt     time.Duration
	length  time.Duration
	held    float64       // the limit held from the start; 0: a cold start
	stood   time.Duration // how long it had stood
}

// runTrace runs sc and returns its trace.
func runTrace(t *testing.T, rdb redis.UniversalClient, sc scenario) *trace {
	t.Helper()
	ns := uniqueNamespace(t)
	// A deadline no loaded machine misses: a call that timed out would
	// fail the trace, not pace the key on its own.
	f := newFleet(t, rdb, fleet.WithNamespace(ns), fleet.WithTimeout(10*time.Second))
	tr := &trace{t: t, f: f, rdb: rdb, ns: ns, key: "api.example",
		g: control.NewGentle(traceStart), srv: sc.srv, rtt: sc.rtt, stood: sc.stood}
	if sc.held > 0 {
		tr.hold(sc.held, sc.stood)
	}
	workers, length := sc.workers, sc.length
	tr.ps = rdb.Subscribe(ctx, fleet.Channel(ns, tr.key))
	t.Cleanup(func() { _ = tr.ps.Close() })
	_, err := tr.ps.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)
	for range workers {
		tr.at(0, tr.book)
	}
	for tr.queue.Len() > 0 {
		e := heap.Pop(&tr.queue).(event)
		if e.at > length {
			break
		}
		tr.now = e.at
		e.do()
	}
	return tr
}

// hold starts both controllers holding limit, as after an event that
// measured it and a success since, as if it had stood for stood.
func (tr *trace) hold(limit float64, stood time.Duration) {
	_, ok := tr.g.Recall(traceStart, control.Recalled{Limit: limit, Stood: stood})
	require.True(tr.t, ok)
	us := func(d time.Duration) int64 { return traceStart.Add(d).UnixMicro() }
	require.NoError(tr.t, tr.rdb.HSet(ctx, fleet.RedisKey(tr.ns, tr.key, "s"), "W", limit, "ev", us(0), "wf", us(-stood),
		"gen", 2, "ep", 1, "acc", 0, "bk", 0, "rf", 0, "fd", 0, "fl", 0, "fr", 0, "sp", 0, "cv", us(0), "qe", us(0), "tat", us(0),
		"lei", math.Round(1e6/(0.99*limit))).Err())
}

// at schedules do at d since the trace began.
func (tr *trace) at(d time.Duration, do func()) {
	tr.seq++
	heap.Push(&tr.queue, event{at: d, seq: tr.seq, do: do})
}

// setClock sets the scripts' clock to the trace's now.
func (tr *trace) setClock() {
	us := traceStart.Add(tr.now).UnixMicro()
	require.NoError(tr.t, tr.rdb.Set(ctx, fleet.ClockKey(tr.ns, tr.key), us, time.Hour).Err())
}

// book books a worker's next send, telling the successes not yet told, as
// the engine's fleet gate does: it sends at its slot, or asks again later.
func (tr *trace) book() {
	tr.setClock()
	accepted := tr.fk.TakeAccepted()
	g, err := tr.f.Reserve(ctx, tr.key, fleetapi.Request{Adaptive: true, MaxWait: -1, Accepted: accepted})
	require.NoError(tr.t, err)
	tr.gen = g.Gen
	tr.sample()
	if g.Later {
		tr.at(tr.now+g.Wait, tr.book)
		return
	}
	gen := g.Gen
	tr.at(tr.now+g.Wait, func() { tr.send(gen) })
}

// send sends a request booked under gen at its slot, or books it again if
// a congestion event (or a halving) let the queue it was booked in go
// meanwhile, as a Fleet that heard of it does (fleetapi.Congestion).
func (tr *trace) send(gen uint64) {
	if tr.heard > gen {
		tr.book()
		return
	}
	tr.sent++
	mark, timed, went := tr.g.Sending(), tr.g.Timed(), tr.gen
	tr.at(tr.now+tr.rtt/2, func() {
		ok := tr.srv.take(tr.now)
		tr.at(tr.now+tr.rtt/2, func() { tr.answer(ok, gen, went, mark, timed) })
	})
}

// answer hears the server's answer to a send booked under gen that went
// in generation went, which Gentle marked mark (timing it if timed), and
// books the worker's next.
func (tr *trace) answer(ok bool, gen, went uint64, mark control.Mark, timed bool) {
	rtt := time.Duration(0)
	if timed {
		rtt = tr.rtt
	}
	now := traceStart.Add(tr.now)
	if ok {
		tr.g.Observe(now, control.OK, 0, mark, rtt)
		tr.fk.Accept(gen)
		tr.book()
		return
	}
	phase, goW, goRate := uint64(tr.g.Sending()), tr.g.Limit(), tr.g.Rate()
	tr.g.Observe(now, control.Throttled, 0, mark, rtt)
	before := tr.state()
	tr.setClock()
	require.NoError(tr.t, tr.f.Throttled(ctx, tr.key, gen))
	tr.listen()
	after := tr.state()
	tr.gen = after.gen
	s := throttleSeen{at: tr.now, floor: after.fa, booked: went > gen, tight: tr.g.Tight(),
		lua:    said{wBefore: before.w, w: after.w, rateBefore: before.rate(), kind: "late"},
		gentle: said{wBefore: goW, w: tr.g.Limit(), rateBefore: goRate, kind: "late"}}
	switch {
	case after.ep != before.ep:
		s.lua.kind = "event"
	case after.sp > before.sp:
		s.lua.kind = "halving"
	default:
		s.halfSecond = gen%2 == 0 && gen >= before.ep && gen <= before.gen
	}
	switch p := uint64(tr.g.Sending()); {
	case p == phase+2:
		s.gentle.kind = "halving"
	case p != phase:
		s.gentle.kind = "event"
	}
	s.lua.restart = before.cv - tr.luaEpoch.at
	tr.luaEpoch.took(&s.lua, tr.now)
	tr.goEpoch.took(&s.gentle, tr.now)
	tr.seen = append(tr.seen, s)
	tr.book()
}

// took records in s how long the epoch e ran until now, and begins a new
// one if s is an event.
func (e *epoch) took(s *said, now time.Duration) {
	s.span, s.hold, s.climb = now-e.at, -1, -1
	if e.probe > 0 {
		s.hold = e.probe - e.at
	}
	if e.top > 0 {
		s.climb = e.top - e.probe
	}
	if s.kind == "event" {
		*e = epoch{at: now}
	}
}

// rose records that the rate rose past the hold at now, or reached 1.1·W,
// the first time in the epoch.
func (e *epoch) rose(rate, w float64, now time.Duration) {
	if e.probe == 0 && w > 0 && rate > hold*w*1.001 {
		e.probe = now
	}
	if e.probe > 0 && e.top == 0 && rate >= 1.1*w*0.999 {
		e.top = now
	}
}

// hold is the share of W both controllers hold at.
const hold = 0.99

// listen reads what the key's channel published up to now: a ping's pong
// comes after every message published before it.
func (tr *trace) listen() {
	require.NoError(tr.t, tr.ps.Ping(ctx))
	for {
		m, err := tr.ps.Receive(ctx)
		require.NoError(tr.t, err)
		switch m := m.(type) {
		case *redis.Pong:
			return
		case *redis.Message:
			if gen, ok := strings.CutPrefix(m.Payload, "e"); ok {
				n, err := strconv.ParseUint(gen, 10, 64)
				require.NoError(tr.t, err)
				tr.heard = max(tr.heard, n)
			}
		}
	}
}

// luaState is what the trace reads of the shared controller's state.
type luaState struct {
	w, lei, fa float64
	sp         int
	gen, ep    uint64
	cv         time.Duration // when the rate's curve last began, since traceStart
}

// rate returns the rate the shared controller last booked at; 0 if none.
func (st luaState) rate() float64 {
	if st.lei == 0 {
		return 0
	}
	return 1e6 / st.lei
}

func (tr *trace) state() luaState {
	st, err := tr.rdb.HMGet(ctx, fleet.RedisKey(tr.ns, tr.key, "s"), "W", "lei", "sp", "gen", "ep", "fa", "cv").Result()
	require.NoError(tr.t, err)
	num := func(v any) float64 {
		s, _ := v.(string)
		x, _ := strconv.ParseFloat(s, 64)
		return x
	}
	return luaState{w: num(st[0]), lei: num(st[1]), sp: int(num(st[2])), gen: uint64(num(st[3])), ep: uint64(num(st[4])), fa: num(st[5]),
		cv: time.UnixMicro(int64(num(st[6]))).Sub(traceStart)}
}

// sample records what both controllers say now.
func (tr *trace) sample() {
	st := tr.state()
	s := sample{at: tr.now, luaRate: st.rate(), luaW: st.w, luaSpent: st.sp, goRate: tr.g.Rate(), goW: tr.g.Limit()}
	tr.luaEpoch.rose(s.luaRate, s.luaW, tr.now)
	tr.goEpoch.rose(s.goRate, s.goW, tr.now)
	tr.samples = append(tr.samples, s)
}

// last returns the last sample at or before d.
func (tr *trace) last(d time.Duration) sample {
	var s sample
	for _, x := range tr.samples {
		if x.at > d {
			break
		}
		s = x
	}
	return s
}

// relative returns how far a is from b, as a share of b.
func relative(a, b float64) float64 { return math.Abs(a-b) / b }

// An event is a step of a trace: do, at since the trace began.
type event struct {
	at  time.Duration
	seq int64
	do  func()
}

// events is a heap of events, the earliest first (and, at one instant, in
// the order they were scheduled).
type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
