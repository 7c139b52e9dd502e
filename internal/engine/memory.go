package engine

import (
	"math"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/memfile"
	"github.com/politehttp/polite/internal/quota"
)

// recall starts k, a state just made at now, from what its controller and
// the ceiling (the WithRate rate and burst) allow of r.
func (e *Engine) recall(k *Key, r memfile.Record, now time.Time) {
	n := now.UnixNano()
	at := r.At.UnixNano()
	if r.At.IsZero() || at > n+int64(memorySkew) {
		return // when it was learnt is unknown, or not yet: a broken record
	}
	if until := r.PausedUntil.UnixNano(); !r.PausedUntil.IsZero() && until > n {
		// Kept to its end, but no longer than the engine keeps a pause.
		until = min(until, n+int64(gate.MaxPause))
		k.pace.RecallPause(until)
		part(k, memoPart, newOf[memo]()).paused = until
	}
	limit := r.Limit
	if n-at > int64(MemoryMaxAge) || !(limit > 0) || math.IsInf(limit, 0) {
		return
	}
	limit = min(max(limit, control.MinRate), control.MaxRate)
	m := part(k, memoPart, newOf[memo]())
	m.told, m.at = control.Known{Limit: limit, Stated: r.Stated}, at
	if r.Stated {
		// The quota the server stated paces the key, as after its first
		// answer (the rate of it, until an answer says what is left), and
		// in a fleet paces the whole fleet; the answers correct it.
		window := r.Window
		if window <= 0 || window > 24*time.Hour {
			window = time.Second
		}
		part(k, quotaPart, func() *quota.Quota { return quota.Remembered(limit, window, r.Window > 0) })
	}
	ctl := k.controller(e.cfg.Kind)
	if ctl == nil {
		return
	}
	var stood time.Duration
	if !r.Since.IsZero() && !r.Stated {
		stood = min(max(r.At.Sub(r.Since), 0), MemoryMaxAge)
	}
	start, ok := ctl.Recall(now, control.Recalled{Limit: limit, Stated: r.Stated, Stood: stood})
	if !ok {
		return
	}
	m.told.Stood = uint32(stood / time.Second)
	ceiling, cap := e.Ceiling()
	k.pace.Recall(now, start, ceiling, cap)
}

// remember tells the engine's Memory what the call's key learnt, if that
// changed since it last told it: its limit, or a pause.
func (e *Engine) remember(c *Call, k *Key, now time.Time) {
	var known control.Known
	n := now.UnixNano()
	if ctl := c.ctl; ctl != nil {
		known = ctl.Known(now)
	}
	paused := k.pace.PausedUntil(n)
	var window time.Duration
	if q := peek(k, quotaPart); q != nil {
		if until := q.SpentUntil(); until.UnixNano() > max(paused, n) {
			paused = until.UnixNano()
		}
		window = q.StatedWindow()
	}
	if known.Limit == 0 && paused == 0 && peek(k, memoPart) == nil {
		return // nothing learnt, nothing told
	}
	m := part(k, memoPart, newOf[memo]())
	m.mu.Lock()
	told, toldAt, toldPaused := m.told, m.at, m.paused
	known, moved := known.Worth(told, toldAt, n)
	if !moved && paused <= toldPaused {
		m.mu.Unlock()
		return
	}
	if known.Limit > 0 {
		m.told, m.at = known, n
	}
	m.paused = max(paused, toldPaused)
	m.mu.Unlock()
	r := memfile.Record{Limit: known.Limit, Stated: known.Stated, At: now}
	if known.Stated {
		r.Window = window
	} else if known.Stood > 0 {
		r.Since = now.Add(-time.Duration(known.Stood) * time.Second)
	}
	if known.Limit == 0 && told.Limit > 0 {
		// A pause, with no limit known since the key's state was made: the
		// limit told before stands, as old as it was.
		r.Limit, r.Stated, r.At = told.Limit, told.Stated, time.Unix(0, toldAt)
		if told.Stood > 0 && !told.Stated {
			r.Since = r.At.Add(-time.Duration(told.Stood) * time.Second)
		}
	}
	if paused > n {
		r.PausedUntil = time.Unix(0, paused)
	}
	e.cfg.Memory.Remember(c.Who.Key, r)
}
