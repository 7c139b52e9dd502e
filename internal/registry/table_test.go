package registry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rotateAll rotates every shard of tb at now, as calls to keys in every
// shard would.
func rotateAll[V any](tb *Table[V], now time.Time) {
	for i := range tb.shards {
		tb.Rotate(&tb.shards[i], now.UnixNano())
	}
}

// held returns the value tb holds for key, without touching it; nil if
// none.
func held[V any](tb *Table[V], key string) *V {
	v, _ := tb.ShardOf(key).Peek(key)
	return v
}

func newIntTable(idle time.Duration, busy func(*int, int64) bool) *Table[int] {
	tb := new(Table[int])
	tb.Init(idle, func(string, time.Time) *int { return new(int) }, busy)
	return tb
}

// A key is forgotten once idle for one to two timeouts; a key in use is
// kept, whatever its age.
func TestTableForgetsIdleKeys(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tb := newIntTable(time.Minute, nil)
	rotateAll(tb, t0) // the first rotation starts the clock

	a := tb.Use("a", at(0))
	tb.Use("b", at(0))
	rotateAll(tb, at(61*time.Second)) // young → old
	assert.Same(t, a, held(tb, "a"), "idle for one timeout: still held")
	assert.Same(t, a, tb.Use("a", at(70*time.Second)), "used again: the same state")

	rotateAll(tb, at(122*time.Second))
	assert.Nil(t, held(tb, "b"), "idle for two rotations: forgotten")
	assert.Same(t, a, held(tb, "a"), "used since the last rotation but one: held")
	assert.Equal(t, 1, tb.Len())

	rotateAll(tb, at(10*time.Minute)) // two timeouts since the last rotation
	assert.Equal(t, 0, tb.Len(), "both generations dropped")
	assert.NotSame(t, a, tb.Use("a", at(10*time.Minute)), "a forgotten key starts afresh")
}

// A pinned key outlives its idleness until its time, and is then
// forgotten.
func TestTablePinnedKeys(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := newIntTable(time.Minute, nil)
	rotateAll(tb, t0)
	a := tb.Use("a", t0)
	tb.Pin("a", t0.Add(5*time.Minute))
	for m := 1; m <= 5; m++ {
		rotateAll(tb, t0.Add(time.Duration(m)*time.Minute))
		require.Same(t, a, held(tb, "a"), "minute %d: pinned", m)
	}
	rotateAll(tb, t0.Add(6*time.Minute))
	rotateAll(tb, t0.Add(7*time.Minute))
	assert.Nil(t, held(tb, "a"), "its time over, the key is forgotten like any other")
	assert.Empty(t, tb.ShardOf("a").pinned, "and so is its pin")
}

// A busy value outlives its key's idleness.
func TestTableKeepsBusyValues(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := newIntTable(time.Minute, func(v *int, _ int64) bool { return *v > 0 })
	rotateAll(tb, t0)
	busy, idle := tb.Use("busy", t0), tb.Use("idle", t0)
	*busy = 1
	rotateAll(tb, t0.Add(10*time.Minute))
	assert.Same(t, busy, held(tb, "busy"))
	assert.Nil(t, held(tb, "idle"))
	*busy = 0
	rotateAll(tb, t0.Add(20*time.Minute))
	assert.Nil(t, held(tb, "busy"), "no longer busy: forgotten")
	_ = idle
}

// A call that outlives the idle timeout puts its state back when it ends,
// unless a newer state has taken the key meanwhile.
func TestTableKeep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := newIntTable(time.Minute, nil)
	rotateAll(tb, t0)
	sh := tb.ShardOf("a")
	rotated := sh.rotated.Load()
	a := tb.EnsureIn(sh, "a", true, nil)
	rotateAll(tb, t0.Add(5*time.Minute)) // the call is still out: a is dropped
	require.Nil(t, held(tb, "a"))
	tb.Keep(sh, "a", a, t0.Add(5*time.Minute), rotated)
	assert.Same(t, a, held(tb, "a"), "the call's state is the key's again")

	rotated = sh.rotated.Load()
	rotateAll(tb, t0.Add(10*time.Minute))
	newer := tb.Use("a", t0.Add(10*time.Minute))
	tb.Keep(sh, "a", a, t0.Add(10*time.Minute), rotated)
	assert.Same(t, newer, held(tb, "a"), "a newer state is not replaced")
}
