package control

import (
	"math"
	"time"
)

// The bounds of any limit a controller takes, in requests per second: a
// remembered limit outside them is cut to size.
const (
	MinRate = gentleMinRate
	MaxRate = gentleMaxRate
)

// What a key tells its memory, and when (see Worth).
const (
	// tellAgain is how often a limit that stands is told again, so that a
	// limit confirmed every day is never forgotten.
	tellAgain = time.Hour
	// tellMoved is the share by which a limit must move to be told again
	// before tellAgain: smaller moves are noise.
	tellMoved = 0.02
)

// Recall starts g at now from a limit a memory kept (see step's recall):
// the rate holds just below it, as long as it had stood (see hold), then
// probes (never above a stated limit); a throttle while it holds shows it
// stale. It returns the rate to start at.
func (g *Gentle) Recall(now time.Time, r Recalled) (float64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.step(recall, &input{n: now.UnixNano(), memory: r})
	rate, _, _ := g.current()
	return rate, true
}

// Known returns the server's limit as g knows it at now, worth
// remembering, and whether the server stated it: the limit the server
// states, or the estimate as the last event that probed or found it
// measured it; 0 if neither. (An event while the rate holds may come of a
// moment's trouble, and the next probe says whether the limit moved: a
// process remembered at that moment would start too low.) A measured
// limit comes with how long it has stood, in whole seconds.
func (g *Gentle) Known(now time.Time) Known {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stated > 0 {
		return Known{Limit: g.stated, Stated: true}
	}
	var stood uint32
	if s := wholeSeconds(now.UnixNano()); s > g.found && math.Abs(g.limit-float64(g.settled)) <= 0.05*float64(g.settled) {
		stood = s - g.found // (an event while the rate held moved the estimate since: not this one's)
	}
	return Known{Limit: float64(g.settled), Stated: false, Stood: stood, NoBurst: g.tight == tightYes, CountsRefusals: g.wary&waryCounts != 0}
}

// Worth returns what of k, known at n (Unix nanoseconds), is worth
// telling a memory last told told at toldAt (Unix nanoseconds), and
// whether the limit moved enough to be told: by more than tellMoved, or
// from measured to stated, or an hour after it was last told, or once it
// has stood twice as long as when it was told, until it has stood as long
// as a hold lasts at most (so that a Transport made later probes it as
// seldom as this one would).
//
// A measured limit lower than the one told, which has not stood two holds
// yet, is not worth telling (its Limit comes back 0): a probe's crossing
// of a limiter that counts refusals locks the client out for a moment,
// the limit measured then is low, and the next probe settles it. A limit
// that dropped is told once it stands.
func (k Known) Worth(told Known, toldAt, n int64) (Known, bool) {
	if !k.Stated && k.Limit > 0 && k.Limit < told.Limit && float64(k.Stood) < 2*gentleWait {
		k.Limit = 0
	}
	longer := told.Stood < gentleMaxWait && k.Stood >= max(2*told.Stood, gentleWait)
	moved := k.Limit > 0 && (math.Abs(k.Limit-told.Limit) > tellMoved*told.Limit || k.Stated != told.Stated || k.NoBurst != told.NoBurst || k.CountsRefusals != told.CountsRefusals ||
		n-toldAt >= int64(tellAgain) || longer)
	return k, moved
}
