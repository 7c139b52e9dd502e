package polite_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingMemory remembers nothing and records what it is told, and when.
type recordingMemory struct {
	mu    sync.Mutex
	told  []polite.Remembered
	start time.Time
	at    []time.Duration
}

func (m *recordingMemory) Recall(string) (polite.Remembered, bool) { return polite.Remembered{}, false }

func (m *recordingMemory) Remember(_ string, r polite.Remembered) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.told, m.at = append(m.told, r), append(m.at, time.Since(m.start))
}

// A limit lower than the one told is told once it has stood two holds
// (8 s), not at the probe that first settles it: a limiter that counts
// refusals (HAProxy) locks the client out for a moment after a probe's
// crossing, and a process restarted from the limit measured then started
// at 0.72 of the server's. A limit that dropped for good is told once it
// stands. Here the server's limit drops from 100 to 50 at 10 s.
func TestMemoryToldALowerLimitOnceItStands(t *testing.T) {
	sc := scenario{name: "throttled", limiter: func() limiter { return &throttledGCRA{maxBurst: 9} },
		schedule: []step{{0, qualityLimit}, {10 * time.Second, qualityLimit / 2}}, length: 30 * time.Second}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		mem := &recordingMemory{start: start}
		srv := sc.server(start, sc.schedule, 1)
		sc.drive(t, polite.New(srv, polite.WithSeed(1), polite.WithMemory(mem)), start)
		mem.mu.Lock()
		defer mem.mu.Unlock()
		require.NotEmpty(t, mem.told)
		first := -1
		for i, r := range mem.told {
			t.Logf("%v: %.1f", mem.at[i].Round(100*time.Millisecond), r.Limit)
			if r.Limit < 0.8*qualityLimit && first < 0 {
				first = i
			}
			if mem.at[i] < 10*time.Second {
				assert.InDelta(t, qualityLimit, r.Limit, 0.1*qualityLimit, "before the drop")
			}
		}
		require.GreaterOrEqual(t, first, 0, "the lower limit told, once it stood")
		assert.GreaterOrEqual(t, mem.at[first], 17*time.Second, "not before it stood 8 s")
		assert.InDelta(t, qualityLimit/2, mem.told[first].Limit, 0.15*qualityLimit/2)
	})
}
