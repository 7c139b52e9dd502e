// Package statuspage is a Transport's status page: what its engine knows
// of its keys, as politestatus's JSON and as an HTML page of its own. A
// Book keeps the history it charts, sampled when the page is read (at
// most once a second) into fixed rings: nobody reading it costs a call
// nothing but the key's counters it reads (engine.Key.Counts).
package statuspage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/politestatus"
)

const (
	// History is how many samples a ring keeps: five minutes of a page
	// read each second.
	History = 300
	// Tracked is how many keys the book keeps the history of: those the
	// page showed last. A key shown for the first time starts its
	// history then.
	Tracked = 64
	// MaxTop is the most keys a page shows; DefaultTop the number without
	// ?n=.
	MaxTop     = 1000
	DefaultTop = 50
	// minGap is the least time between two samples.
	minGap = time.Second
)

// A Book is the status page's memory: the history of the Transport's
// totals and of the keys it showed lately. It is made on the first read
// of the page, and safe for concurrent use (one page is built at a time).
type Book struct {
	eng  *engine.Engine
	name func(priority int) string // a priority's name ("interactive")

	mu      sync.Mutex
	last    time.Time // the last sample; zero before the first
	totals  ring
	prev    [3]uint64 // every key's counters at the last sample
	tracked map[string]*track
	// What a walk over the keys reuses, page after page.
	names  []string
	vals   []*engine.Key
	counts []count
}

// New returns the book of eng's keys; name names a priority.
func New(eng *engine.Engine, name func(priority int) string) *Book {
	return &Book{eng: eng, name: name, tracked: make(map[string]*track)}
}

// A track is the history of one key.
type track struct {
	k     *engine.Key // the state sampled: a key forgotten and made anew starts over
	prev  [3]uint32   // its counters at the last sample
	shown time.Time   // the last page that showed it
	fresh bool        // tracked since the last sample: its first sample has nothing to count from
	ring  ring
}

// A sample is one entry of a ring, kept small: Tracked rings of History.
type sample struct {
	at                    int64 // Unix nanoseconds
	rate, limit, seconds  float32
	sent, refused, failed uint32
}

// A ring holds the last History samples.
type ring struct {
	s    [History]sample
	head int // where the next goes
	n    int
}

func (r *ring) add(s sample) {
	r.s[r.head] = s
	r.head = (r.head + 1) % History
	r.n = min(r.n+1, History)
}

// all calls f with each sample, the oldest first.
func (r *ring) all(f func(s *sample)) {
	for i := range r.n {
		f(&r.s[(r.head-r.n+i+History)%History])
	}
}

// samples returns the ring's samples, the oldest first.
func (r *ring) samples() []politestatus.Sample {
	out := make([]politestatus.Sample, 0, r.n)
	r.all(func(s *sample) {
		out = append(out, politestatus.Sample{
			Time: time.Unix(0, s.at), Rate: round(s.rate), Limit: round(s.limit),
			Sent: int(s.sent), Refused: int(s.refused), Failed: int(s.failed), Seconds: round(s.seconds),
		})
	})
	return out
}

// last adds to c the counts of the samples taken within a minute of now.
func (r *ring) last(now time.Time, c *politestatus.Counts) {
	from := now.Add(-time.Minute).UnixNano()
	r.all(func(s *sample) {
		if s.at > from {
			c.Sent += int(s.sent)
			c.Refused += int(s.refused)
			c.Failed += int(s.failed)
			c.Seconds += float64(s.seconds)
		}
	})
}

// round gives a sample's float32 to three decimals, as float64: 1.237,
// not 1.2374999523162842.
func round(f float32) float64 { return math.Round(float64(f)*1000) / 1000 }

// A count is what the walk reads of a key: two fields on one cache line
// (see engine.Key).
type count struct {
	calls int
	sent  uint32
}

// A candidate is a key the walk found worth a full status: the ones with
// most calls holding them, then most sends since they were made (each
// read of an atomic counter: the walk over a million keys takes no lock
// of a key's, and reads one cache line of each).
type candidate struct {
	key   string
	k     *engine.Key
	calls int
	sent  uint32
}

func (a *candidate) less(b *candidate) int {
	if c := cmp.Compare(a.calls, b.calls); c != 0 {
		return c
	}
	return cmp.Compare(a.sent, b.sent)
}

// Page returns the status at now of the n keys (at most MaxTop) that wait
// most among those whose name holds search: keys with calls waiting first,
// the most first, then those the server paused, then those with calls under
// way, then the ones refused most in the last minute. Reading it takes a
// sample if the last is a second old or more. Without history, the page
// leaves the samples out (the last minute's counts stay).
func (b *Book) Page(now time.Time, n int, search string, history bool) politestatus.Page {
	if n <= 0 {
		n = DefaultTop
	}
	n = min(n, MaxTop)
	b.mu.Lock()
	defer b.mu.Unlock()
	page := politestatus.Page{Time: now}
	heap, sent := b.walk(&page, search, 2*n) // 2n: a full status reorders them
	sampling := b.last.IsZero() || now.Sub(b.last) >= minGap
	if sampling {
		refused, failed := b.eng.Totals()
		b.sampleTotals(now, [3]uint64{sent, refused, failed})
	}
	keys := make([]politestatus.Key, len(heap))
	for i := range heap {
		s := b.eng.Status(heap[i].key, heap[i].k, now)
		keys[i] = b.key(&s, now)
		if t := b.tracked[keys[i].Key]; t != nil && t.k == heap[i].k {
			t.ring.last(now, &keys[i].LastMinute) // it orders keys as busy
		}
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return rank(&keys[j], &keys[i], now) })
	order = order[:min(len(order), n)]
	b.track(keys, heap, order[:min(len(order), Tracked)], now)
	if sampling {
		b.sampleKeys(now)
		b.last = now
	}
	var fleet []fleetapi.KeyState
	if in, ok := b.eng.Fleet().(fleetapi.Inspector); ok && len(order) > 0 {
		fleet, page.FleetError = inspect(in, keys, order)
	}
	page.Top = make([]politestatus.Key, 0, len(order))
	for j, i := range order {
		k := keys[i]
		if j < len(fleet) {
			k.Fleet = fleetState(&fleet[j], now)
		}
		if t := b.tracked[k.Key]; t != nil {
			k.LastMinute = politestatus.Counts{} // with the sample just taken
			t.ring.last(now, &k.LastMinute)
			if history {
				k.History = t.ring.samples()
			}
		}
		k.Reason = politestatus.Reason(&k, now, nil) // in the local zone
		page.Top = append(page.Top, k)
	}
	if history {
		page.Totals = b.totals.samples()
	}
	return page
}

// walk reads every key once and returns the want busiest among those
// whose name holds search (see candidate), with the keys the page showed
// lately, and every key's sends; it counts the keys, and those matched,
// in page.
func (b *Book) walk(page *politestatus.Page, search string, want int) (heap []candidate, sent uint64) {
	heap = make([]candidate, 0, want)
	b.names, b.vals = b.eng.WalkShards(b.names, b.vals, func(names []string, vals []*engine.Key) bool {
		// The counters first, in a loop of their own: the processor
		// fetches many keys' cache lines at once.
		counts := slices.Grow(b.counts[:0], len(vals))[:len(vals)]
		b.counts = counts
		for i, k := range vals {
			counts[i] = count{calls: k.Calls(), sent: k.Sent()}
		}
		page.Keys += len(vals)
		for i, n := range counts {
			sent += uint64(n.sent)
			if search != "" && !strings.Contains(names[i], search) {
				continue
			}
			page.Matched++
			heap = push(heap, candidate{calls: n.calls, sent: n.sent, key: names[i], k: vals[i]}, want)
		}
		return true
	})
	// The keys the page showed lately stay candidates, whose history
	// orders them among keys as busy (see rank).
	for key, t := range b.tracked {
		if search != "" && !strings.Contains(key, search) || slices.ContainsFunc(heap, func(c candidate) bool { return c.key == key }) {
			continue
		}
		if k := b.eng.Peek(key); k != nil && k == t.k {
			heap = append(heap, candidate{key: key, k: k})
		}
	}
	return heap, sent
}

// fleetState is what the page shows of what a fleet's store holds for a
// key at now: the time of a booking or a pause only while ahead.
func fleetState(f *fleetapi.KeyState, now time.Time) *politestatus.Fleet {
	if !f.Known {
		return &politestatus.Fleet{}
	}
	out := &politestatus.Fleet{Known: true, Members: f.Members, Limit: f.Limit}
	if f.Next.After(now) {
		out.Next = f.Next
	}
	if f.Paused.After(now) {
		out.PausedUntil = f.Paused
	}
	return out
}

// InspectTimeout bounds how long a page waits for the fleet's store.
const InspectTimeout = 500 * time.Millisecond

// inspect asks the fleet's store what it holds for the keys of order: nil
// and why, if it cannot say.
func inspect(in fleetapi.Inspector, keys []politestatus.Key, order []int) ([]fleetapi.KeyState, string) {
	names := make([]string, len(order))
	for j, i := range order {
		names[j] = keys[i].Key
	}
	ctx, cancel := context.WithTimeout(context.Background(), InspectTimeout)
	defer cancel()
	states, err := in.Inspect(ctx, names)
	if err != nil {
		return nil, "the fleet's store did not answer: " + err.Error()
	}
	if len(states) != len(names) {
		return nil, fmt.Sprintf("the fleet's store answered for %d keys of %d", len(states), len(names))
	}
	return states, ""
}

// rank orders two keys by how much they wait, for a page that shows the
// most first; keys as busy by name, so that a page shows the same keys as
// the page before (whose history it keeps), not those a walk of the keys
// in another order found first.
func rank(a, b *politestatus.Key, now time.Time) int {
	if c := cmp.Compare(a.Waits(), b.Waits()); c != 0 {
		return c
	}
	if c := cmp.Compare(b2i(a.PausedUntil.After(now)), b2i(b.PausedUntil.After(now))); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Calls, b.Calls); c != 0 {
		return c
	}
	if c := cmp.Compare(a.LastMinute.Refused, b.LastMinute.Refused); c != 0 {
		return c
	}
	if c := cmp.Compare(a.LastMinute.Sent, b.LastMinute.Sent); c != 0 {
		return c
	}
	return cmp.Compare(b.Key, a.Key) // as busy: by name, the same from page to page
}

// key turns an engine's status into the page's.
func (b *Book) key(s *engine.Status, now time.Time) politestatus.Key {
	out := politestatus.Key{Key: s.Key, Rate: s.Rate, Limit: s.Limit, Calls: s.Calls, Members: s.Members}
	switch {
	case !s.Controlled:
		out.State = "off"
	case s.Starting:
		out.State = "starting"
	default:
		out.State = s.State.String()
	}
	if s.Controlled && s.State != control.Unthrottled {
		out.Since = s.Since
	}
	switch {
	case s.Limit == 0:
	case s.Stated:
		out.LimitSource = "stated"
	default:
		out.LimitSource = "measured"
	}
	if s.Paused.After(now) {
		out.PausedUntil = s.Paused
	}
	if s.HasLeft {
		out.Quota = &politestatus.Quota{Left: s.Left, Reset: s.Reset}
	}
	for _, c := range s.Costs {
		out.Costs = append(out.Costs, politestatus.Cost{Unit: c.Unit, Limit: c.Limit, Window: c.Window.Seconds(), Left: c.Left})
	}
	for _, w := range s.Waiting {
		out.Waiting = append(out.Waiting, politestatus.Waiting{Priority: b.name(int(w.Priority)), Calls: w.N})
	}
	return out
}

// track keeps the history of the keys of order (Tracked at most) from now
// on, those not kept yet making room by the keys shown least lately.
func (b *Book) track(keys []politestatus.Key, heap []candidate, order []int, now time.Time) {
	var fresh []int
	for _, i := range order {
		if t := b.tracked[keys[i].Key]; t != nil {
			t.shown = now
			b.follow(t, heap[i].k)
		} else {
			fresh = append(fresh, i)
		}
	}
	for _, i := range fresh {
		if len(b.tracked) >= Tracked { // one at least was not shown now
			var oldest string
			var at time.Time
			for name, o := range b.tracked {
				if oldest == "" || o.shown.Before(at) {
					oldest, at = name, o.shown
				}
			}
			delete(b.tracked, oldest)
		}
		t := &track{shown: now}
		b.tracked[keys[i].Key] = t
		b.follow(t, heap[i].k)
	}
}

// follow makes t the history of the state k: a key new to the book, or
// forgotten and made anew, starts counting over.
func (b *Book) follow(t *track, k *engine.Key) {
	if t.k != k {
		t.k = k
		t.prev[0], t.prev[1], t.prev[2] = k.Counts()
		t.fresh = true
	}
}

// sampleTotals adds to the totals' ring what every key did since the last
// sample. A key forgotten takes its counts with it: a total that fell
// counts nothing.
func (b *Book) sampleTotals(now time.Time, sums [3]uint64) {
	if !b.last.IsZero() {
		s := sample{at: now.UnixNano(), seconds: float32(now.Sub(b.last).Seconds())}
		s.sent = delta64(sums[0], b.prev[0])
		s.refused = delta64(sums[1], b.prev[1])
		s.failed = delta64(sums[2], b.prev[2])
		b.totals.add(s)
	}
	b.prev = sums
}

// sampleKeys adds to each tracked key's ring what it did since the last
// sample, and its rate and limit now.
func (b *Book) sampleKeys(now time.Time) {
	for key, t := range b.tracked {
		sent, refused, failed := t.k.Counts()
		if !t.fresh {
			st := b.eng.Status(key, t.k, now)
			s := sample{at: now.UnixNano(), seconds: float32(now.Sub(b.last).Seconds()),
				rate: float32(st.Rate), limit: float32(st.Limit)}
			s.sent, s.refused, s.failed = sent-t.prev[0], refused-t.prev[1], failed-t.prev[2]
			t.ring.add(s)
		}
		t.fresh = false
		t.prev = [3]uint32{sent, refused, failed}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func delta64(now, before uint64) uint32 {
	if now < before {
		return 0
	}
	return uint32(min(now-before, 1<<32-1))
}

// push adds c to the min-heap h of want candidates at most, if it has room
// or c is busier than its least.
func push(h []candidate, c candidate, want int) []candidate {
	if len(h) < want {
		h = append(h, c)
		up(h, len(h)-1)
	} else if c.less(&h[0]) > 0 {
		h[0] = c
		down(h, 0)
	}
	return h
}

// up and down keep h a min-heap by candidate.less.
func up(h []candidate, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[i].less(&h[p]) >= 0 {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func down(h []candidate, i int) {
	for {
		l, m := 2*i+1, i
		if l < len(h) && h[l].less(&h[m]) < 0 {
			m = l
		}
		if r := l + 1; r < len(h) && h[r].less(&h[m]) < 0 {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
