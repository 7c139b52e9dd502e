package polite

import (
	"math"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/control"
	"golang.org/x/time/rate"
)

// MemoryMaxAge is how long a limit a [Memory] holds is trusted: a
// Transport starts a key at a remembered limit learnt or confirmed within
// it, and ignores an older one. A remembered pause is kept to its end
// whatever its age (at most an hour after it was asked for, as the
// Transport keeps any server pause).
const MemoryMaxAge = 24 * time.Hour

// memorySkew is how far in the future a remembered instant may be before
// the record is taken for broken (a clock set wrong, a hostile file).
const memorySkew = time.Minute

// Memory keeps what a Transport learnt of its keys' servers, so that a
// Transport made later, after a restart or in another process, starts
// from it rather than from nothing (see [WithMemory]). polite provides
// two: [OpenFileMemory], one file on disk, and the fleet's (package
// fleet), in Redis, shared by a fleet's processes.
//
// Both methods are called on the path of a request: they must return at
// once, from the process's memory, and never wait on I/O (a store that
// persists does so in the background). They must be safe for concurrent
// use.
type Memory interface {
	// Recall returns what is remembered of key, and whether anything
	// is. A Transport calls it once, when the key is first used (or
	// used again after it was forgotten for idleness).
	Recall(key string) (Remembered, bool)
	// Remember keeps r as what is known of key, in place of what was.
	// A Transport calls it when what it knows of the key changes: a
	// limit learnt or moved, a pause asked for; and at a throttle or an
	// answer that states a quota an hour or more after it last told a
	// limit that stands, so that a limit the server keeps confirming is
	// not forgotten.
	Remember(key string, r Remembered)
}

// Remembered is what a Transport learnt of one key's server that is worth
// keeping across processes. Its zero value remembers nothing.
type Remembered struct {
	// Limit is the server's limit, in requests per second: the rate of
	// the quota it stated in its headers, or the limit polite measured
	// from its throttles; 0 if unknown.
	Limit float64
	// Stated reports that the server stated Limit in its headers.
	Stated bool
	// Window is the window of the quota the server stated, if it stated
	// one (the quota is Limit·Window requests per Window); 0 if not.
	Window time.Duration
	// PausedUntil is when a pause the server asked for ends (a
	// Retry-After that holds the key, a quota spent until its reset);
	// zero if none.
	PausedUntil time.Time
	// At is when Limit was learnt or last confirmed.
	At time.Time
	// Since is when Limit was found at about its value, if polite measured
	// it (zero if unknown): the probes made between Since and At found it
	// where it was. A limit that has stood longer is probed less often
	// (see [AdaptiveDefault]), and so is a remembered one: a Transport
	// counts the time from Since to At as time it has stood, and not the
	// time since At.
	Since time.Time
}

// WithMemory makes the Transport remember what it learns of each key's
// server in m, and start each key it has no state for from what m
// remembers:
//
//   - a limit learnt or confirmed within [MemoryMaxAge] paces the key from
//     its first request: a quota the server stated paces it as after its
//     first answer (and, under [WithFleet], paces the whole fleet), and
//     the key's controller (under [AdaptiveDefault]) starts at the limit,
//     stated or measured from throttles, its rate held just below it with
//     no first contact to find it again. It is a hint, not the truth: the
//     server's answers correct a stated quota; a throttle while the rate
//     holds below the limit shows it stale, and the key starts over as
//     one with no history does (no worse than without memory, but for
//     the requests refused before that throttle);
//   - a pause the server asked for is kept to its end: no request goes
//     to the key before it (nor, under [WithFleet], to the key's fleet).
//
// A record that makes no sense (a limit not a positive finite number, an
// instant far in the future, a pause longer than the Transport keeps) is
// ignored or cut to size, never trusted. m is called on the path of
// requests and must not block (see [Memory]).
//
// Default: nil, a Transport starts every key from nothing.
func WithMemory(m Memory) Option {
	return func(c *config) { c.memory = m }
}

// memo is what a key's state last told its Memory.
type memo struct {
	limit  float64
	stated bool
	stood  uint32 // seconds the limit had stood at the telling (Remembered.Since)
	paused int64  // Unix nanoseconds; 0 if none
	at     int64  // Unix nanoseconds of the telling
}

// toldLocked returns what the key last told its Memory, making it if
// needed (a key of a Transport with no Memory has none). It requires the
// key's mu held.
func (x *keyExtra) toldLocked() *memo {
	if x.told == nil {
		x.told = new(memo)
	}
	return x.told
}

// recallLocked starts ks, a state just made at now, from what mode's
// controller and the ceiling (the WithRate rate and burst) allow of r. It
// requires ks.mu held, or ks not yet shared.
func (ks *keyState) recallLocked(r Remembered, now time.Time, mode AdaptiveMode, ceiling rate.Limit, cap int) {
	n := now.UnixNano()
	at := r.At.UnixNano()
	if r.At.IsZero() || at > n+int64(memorySkew) {
		return // when it was learnt is unknown, or not yet: a broken record
	}
	if until := r.PausedUntil.UnixNano(); !r.PausedUntil.IsZero() && until > n {
		// Kept to its end, but no longer than the Transport keeps a pause.
		until = min(until, n+int64(maxPause))
		x := ks.extraLocked()
		x.pausedUntil = until
		x.toldLocked().paused = until
	}
	limit := r.Limit
	if n-at > int64(MemoryMaxAge) || !(limit > 0) || math.IsInf(limit, 0) {
		return
	}
	limit = min(max(limit, control.MinRate), control.MaxRate)
	x := ks.extraLocked()
	told := x.toldLocked()
	told.limit, told.stated, told.at = limit, r.Stated, at
	if r.Stated {
		// The quota the server stated paces the key, as after its first
		// answer (the rate of it, until an answer says what is left), and
		// in a fleet paces the whole fleet; the answers correct it.
		window := r.Window
		if window <= 0 || window > 24*time.Hour {
			window = time.Second
		}
		x.quota = &serverQuota{limit: limit * window.Seconds(), window: window, stated: r.Window > 0}
		ks.mark(keyQuoted, true)
	}
	ctl := ks.controllerLocked(mode)
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
	told.stood = uint32(stood / time.Second)
	// The controller's bucket holds a single request (see Gentle).
	ks.limit, ks.burst = min(ceiling, rate.Limit(start)), int32(min(1, cap))
	if ks.limiter == nil {
		ks.limiter = rate.NewLimiter(ks.limit, int(ks.burst))
	} else {
		ks.limiter.SetLimitAt(now, ks.limit)
		ks.limiter.SetBurstAt(now, int(ks.burst))
	}
}

// remember tells the Transport's Memory what the call's key learnt, if
// that changed since it last told it: its limit, or a pause.
func (c *call) remember(ks *keyState, now time.Time) {
	m := c.t.cfg.memory
	if m == nil || isBucketKey(c.key) {
		return
	}
	var k control.Known
	n := now.UnixNano()
	if ctl := ks.controller(c.t.keys.adaptive); ctl != nil {
		k = ctl.Known(now)
	}
	ks.mu.Lock()
	var paused int64
	var window time.Duration
	if x := ks.extra; x != nil {
		if x.pausedUntil > n {
			paused = x.pausedUntil
		}
		if q := x.quota; q != nil {
			if until := q.spentUntil(); until.UnixNano() > max(paused, n) {
				paused = until.UnixNano()
			}
			window = q.statedWindow()
		}
	} else if k.Limit == 0 {
		ks.mu.Unlock()
		return // nothing learnt, nothing told
	}
	x := ks.extraLocked()
	told := *x.toldLocked()
	k, moved := k.Worth(control.Known{Limit: told.limit, Stated: told.stated, Stood: told.stood}, told.at, n)
	if !moved && paused <= told.paused {
		ks.mu.Unlock()
		return
	}
	limit, stated, stood := k.Limit, k.Stated, k.Stood
	if limit > 0 {
		x.told.limit, x.told.stated, x.told.stood, x.told.at = limit, stated, stood, n
	}
	x.told.paused = max(paused, told.paused)
	ks.mu.Unlock()
	r := Remembered{Limit: limit, Stated: stated, At: now}
	if stated {
		r.Window = window
	} else if stood > 0 {
		r.Since = now.Add(-time.Duration(stood) * time.Second)
	}
	if limit == 0 && told.limit > 0 {
		// A pause, with no limit known since the key's state was made: the
		// limit told before stands, as old as it was.
		r.Limit, r.Stated, r.At = told.limit, told.stated, time.Unix(0, told.at)
		if told.stood > 0 && !told.stated {
			r.Since = r.At.Add(-time.Duration(told.stood) * time.Second)
		}
	}
	if paused > n {
		r.PausedUntil = time.Unix(0, paused)
	}
	m.Remember(c.key, r)
}

// isBucketKey reports whether key is the registry's key of a bucket a
// server named (bucketKey), not a request key.
func isBucketKey(key string) bool { return strings.HasPrefix(key, "\x00bucket\x00") }
