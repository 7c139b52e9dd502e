package fleet

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/politehttp/polite/fleetapi"
)

// A send of a higher priority overtakes the sends of lower ones booked
// ahead of it in the key's schedule (lua/lanes.lua): those sends, asleep
// until their slots in any process, go an interval later for each
// overtaking, which they hear of on the key's channel as they hear of
// pauses (watch.go). A process that misses the message sends at the slot
// it booked: one send more than the quota in that interval, as a missed
// pause would let through.

// maxOvertakings bounds the overtakings a Fleet keeps per key: a send
// booked before the oldest of them kept counts only those kept (at 5
// overtakings a second, 205 s of them).
const maxOvertakings = 1024

// overtaking is one send that overtook sends of lower priorities, as
// published: the count of the key's overtakings it made, its priority,
// its slot and the interval the sends behind it moved on by, both in µs of
// Redis's clock.
type overtaking struct {
	n        uint64
	priority int8
	at, ei   int64
}

// errOvertaking reports a message that is no overtaking.
var errOvertaking = errors.New("fleet: not an overtaking")

// parseOvertaking parses a message of lua/lanes.lua, without its "o":
// "<count>:<priority>:<slot µs>:<interval µs>".
func parseOvertaking(s string) (overtaking, error) {
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return overtaking{}, errOvertaking
	}
	n, err1 := strconv.ParseUint(f[0], 10, 64)
	p, err2 := strconv.ParseInt(f[1], 10, 8)
	at, err3 := strconv.ParseInt(f[2], 10, 64)
	ei, err4 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || ei <= 0 {
		return overtaking{}, errOvertaking
	}
	return overtaking{n: n, priority: int8(p), at: at, ei: ei}, nil
}

// heardOvertaking records an overtaking of key's sends. It holds
// maxPockets keys at most: a new key past that forgets them all, and a
// send whose overtakings were forgotten goes at the slot it was booked.
func (f *Fleet) heardOvertaking(key string, o overtaking) {
	w := &f.watcher
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.passes == nil || len(w.passes) >= maxPockets && w.passes[key] == nil {
		w.passes = make(map[string][]overtaking)
	}
	l := w.passes[key]
	if len(l) >= maxOvertakings {
		l = append(l[:0], l[len(l)-maxOvertakings/2:]...)
	}
	w.passes[key] = append(l, o)
}

// Overtaken implements [fleetapi.Overtaking]: how much later than its
// slot the send of key granted g, at priority p, goes for the sends of
// higher priorities that overtook it since it was booked, as this process
// heard. An overtaking at a slot after the send's (delayed by those
// before) is not ahead of it, and counts nothing.
func (f *Fleet) Overtaken(key string, p int8, g fleetapi.Grant) time.Duration {
	if g.At <= 0 {
		return 0 // from a lease: its slots cannot move (lua/lanes.lua)
	}
	w := &f.watcher
	w.mu.Lock()
	defer w.mu.Unlock()
	passes := w.passes[key]
	if len(passes) == 0 || passes[len(passes)-1].n <= g.Overtakes {
		return 0 // none since the booking: the common case, and no allocation
	}
	var late int64
	counted := make(map[uint64]bool)
	for more := true; more; {
		// An overtaking that counts delays the send, which may bring
		// another one's slot before the send's: counted in a pass more.
		more = false
		for _, o := range passes {
			if o.n > g.Overtakes && o.priority > p && o.at <= g.At+late && !counted[o.n] {
				counted[o.n], late, more = true, late+o.ei, true
			}
		}
	}
	return time.Duration(late) * time.Microsecond
}
