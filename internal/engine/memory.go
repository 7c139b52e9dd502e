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
	if r.At.IsZero() || at > n+int64(memfile.MaxSkew) {
		return // when it was learnt is unknown, or not yet: a broken record
	}
	if until := r.PausedUntil.UnixNano(); !r.PausedUntil.IsZero() && until > n {
		// Kept to its end, but no longer than the engine keeps a pause.
		until = min(until, n+int64(gate.MaxPause))
		k.pace.RecallPause(until)
		part(k, memoPart, newOf[memo]()).paused = until
	}
	limit := r.Limit
	if n-at > int64(memfile.MaxAge) || !(limit > 0) || math.IsInf(limit, 0) {
		return
	}
	limit = min(max(limit, control.MinRate), control.MaxRate)
	m := part(k, memoPart, newOf[memo]())
	m.told, m.at = control.Known{Limit: limit, Stated: r.Stated, NoBurst: r.NoBurst, CountsRefusals: r.CountsRefusals}, at
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
		stood = min(max(r.At.Sub(r.Since), 0), memfile.MaxAge)
	}
	start, ok := ctl.Recall(now, control.Recalled{Limit: limit, Stated: r.Stated, Stood: stood, NoBurst: r.NoBurst, CountsRefusals: r.CountsRefusals})
	if !ok {
		return
	}
	m.told.Stood = uint32(stood / time.Second)
	ceiling, cap := e.Ceiling()
	k.pace.Recall(now, start, ceiling, cap)
}
