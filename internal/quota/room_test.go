package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The room a request leaves in a bucket: none before the server has
// counted the bucket, nor in a quota renewed whole; a quarter of the cost
// once it has; three costs more from the second reading, within the span,
// that lacks a request's worth beyond the key's takings, for two spans;
// one reading that lacks it now and then shows nobody.
func TestRoomForClientsUnseen(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	after := func(d time.Duration) time.Time { return t0.Add(d) }
	b := costBucket{picture: picture{limit: 2000, known: true, window: time.Second, refills: true}, level: 2000, at: t0}
	assert.Zero(t, b.room(t0, 200), "not counted yet: as configured")
	b.counted = true
	assert.InDelta(t, 50, b.room(t0, 200), 1e-9, "counted: a quarter of the cost")
	assert.InDelta(t, 200, b.room(t0, 1800), 1e-9, "never past the limit")
	windowed := b
	windowed.refills = false
	assert.Zero(t, windowed.room(t0, 200), "a quota renewed whole")

	b.unseen(after(0))
	b.unseen(after(11 * time.Second)) // not within the span of 10 s: no proof
	assert.InDelta(t, 50, b.room(after(11*time.Second), 200), 1e-9, "one lacking reading now and then")
	b.unseen(after(15 * time.Second)) // the second within 10 s of the one at 11 s
	assert.InDelta(t, 600, b.room(after(15*time.Second), 200), 1e-9, "others shown: four costs in all")
	assert.InDelta(t, 600, b.room(after(35*time.Second), 200), 1e-9, "for two spans")
	assert.InDelta(t, 50, b.room(after(36*time.Second), 200), 1e-9, "then a quarter again")
}
