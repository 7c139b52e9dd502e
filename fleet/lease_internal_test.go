package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A process that comes back late to its lease (the machine stalled it)
// spends at once no more of the sends that went by than the key's burst:
// a token bucket saves no more, and the fleet booked no more. Before, it
// spent every send less than a lease (50 ms) late: 20 at once at 1,000 a
// second after a stall of 20 ms.
func TestALateProcessSpendsNoMoreThanItsBurstAtOnce(t *testing.T) {
	for _, c := range []struct {
		burst, atOnce int
	}{{1, 3}, {5, 6}, {100, 21}} {
		f := &Fleet{lease: DefaultLease}
		t0 := time.Unix(1_000_000, 0)
		interval := time.Millisecond // 1,000 a second
		p := &pocket{next: t0, interval: interval, late: lateFor(f.lease, c.burst, interval), left: 25}
		now := t0.Add(20 * time.Millisecond) // back 20 ms after the first send's instant
		atOnce := 0
		for {
			g, ok := f.takeLocked(p, now, -1)
			if !ok || g.Wait > 0 {
				break
			}
			atOnce++
		}
		// The sends of the last burst of intervals that went by (2 ms of
		// them at least: a timer's lateness), and the one due now; at a
		// burst of 100, every one of the 20 ms (a lease bounds it at
		// 50 ms).
		assert.Equal(t, c.atOnce, atOnce, "burst %d", c.burst)
	}
}
