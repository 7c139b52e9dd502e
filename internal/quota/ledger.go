package quota

import (
	"time"

	"github.com/politehttp/polite/internal/units"
)

// A key's ledger is what its requests took and gave back lately, in order:
// a response's reading of the server's quotas tells what was left when the
// server counted its request, and the ledger tells what changed since.

// Bounds of a key's ledger of cost changes: it must reach back to the
// oldest response still to come (an LLM's answer can take minutes), and
// stay small.
const (
	ledgerSpan = 5 * time.Minute
	ledgerMax  = 4096
)

// Mark is a moment of a key's ledger: an attempt sent then was counted
// by its server after the changes up to seq, and none after.
type Mark struct {
	at  time.Time
	seq uint64
	// near: the reading may lack the settlements of the requests answered
	// within costReorder before at (see bodyMark).
	near bool
}

// ledgerEvent is a change of the buckets' levels by the key's own requests:
// a cost taken (negative) or given back.
type ledgerEvent struct {
	at       int64  // Unix nanoseconds
	seq      uint64 // its number: events made at one instant are in order
	d        units.Vec
	answered int64 // for a taking: when its request was answered, Unix nanoseconds; 0 until then
}

// ledger is the latest changes of a key's levels, numbered one after
// the other: a ring of at most ledgerMax, none older than
// ledgerSpan.
type ledger struct {
	ev   []ledgerEvent // the ring
	head int           // the oldest event's index
	n    int           // the events in the ring
	seq  uint64        // the last event's number
}

// add adds the change d made at at (Unix nanoseconds).
func (l *ledger) add(at int64, d units.Vec) {
	for l.n > 0 && (l.ev[l.head].at < at-int64(ledgerSpan) || l.n == ledgerMax) {
		l.head = (l.head + 1) % len(l.ev)
		l.n--
	}
	if l.n == len(l.ev) {
		grown := make([]ledgerEvent, min(max(16, 2*len(l.ev)), ledgerMax))
		for i := range l.n {
			grown[i] = *l.get(i)
		}
		l.ev, l.head = grown, 0
	}
	l.seq++
	l.ev[(l.head+l.n)%len(l.ev)] = ledgerEvent{at: at, seq: l.seq, d: d}
	l.n++
}

// get returns the i-th oldest event.
func (l *ledger) get(i int) *ledgerEvent { return &l.ev[(l.head+i)%len(l.ev)] }

// find returns the event numbered seq, or nil if the ledger no longer
// holds it.
func (l *ledger) find(seq uint64) *ledgerEvent {
	if l.n == 0 || seq > l.seq || l.seq-seq >= uint64(l.n) {
		return nil
	}
	return l.get(l.n - 1 - int(l.seq-seq))
}

// costReorder is how far apart two requests may be taken, one before the
// other, and still reach the server in the other order: a large body takes
// longer to send, and goroutines run when they are scheduled. A request
// taken after the one answered, that near it, may have been counted
// before it.
const costReorder = 50 * time.Millisecond

// reading is what the ledger tells of a response's reading of its
// quotas: the change of the levels after the request was taken (the
// server had not counted it); the costs taken before it whose requests
// had not been answered when it was sent (the server may not have counted
// them yet); and the costs taken just after it (the server may have
// counted them in the other order).
type reading struct {
	since, early, late units.Vec
}

// costReadBack bounds how many events of the ledger a reading looks back
// over for the costs taken before the request.
const costReadBack = 2048

// read returns the ledger's reading for a response to a request sent
// at m; own is the sequence number of the request's own taking (0 if it
// took nothing), which the server counted. A taking whose request was
// answered before m was certainly counted: it reached the server before
// the request sent at m.
func (l *ledger) read(m Mark, own uint64) reading {
	var r reading
	sent, to := m.at.UnixNano(), m.at.Add(costReorder).UnixNano()
	by := sent // a taking answered by then is in the reading
	if m.near {
		by -= int64(costReorder)
	}
	for i, back := l.n-1, 0; i >= 0; i-- {
		e := l.get(i)
		if e.seq <= m.seq {
			if back++; back > costReadBack {
				break
			}
		}
		for u, d := range e.d {
			switch {
			case e.seq > m.seq:
				r.since[u] += d
				if d < 0 && e.at <= to {
					r.late[u] -= d
				}
			case d < 0 && e.seq != own && (e.answered == 0 || e.answered > by):
				r.early[u] -= d
			}
		}
	}
	return r
}
