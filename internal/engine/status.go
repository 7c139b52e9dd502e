package engine

import (
	"iter"
	"math"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/quota"
)

// Status is what the engine knows of one key at a moment (polite's
// KeyStatus: see it for what each figure means).
type Status struct {
	Key     string
	Rate    float64
	Limit   float64
	Stated  bool // Limit is a quota the server states, not the controller's estimate
	Costs   []quota.Status
	Waiting []gate.Count // the attempts waiting in the key's lines, by priority, highest first

	// Controlled reports that the key has a controller, and State where
	// it stands; Starting that the key's first contact paces it (the
	// controller knows no limit yet).
	Controlled bool
	State      control.State
	Since      time.Time // when the controller last measured the limit, or was throttled (see control.Controller.State)
	Starting   bool
	// Paused is when the server's pause of the key ends (a Retry-After);
	// zero if it is not paused.
	Paused time.Time
	// Left is what the server's request quota holds, as it last counted
	// it, until Reset; HasLeft reports that it counts one down.
	Left    float64
	Reset   time.Time
	HasLeft bool
	// Calls holding the key (waiting, in flight, between attempts), and
	// the fleet's processes sharing it (0 without a fleet).
	Calls   int
	Members int
	// Sent, Refused and Failed are the key's counters (see Key.Counts).
	Sent, Refused, Failed uint32
}

// Walk calls yield with each key the engine holds state for, and that
// state, until yield returns false: no lock is held while yield runs, and
// nothing is read of the state but what yield reads. A walk over a
// million keys copies each shard's keys aside, one shard at a time.
func (e *Engine) Walk(yield func(key string, k *Key) bool) {
	e.WalkShards(nil, nil, func(keys []string, vals []*Key) bool {
		for j, k := range vals {
			if !yield(keys[j], k) {
				return false
			}
		}
		return true
	})
}

// WalkShards calls yield with the keys of each shard of the engine's
// table and their states, one shard at a time (a sixty-fourth of the
// keys), until yield returns false; the slices are reused for the next
// shard, grown from keys and vals, which it returns cleared for the next
// walk. A caller that reads a field of each state in a loop of its own
// lets the processor fetch many states at once from memory, where a call
// for each key waits for each in turn.
func (e *Engine) WalkShards(keys []string, vals []*Key, yield func(keys []string, vals []*Key) bool) ([]string, []*Key) {
	for i := range e.keys.Shards() {
		keys, vals = e.keys.Shards()[i].Values(keys[:0], vals[:0])
		if !yield(keys, vals) {
			break
		}
	}
	clear(keys[:cap(keys)]) // keep no key's state alive
	clear(vals[:cap(vals)])
	return keys[:0], vals[:0]
}

// Peek returns the state the engine holds for key, without making one or
// holding it; nil if there is none.
func (e *Engine) Peek(key string) *Key {
	k, _ := e.keys.ShardOf(key).Peek(key)
	return k
}

// Statuses returns the keys the engine holds state for, with their
// status, in no particular order. Each status is read when the iteration
// reaches it, with no lock held while the caller's loop runs.
func (e *Engine) Statuses() iter.Seq[Status] {
	return func(yield func(Status) bool) {
		e.Walk(func(key string, k *Key) bool { return yield(e.Status(key, k, time.Now())) })
	}
}

// Status returns the status of key, whose state is k, at now.
func (e *Engine) Status(key string, k *Key, now time.Time) Status {
	s := Status{Key: key, Rate: k.pace.Rate(), Starting: k.pace.Starting(), Calls: k.Calls()}
	s.Sent, s.Refused, s.Failed = k.Counts()
	if until := k.pace.PausedUntil(now.UnixNano()); until > 0 {
		s.Paused = time.Unix(0, until)
	}
	if e.cfg.Fleet != nil {
		s.Members = e.members(k)
	}
	quotas, own := k.quotas()
	share := 1.0
	if s.Members > 0 && len(quotas) > 0 {
		share = 1 / float64(s.Members)
	}
	for i, q := range quotas {
		limit, paced := q.Status(now, share)
		if paced > 0 && (s.Rate == 0 || paced < s.Rate) {
			s.Rate = paced
		}
		switch {
		case limit <= 0 || own && i > 0 && s.Limit > 0: // the key's own limit stands
		case s.Limit == 0 || limit < s.Limit:
			s.Limit, s.Stated = limit, true
		}
	}
	if q := k.quotaFor(""); q != nil {
		s.Left, s.Reset, s.HasLeft = q.Left(now)
	}
	if ctl := k.controller(e.cfg.Kind); ctl != nil {
		s.Controlled = true
		s.State, s.Since = ctl.State()
		if s.Limit == 0 {
			s.Limit = ctl.Estimate()
		}
	}
	if math.IsInf(s.Limit, 0) || math.IsNaN(s.Limit) {
		s.Limit, s.Stated = 0, false
	}
	if cs := peek(k, costsPart); cs != nil {
		s.Costs = cs.Status(now)
	}
	s.Waiting = k.waiting(quotas)
	return s
}

// waiting returns how many attempts wait in k's lines at each priority,
// highest first: for its token or its server's pause, a place in its
// window, in the lines of its quotas (quotas) and costs, and for a place
// in flight. An attempt waits
// in one line at a time, so that each is counted once. The count is taken
// from each line under its gate's lock, one after another: a sum of
// moments a little apart, that an attempt moving from one line to the
// next may miss or count twice. It reads what each line keeps of its
// priorities, and costs a call's path nothing.
func (k *Key) waiting(quotas []*quota.Quota) []gate.Count {
	counts := k.pace.Waiting(nil)
	if win := peek(k, windowPart); win != nil {
		counts = win.Waiting(counts)
	}
	for _, q := range quotas {
		counts = q.Waiting(counts)
	}
	if cs := peek(k, costsPart); cs != nil {
		counts = cs.Waiting(counts)
	}
	if sl := peek(k, slotsPart); sl != nil {
		counts = sl.Waiting(counts)
	}
	return counts
}

// Earliest returns how long after now the call's next attempt could go,
// if it first waits delay: that, its key's pause and its turn for a token
// at the rate it would be judged by, and its quota's wait then. It
// reports false if the key's pause is longer than the call waits on. It
// is an estimate, for deciding whether a retry fits before a deadline.
func (e *Engine) Earliest(c *Call, now time.Time, delay time.Duration) (time.Duration, bool) {
	earliest := delay
	k := c.state(e)
	if k == nil {
		return earliest, true
	}
	ceiling, _ := e.Ceiling()
	pause, turn := k.pace.NextTurnWait(now.Add(delay), c.Place, c.ctl, ceiling)
	if pause > c.MaxServerWait { // the next attempt would be refused
		return 0, false
	}
	earliest += max(pause, turn)
	if q := k.quotaFor(c.Route); q != nil {
		earliest += q.Peek(now.Add(earliest))
	}
	return earliest, true
}
