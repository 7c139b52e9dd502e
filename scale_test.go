package polite_test

import (
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// liveHeap returns the bytes of live heap, after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// crawlURL returns the URL of a page on host i, as a crawler would ask
// for it: the key (the host) is a small part of a long URL.
func crawlURL(i int) string {
	return "http://host" + strconv.Itoa(i) + ".test/articles/2026/11/a-page-with-a-long-name.html?ref=front"
}

// visit sends one GET to host i.
func visit(tb testing.TB, rt http.RoundTripper, i int) {
	req, err := http.NewRequest(http.MethodGet, crawlURL(i), nil)
	require.NoError(tb, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(tb, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// TestMillionKeys sends one request to each of 1,000,000 hosts through a
// default Transport: their state must take at most 300 MB of heap while
// live, and at most 10 MB once the hosts have been idle for two idle
// timeouts and calls to other hosts have let each shard of the registry
// rotate. Under the race detector and in short mode, 100,000 hosts and 30
// MB while live (CI runs it again without the race detector, in full).
func TestMillionKeys(t *testing.T) {
	keys := 1_000_000
	if scaledDown() {
		keys = 100_000
	}
	synctest.Test(t, func(t *testing.T) {
		base := liveHeap()
		tr := polite.New(okNext())
		for i := range keys {
			visit(t, tr, i)
		}
		live := liveHeap() - base
		time.Sleep(20*time.Minute + time.Second)
		for i := range 4096 { // new hosts, in every shard with near certainty
			visit(t, tr, keys+i)
		}
		after := liveHeap() - base
		runtime.KeepAlive(tr)
		t.Logf("%d keys: %.1f MB live (%d B/key), %.2f MB after eviction",
			keys, float64(live)/1e6, live/uint64(keys), float64(after)/1e6)
		assert.LessOrEqual(t, live, uint64(keys)*300, "heap while live: 300 B a key")
		assert.LessOrEqual(t, after, uint64(10e6), "heap after eviction")
	})
}

// BenchmarkKeys sends one request to each of b.N hosts and reports the
// live heap per host (B/key): what a crawler pays for each host it has
// seen within the idle timeout. Run with -benchtime 1000000x for the
// figure at a million hosts.
func BenchmarkKeys(b *testing.B) {
	cases := []struct {
		name string
		opts []polite.Option
	}{
		{"default", nil},
		{"rate", []polite.Option{polite.WithRate(1e12, 1<<30)}},
		{"rate-inflight", []polite.Option{polite.WithRate(1e12, 1<<30), polite.WithMaxInFlight(4)}},
		{"crawler", []polite.Option{polite.WithRate(1e12, 1<<30), polite.WithMaxInFlight(4), polite.WithCrawlDelay(true)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			base := liveHeap()
			tr := polite.New(okNext(), c.opts...)
			b.ResetTimer()
			for i := range b.N {
				visit(b, tr, i)
			}
			b.StopTimer()
			b.ReportMetric(float64(liveHeap()-base)/float64(b.N), "B/key")
			runtime.KeepAlive(tr)
		})
	}
}
