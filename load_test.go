package polite_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

const (
	loadCallers  = 1000
	loadKeys     = 10000
	loadInFlight = 2 // WithMaxInFlight
)

// loadServer is an in-memory server for the load tests: it counts the
// requests in flight to each key, as a server would, and keeps the most
// it ever saw; it answers 200, with a 429 (Retry-After: 1) now and then
// and a 503 more rarely, after latency (fake time in a bubble).
type loadServer struct {
	latency  time.Duration
	inFlight map[string]*atomic.Int32 // made up front for every key: read without a lock
	most     atomic.Int32
	served   atomic.Int64
}

func newLoadServer(latency time.Duration) *loadServer {
	s := &loadServer{latency: latency, inFlight: make(map[string]*atomic.Int32, loadKeys)}
	for i := range loadKeys {
		s.inFlight[loadKey(i)] = new(atomic.Int32)
	}
	return s
}

func loadKey(i int) string { return "k" + strconv.Itoa(i) + ".test" }

func (s *loadServer) RoundTrip(req *http.Request) (*http.Response, error) {
	c := s.inFlight[req.URL.Host]
	n := c.Add(1)
	for {
		most := s.most.Load()
		if n <= most || s.most.CompareAndSwap(most, n) {
			break
		}
	}
	if s.latency > 0 {
		time.Sleep(s.latency)
	}
	served := s.served.Add(1)
	code, header := http.StatusOK, []string(nil)
	switch {
	case served%97 == 0:
		code, header = http.StatusTooManyRequests, []string{"Retry-After", "1"}
	case served%251 == 0:
		code = http.StatusServiceUnavailable
	}
	// The request is in flight until its body is closed.
	return respond(req, code, &loadBody{Reader: strings.NewReader("ok"), done: c}, header...), nil
}

// loadBody ends its request's flight when it has been read to its end or
// closed, whichever comes first: the server has sent the whole response
// then (polite gives the key's place in flight back at either).
type loadBody struct {
	io.Reader
	once sync.Once
	done *atomic.Int32
}

func (b *loadBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.end()
	}
	return n, err
}

func (b *loadBody) Close() error {
	b.end()
	return nil
}

func (b *loadBody) end() { b.once.Do(func() { b.done.Add(-1) }) }

// loadTransport is the Transport under load: keys paced and capped in
// flight, retries bounded, and idle keys forgotten all the while.
func loadTransport(next http.RoundTripper, idle time.Duration) *polite.Transport {
	return polite.New(next,
		polite.WithRate(20, 2),
		polite.WithMaxInFlight(loadInFlight),
		polite.WithIdleTimeout(idle),
		polite.WithBackoff(10*time.Millisecond, time.Second),
		polite.WithMaxRetryAfter(5*time.Second),
	)
}

// loadCaller sends requests to random keys until stop is closed (or ctx
// is done), counting each answered call in done.
func loadCaller(ctx context.Context, tr http.RoundTripper, seed uint64, stop <-chan struct{}, done *atomic.Int64) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, err := http.NewRequestWithContext(callCtx, http.MethodGet, "http://"+loadKey(rng.IntN(loadKeys))+"/", nil)
		if err != nil {
			cancel()
			return err
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if (resp == nil) == (err == nil) {
			return fmt.Errorf("a response %v and an error %v", resp, err)
		}
		done.Add(1)
	}
}

// TestLoadFakeTime: 1,000 callers over 10,000 keys for 30 s of fake time
// (5 s in short mode), keys idle for 2 s forgotten meanwhile. A deadlock
// would end the bubble with synctest's own report of every goroutine
// blocked; no caller is left, no key is over its cap in flight, and the
// Transport holds only the keys used lately.
func TestLoadFakeTime(t *testing.T) {
	length := 30 * time.Second
	if testing.Short() {
		length = 5 * time.Second
	}
	synctest.Test(t, func(t *testing.T) {
		srv := newLoadServer(100 * time.Millisecond)
		idle := 2 * time.Second
		tr := loadTransport(srv, idle)
		stop := make(chan struct{})
		var done atomic.Int64
		errs := make(chan error, loadCallers)
		var wg sync.WaitGroup
		for i := range loadCallers {
			wg.Go(func() { errs <- loadCaller(t.Context(), tr, uint64(i), stop, &done) })
		}
		time.Sleep(length)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		assert.LessOrEqual(t, srv.most.Load(), int32(loadInFlight), "a key over WithMaxInFlight, as its server counted")
		assert.Greater(t, done.Load(), int64(length/time.Second)*loadCallers, "calls answered in %v", length)

		// Idle keys go within two timeouts of their last use. Forgetting
		// is lazy, done by the calls that follow in each shard of keys:
		// calls to 1,000 keys reach every shard.
		time.Sleep(3 * idle)
		for i := range 1000 {
			fetch(t, tr, "http://"+loadKey(i)+"/").Body.Close()
		}
		n := 0
		for range tr.Keys() {
			n++
		}
		assert.LessOrEqual(t, n, 1000, "keys held after the others were idle past two timeouts, of 10,000 used")
		t.Logf("%d keys held after the sweep", n)
		t.Logf("%d calls answered, %d attempts, at most %d in flight to a key", done.Load(), srv.served.Load(), srv.most.Load())
	})
}

// TestLoadRealTime: 1,000 callers over 10,000 keys for 5 s of real time
// (under -race in CI; 1 s in short mode), keys idle for 100 ms forgotten
// meanwhile. A watchdog fails the test with every goroutine's stack if no
// call is answered for 10 s; no key goes over its cap in flight; the heap
// after the run is bounded.
func TestLoadRealTime(t *testing.T) {
	length := 5 * time.Second
	if testing.Short() {
		length = time.Second
	}
	srv := newLoadServer(0)
	tr := loadTransport(srv, 100*time.Millisecond)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	stop := make(chan struct{})
	// At the end, the calls still waiting are cancelled, as a program
	// shutting down does.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var done atomic.Int64
	errs := make(chan error, loadCallers)
	var wg sync.WaitGroup
	for i := range loadCallers {
		wg.Go(func() { errs <- loadCaller(ctx, tr, uint64(i), stop, &done) })
	}
	end := time.NewTimer(length)
	tick := time.NewTicker(500 * time.Millisecond)
	last, lastAt := int64(0), time.Now()
watch:
	for {
		select {
		case <-end.C:
			break watch
		case now := <-tick.C:
			if d := done.Load(); d != last {
				last, lastAt = d, now
			} else if now.Sub(lastAt) > 10*time.Second {
				var stacks strings.Builder
				_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
				close(stop)
				cancel()
				t.Fatalf("no call answered for %v: a deadlock? goroutines:\n%s", now.Sub(lastAt), stacks.String())
			}
		}
	}
	tick.Stop()
	close(stop)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, srv.most.Load(), int32(loadInFlight), "a key over WithMaxInFlight, as its server counted")
	assert.Greater(t, done.Load(), int64(loadCallers), "calls answered in %v", length)

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	// 10,000 keys at a few hundred bytes each, had none been forgotten,
	// are a few MB; the bound leaves room for the runtime's own.
	assert.Less(t, grown, int64(64<<20), "heap grown by the run")
	t.Logf("%d calls answered, %d attempts, at most %d in flight to a key, heap in use grew %d KB",
		done.Load(), srv.served.Load(), srv.most.Load(), grown>>10)
}

// TestKeyHeldWhileItsCallWaits: a call that has found its key's state and
// waits before taking a slot (here, for its host's Crawl-delay) holds the
// key, however many idle timeouts pass while other keys keep the registry
// rotating. Were the key forgotten, a later call would make the key a new
// state with free slots while the waiting call went on with the old one:
// two requests in flight to a key capped at one. The load test found this
// under -race on 2 cores, where a call descheduled for 200 ms between
// finding the state and taking a slot was enough.
func TestKeyHeldWhileItsCallWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			inFlight int
			most     int
		)
		answer := make(chan struct{}) // closed: the server answers the held requests
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch {
			case req.URL.Path == "/robots.txt":
				return respond(req, http.StatusOK, newBody("User-agent: *\nCrawl-delay: 10\n")), nil
			case !strings.HasPrefix(req.URL.Path, "/held"):
				return respond(req, http.StatusOK, http.NoBody), nil
			}
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			<-answer
			mu.Lock()
			inFlight--
			mu.Unlock()
			return respond(req, http.StatusOK, http.NoBody), nil
		})
		tr := polite.New(next,
			polite.WithCrawlDelay(true),
			polite.WithMaxInFlight(1),
			polite.WithIdleTimeout(time.Second),
		)
		start := time.Now()
		fetch(t, tr, "http://k.test/first") // the host's next request waits 10 s
		var wg sync.WaitGroup
		wg.Go(func() { fetch(t, tr, "http://k.test/held-a") }) // sent at 10 s
		// Five idle timeouts of calls to other keys, every shard rotated
		// again and again.
		for round := range 20 {
			time.Sleep(250 * time.Millisecond)
			for i := range 100 {
				fetch(t, tr, fmt.Sprintf("http://o%d-%d.test/", round, i))
			}
		}
		wg.Go(func() { fetch(t, tr, "http://k.test/held-b") }) // its turn comes at 20 s
		time.Sleep(25*time.Second - time.Since(start))
		close(answer)
		wg.Wait()
		assert.Equal(t, 1, most, "requests in flight at once to k.test, capped at 1")
	})
}
