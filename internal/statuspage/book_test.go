package statuspage

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite/politestatus"
)

// A ring keeps the last History samples, the oldest first, and counts
// the last minute's.
func TestRing(t *testing.T) {
	var r ring
	start := time.Unix(1_000_000, 0)
	for i := range History + 50 {
		r.add(sample{at: start.Add(time.Duration(i) * time.Second).UnixNano(), sent: uint32(i), seconds: 1})
	}
	s := r.samples()
	require.Len(t, s, History)
	assert.Equal(t, 50, s[0].Sent, "the oldest kept")
	assert.Equal(t, History+49, s[History-1].Sent, "the newest last")
	var c politestatus.Counts
	now := start.Add(time.Duration(History+49) * time.Second)
	r.last(now, &c)
	want := 0
	for i := History - 10; i < History+50; i++ {
		want += i
	}
	assert.Equal(t, politestatus.Counts{Sent: want, Seconds: 60}, c, "the samples of the minute before now: 60 of them")
}

// The walk's heap keeps the candidates of most calls, then most sends.
func TestHeapKeepsTheBusiest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []candidate
	for range 1000 {
		all = append(all, candidate{calls: rng.IntN(5), sent: rng.Uint32N(100)})
	}
	const want = 20
	var heap []candidate
	for _, c := range all {
		heap = push(heap, c, want)
	}
	sorted := slices.SortedFunc(slices.Values(all), func(a, b candidate) int { return b.less(&a) })
	got := slices.SortedFunc(slices.Values(heap), func(a, b candidate) int { return b.less(&a) })
	assert.Equal(t, sorted[:want], got)
}
