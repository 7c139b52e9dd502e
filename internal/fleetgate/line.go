package fleetgate

import (
	"time"

	"github.com/politehttp/polite/internal/gate"
)

// A process's attempts for a key book their sends in the fleet one at a
// time: each waits in the key's line, by priority, then its tenant's
// share, then arrival (gate.Queue), and only the head books; the next
// books once the head's slot is near (the engine's lineAhead) or it
// gives up. So a process holds few bookings ahead in the fleet's
// schedule per key (one at 100 a second, ten at 2,000): its batch
// backlog no longer books a send for every waiting call, seconds ahead,
// in order of arrival, which made its own interactive call book behind
// them, and another process's too (the script lets a higher priority
// overtake, but only as far as its floor allows); and the store hears one
// booking per send, not one per waiting call (a fleet of 4 with 300 batch
// callers made 2-4 script calls per request, and with 10,000 collapsed).

// Enter returns when the attempt w is the head of the key's line, with
// its ticket, to give to Done once its booking is over, and whether it
// waited for others. An attempt that finds others waiting is judged for
// its deadline by its place: the attempts ahead of it, each, every gap
// (0: not judged).
func (k *Key) Enter(w *gate.Waiter, gap time.Duration) (t *gate.Ticket[struct{}], waited bool, err error) {
	k.mu.Lock()
	t, ahead := k.line.PushBack(struct{}{}, w.Place)
	if ahead > 0 && gap > 0 {
		wait := time.Duration(ahead) * gap
		k.mu.Unlock()
		told := false
		if err := w.Judge(wait, time.Now(), gate.Rate, false, &told); err != nil {
			k.leave(t)
			return nil, false, err
		}
		k.mu.Lock()
	}
	for !k.line.IsHead(t) {
		k.mu.Unlock()
		if err := t.Wait(w, -1); err != nil {
			k.leave(t)
			return nil, false, err
		}
		k.mu.Lock()
	}
	k.mu.Unlock()
	return t, ahead > 0, nil
}

// Done takes the attempt holding t out of the key's line, its booking
// over, and lets the next book; failed reports that it did not book (an
// error, a refusal), and takes no turn of the line's floors.
func (k *Key) Done(t *gate.Ticket[struct{}], failed bool) {
	if failed {
		k.leave(t)
		return
	}
	k.mu.Lock()
	k.line.Served(t)
	k.mu.Unlock()
}

// leave takes t out of the line, given up.
func (k *Key) leave(t *gate.Ticket[struct{}]) {
	k.mu.Lock()
	k.line.Leave(t)
	k.mu.Unlock()
}
