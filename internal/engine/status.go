package engine

import (
	"iter"
	"math"
	"time"

	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/quota"
)

// Status is what the engine knows of one key at a moment (polite's
// KeyStatus: see it for what each figure means).
type Status struct {
	Key     string
	Rate    float64
	Limit   float64
	Costs   []quota.Status
	Waiting []gate.Count // the attempts waiting in the key's lines, by priority, highest first
}

// Statuses returns the keys the engine holds state for, with their
// status, in no particular order. Each status is read when the iteration
// reaches it, with no lock held while the caller's loop runs.
func (e *Engine) Statuses() iter.Seq[Status] {
	return func(yield func(Status) bool) {
		var keys []string
		var vals []*Key
		for i := range e.keys.Shards() {
			keys, vals = e.keys.Shards()[i].Values(keys[:0], vals[:0])
			now := time.Now()
			for j, k := range vals {
				if !yield(e.status(keys[j], k, now)) {
					return
				}
			}
		}
	}
}

// status returns the status of key, whose state is k, at now.
func (e *Engine) status(key string, k *Key, now time.Time) Status {
	s := Status{Key: key, Rate: k.pace.Rate()}
	quotas, own := k.quotas()
	share := 1.0
	if e.cfg.Fleet != nil && len(quotas) > 0 {
		share = 1 / float64(e.members(k))
	}
	for i, q := range quotas {
		limit, paced := q.Status(now, share)
		if paced > 0 && (s.Rate == 0 || paced < s.Rate) {
			s.Rate = paced
		}
		switch {
		case limit <= 0 || own && i > 0 && s.Limit > 0: // the key's own limit stands
		case s.Limit == 0 || limit < s.Limit:
			s.Limit = limit
		}
	}
	if s.Limit == 0 {
		if ctl := k.controller(e.cfg.Kind); ctl != nil {
			s.Limit = ctl.Estimate()
		}
	}
	if math.IsInf(s.Limit, 0) || math.IsNaN(s.Limit) {
		s.Limit = 0
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
