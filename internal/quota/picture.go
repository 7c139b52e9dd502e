package quota

import (
	"math"
	"time"

	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/signals"
)

// snap is how far a reading of a bucket's refill time may be from the
// one learnt before it replaces it.
const snap = 0.15

// A picture is polite's picture of one quota a server keeps, in any unit
// it counts (requests; tokens, points, bytes): its limit, the time it
// renews or refills that limit in, and whether it refills as it goes (a
// bucket) or is renewed whole at its reset (a window). The quota in
// requests (Quota) and each quota in another unit (Costs) keep one, and
// every response that states the quota is read into it by one method,
// read. They differ only in how they pace what is left: a Quota spreads
// it over the time to its reset; Costs hold an attempt until its cost is
// there.
//
// The window is stated (a policy's w, X-Rate-Limit-Duration, WithQuota,
// a memory), or learnt: for a bucket, from how much it lacks and how soon
// it is full again (signals.RefillWindow); for a window, from how its
// reset advances: a reset that stays put across responses ends a window,
// and when it moves on to the next one, the step is the window.
type picture struct {
	limit  float64       // the server's limit per window; 0 if unknown
	window time.Duration // the time limit is renewed or refilled in; 0 if unknown
	// Of the resets of a quota renewed whole (see learnWindow):
	last time.Time // the reset of the last response
	prev time.Time // the last reset before it that two responses in a row stated

	known   bool // limit was stated, rather than taken to be at least what was left
	rated   bool // window is a memory's, only to keep the rate it gave (see Remembered), until the resets show one
	stated  bool // window was stated
	learnt  bool // window was stated, or learnt from a bucket's reading
	refills bool // the last reading was of a bucket that refills as it goes
	put     bool // last was stated by two responses in a row: it ends a window
	windows bool // a reset was once put: the quota counts in windows, though the reset has moved since (a new window, or jitter in its rounding)
}

// read takes what a response received at now states of the quota, q, into
// p: its limit (if q states none, the limit is at least what was left and
// own, what the answered request took of it), its window, and whether it
// refills. lag is how long the response took: a bucket's time to be full
// again, stated as an instant in whole seconds, says too little of its
// refill time once the answer came back late. It reports whether the reset of
// a quota renewed whole moved (see learnWindow).
func (p *picture) read(now time.Time, q signals.Quota, own float64, lag time.Duration) (moved bool) {
	switch {
	case q.Limit > 0:
		p.limit, p.known = q.Limit, true
	case !p.known:
		// Only what is left is stated (Azure's): the limit is at least
		// that and what the answered request took.
		p.limit = math.Max(p.limit, q.Remaining+own)
	}
	if q.Window > 0 {
		p.window, p.stated, p.learnt, p.rated = q.Window, true, true, false
	}
	p.refills = q.Refill
	if !q.Refill {
		return p.learnWindow(q.Reset)
	}
	// A bucket's reset is the time it will be full again. Stated as a
	// time from the answer (OpenAI's), it is read as it was meant; stated
	// as an instant in whole seconds (Anthropic's), it is read against
	// now, not the moment the server read the bucket, and a reading that
	// came back late says too little of it. A refill time learnt stands
	// unless a reading disagrees with it by far.
	if ahead := q.Reset.Sub(now); q.Window > 0 || q.Slack > 0 && lag > ahead/8 {
		return false
	}
	w, ok := signals.RefillWindow(q, now, p.rounded(q))
	if !ok || p.learnt && p.window > 0 && math.Abs(w.Seconds()/p.window.Seconds()-1) <= snap {
		return false
	}
	p.window, p.learnt = w, true
	return false
}

// rounded returns how far below the server's count q, a reading of what
// is left, may be: requests are counted exactly.
func (p *picture) rounded(q signals.Quota) float64 {
	if q.Unit != "" && q.Remaining == math.Trunc(q.Remaining/1000)*1000 && p.limit >= 10000 {
		return 500 // Anthropic's tokens: rounded to the nearest thousand
	}
	return 0
}

// learnWindow learns the window from reset, the reset a response stated:
// the step from a reset that two responses in a row stated to the next one
// that two did. Resets that move with every response (a time to refill, a
// constant "1") never stay put, and teach nothing; nor does one response
// whose reset is off by the rounding of its Date. The shortest step is the
// window: a window with no request in it, or a truncated reset, makes a
// longer one. It reports whether reset moved.
func (p *picture) learnWindow(reset time.Time) (moved bool) {
	switch {
	case reset.IsZero() || p.put && reset.Equal(p.last):
		return false
	case !reset.Equal(p.last):
		p.last, p.put = reset, false
		return true
	}
	p.put, p.windows = true, true
	if step := reset.Sub(p.prev); !p.prev.IsZero() && step > 0 && step <= gate.MaxPause && !p.stated &&
		(p.window == 0 || step < p.window || p.rated) {
		p.window, p.rated = step, false
	}
	p.prev = reset
	return false
}
