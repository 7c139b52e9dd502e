package engine

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNowIsTheClocksTime checks the engine's clock against time.Now in
// fake time, where the two read the same instant: the same wall and
// monotonic readings before the first anchor, within a second of it, and
// past the second that takes the wall clock again.
func TestNowIsTheClocksTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{})
		for _, step := range []time.Duration{0, 0, 300 * time.Millisecond, 699 * time.Millisecond, time.Millisecond, 5 * time.Second, 10 * time.Millisecond} {
			time.Sleep(step)
			now, want := e.Now(), time.Now()
			assert.True(t, now.Equal(want), "after %v: %v, want %v", step, now, want)
			assert.Equal(t, want.UnixNano(), now.UnixNano(), "the wall reading")
			assert.Zero(t, now.Sub(want), "the monotonic reading")
		}
	})
}

// TestNowFollowsTheWallClock checks the engine's clock on the real
// clocks, from several goroutines: each reading falls between two reads
// of time.Now around it, on the monotonic clock and on the wall clock
// within the anchor's second of slew.
func TestNowFollowsTheWallClock(t *testing.T) {
	e := New(Config{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				before := time.Now()
				now := e.Now()
				after := time.Now()
				require.False(t, now.Before(before) || now.After(after), "monotonic: %v not within [%v, %v]", now, before, after)
				wall := now.Round(0)
				assert.WithinRange(t, wall, before.Round(0).Add(-time.Millisecond), after.Round(0).Add(time.Millisecond), "wall")
			}
		})
	}
	wg.Wait()
}

var nowSink time.Time

// BenchmarkNow is the engine's clock beside time.Now, in the same run.
func BenchmarkNow(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			nowSink = time.Now()
		}
	})
	b.Run("Engine.Now", func(b *testing.B) {
		e := New(Config{})
		for b.Loop() {
			nowSink = e.Now()
		}
	})
}
