package polite_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// site is an in-memory set of hosts, each with its robots.txt answer.
type site struct {
	mu     sync.Mutex
	robots map[string]func() (*http.Response, error) // by host
	pages  map[string][]time.Time                    // page requests, by host
	asked  map[string]int                            // robots.txt requests, by host
}

func newSite() *site {
	return &site{robots: map[string]func() (*http.Response, error){}, pages: map[string][]time.Time{}, asked: map[string]int{}}
}

func (s *site) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	host := req.URL.Host
	if req.URL.Path == "/robots.txt" || strings.HasPrefix(req.URL.Path, "/moved-robots") {
		s.asked[host]++
		if answer := s.robots[host]; answer != nil {
			resp, err := answer()
			if resp != nil {
				resp.Request = req
			}
			return resp, err
		}
		return respond(req, http.StatusNotFound, newBody("not found")), nil
	}
	s.pages[host] = append(s.pages[host], time.Now())
	return respond(req, http.StatusOK, newBody("page")), nil
}

func robotsFile(body string) func() (*http.Response, error) {
	return func() (*http.Response, error) { return respond(nil, http.StatusOK, newBody(body)), nil }
}

func crawl(t *testing.T, tr http.RoundTripper, urls ...string) []error {
	t.Helper()
	var errs []error
	for _, u := range urls {
		req := mustRequest(t, t.Context(), u)
		req.Header.Set("User-Agent", "MyBot/1.0")
		resp, err := tr.RoundTrip(req)
		if err == nil {
			readBody(t, resp)
		}
		errs = append(errs, err)
	}
	return errs
}

func TestCrawlDelaySpacesEachHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.robots["slow.test"] = robotsFile("User-agent: *\nCrawl-delay: 2\n")
		s.robots["fast.test"] = robotsFile("User-agent: mybot\nCrawl-delay: 0.5\n\nUser-agent: *\nCrawl-delay: 30\n")
		tr := polite.New(s, polite.WithCrawlDelay(true))
		start := time.Now()
		var wg sync.WaitGroup
		for range 3 { // concurrent first requests: one robots.txt fetch
			wg.Go(func() { crawl(t, tr, "http://slow.test/a") })
		}
		wg.Wait()
		crawl(t, tr, "http://fast.test/1", "http://fast.test/2", "http://fast.test/3", "http://none.test/x", "http://none.test/y")
		assert.Equal(t, 1, s.asked["slow.test"])
		assert.Equal(t, 1, s.asked["none.test"])
		gaps := func(host string) (g []time.Duration) {
			for i := 1; i < len(s.pages[host]); i++ {
				g = append(g, s.pages[host][i].Sub(s.pages[host][i-1]))
			}
			return g
		}
		assert.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second}, gaps("slow.test"))
		assert.Equal(t, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}, gaps("fast.test"), "our own group")
		assert.Equal(t, []time.Duration{0}, gaps("none.test"), "404: no restriction")
		assert.Equal(t, 4*time.Second+time.Second, time.Since(start), "4s on slow.test, then 1s on fast.test")

		// robots.txt is trusted a day, then asked for again.
		time.Sleep(25 * time.Hour)
		crawl(t, tr, "http://slow.test/b")
		assert.Equal(t, 2, s.asked["slow.test"])
	})
}

func TestUnreachableRobotsPutsTheHostOffLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		down := true
		s.robots["down.test"] = func() (*http.Response, error) {
			if down {
				return respond(nil, http.StatusServiceUnavailable, newBody("busy")), nil
			}
			return respond(nil, http.StatusOK, newBody("")), nil
		}
		s.robots["gone.test"] = func() (*http.Response, error) {
			return nil, &netError{syscall.ECONNREFUSED}
		}
		tr := polite.New(s, polite.WithCrawlDelay(true))
		errs := crawl(t, tr, "http://down.test/a", "http://down.test/b", "http://gone.test/a")
		var re *polite.RobotsError
		require.ErrorAs(t, errs[0], &re)
		assert.Equal(t, "down.test", re.Host)
		assert.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
		assert.ErrorIs(t, errs[1], polite.ErrRobotsUnreachable)
		assert.ErrorIs(t, errs[2], polite.ErrRobotsUnreachable)
		assert.ErrorIs(t, errs[2], syscall.ECONNREFUSED)
		assert.Empty(t, s.pages["down.test"], "no page asked for")
		assert.Equal(t, 1, s.asked["down.test"], "asked once, not per request")

		down = false
		time.Sleep(time.Minute)
		errs = crawl(t, tr, "http://down.test/a")
		assert.NoError(t, errs[0], "asked again a minute later")
		assert.Len(t, s.pages["down.test"], 1)
	})
}

func TestRobotsRedirectsAreFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		hops := 0
		s.robots["moved.test"] = func() (*http.Response, error) {
			hops++
			if hops < 3 {
				return respond(nil, http.StatusMovedPermanently, newBody(""), "Location", "/moved-robots-"+string(rune('0'+hops))), nil
			}
			return respond(nil, http.StatusOK, newBody("User-agent: *\nCrawl-delay: 1")), nil
		}
		tr := polite.New(s, polite.WithCrawlDelay(true))
		start := time.Now()
		crawl(t, tr, "http://moved.test/a", "http://moved.test/b")
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, 3, s.asked["moved.test"])
	})
}

func TestSpacingJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSite()
		s.robots["a.test"] = robotsFile("User-agent: *\nCrawl-delay: 2")
		tr := polite.New(s, polite.WithCrawlDelay(true), polite.WithSpacingJitter(0.5))
		urls := make([]string, 200)
		for i := range urls {
			urls[i] = "http://a.test/p"
		}
		start := time.Now()
		crawl(t, tr, urls...)
		seen := map[time.Duration]bool{}
		for i := 1; i < len(s.pages["a.test"]); i++ {
			g := s.pages["a.test"][i].Sub(s.pages["a.test"][i-1])
			require.GreaterOrEqual(t, g, time.Second)
			require.LessOrEqual(t, g, 3*time.Second)
			seen[g] = true
		}
		assert.Greater(t, len(seen), 100, "gaps vary")
		mean := time.Since(start) / 199
		assert.InDelta(t, 2, mean.Seconds(), 0.2, "the mean stays the delay")
	})
}

// hostCount is a next that counts, by host (without the scheme, as the
// default key has it), the requests in flight: from their sending until
// their response body is closed. It records the most it saw at once.
type hostCount struct {
	mu     sync.Mutex
	now    map[string]int
	peak   map[string]int
	robots int // robots.txt requests
}

func newHostCount() *hostCount {
	return &hostCount{now: map[string]int{}, peak: map[string]int{}}
}

func (h *hostCount) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	h.mu.Lock()
	h.now[host]++
	h.peak[host] = max(h.peak[host], h.now[host])
	if req.URL.Path == "/robots.txt" {
		h.robots++
	}
	h.mu.Unlock()
	body := &countedBody{Reader: strings.NewReader("page"), done: func() {
		h.mu.Lock()
		h.now[host]--
		h.mu.Unlock()
	}}
	return respond(req, http.StatusOK, body), nil
}

// countedBody calls done once, when read to the end or closed: a request
// is in flight until then, as polite counts it (its slot is free once the
// body is read to the end, before the caller closes it).
type countedBody struct {
	io.Reader
	done func()
	once sync.Once
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *countedBody) Close() error {
	b.once.Do(b.done)
	return nil
}

// figures returns the most requests seen in flight at host at once, and
// the robots.txt requests.
func (h *hostCount) figures(host string) (peak, robots int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak[host], h.robots
}

// A robots.txt fetch takes a place under WithMaxInFlight as any request
// does: fetched again (its entry forgotten while the host was idle, or a
// day old), or fetched first for another scheme of the same key, while a
// caller holds a response body open, it waits for the place.
func TestRobotsFetchTakesAPlaceInFlight(t *testing.T) {
	tests := []struct {
		name   string
		idle   time.Duration // WithIdleTimeout
		later  time.Duration // how long the first body is held before the second call
		second string        // the second call's URL
	}{
		{"forgotten", time.Minute, 3 * time.Minute, "http://a.test/2"},
		{"a day old", polite.DefaultIdleTimeout, 25 * time.Hour, "http://a.test/2"},
		{"first for https", polite.DefaultIdleTimeout, 0, "https://a.test/2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newHostCount()
				tr := polite.New(next, polite.WithCrawlDelay(true), polite.WithMaxInFlight(1), polite.WithIdleTimeout(tt.idle))
				held, err := get(t, t.Context(), tr, "http://a.test/1")
				require.NoError(t, err)
				time.Sleep(tt.later)

				done := make(chan struct{})
				go func() {
					defer close(done)
					resp, err := get(t, t.Context(), tr, tt.second)
					if assert.NoError(t, err) {
						readBody(t, resp)
					}
				}()
				synctest.Wait()
				peak, robots := next.figures("a.test")
				assert.Equal(t, 1, peak, "requests in flight at the host while a body is held")
				assert.Equal(t, 1, robots, "robots.txt waits for a place")
				readBody(t, held)
				<-done
				peak, robots = next.figures("a.test")
				assert.Equal(t, 1, peak, "requests in flight at the host")
				assert.Equal(t, 2, robots, "robots.txt fetched again once the place was free")
			})
		})
	}
}

// A caller that holds the only place and calls the key again waits for a
// place, for robots.txt as for its own request, until its deadline: it
// never deadlocks for longer, and robots.txt is left for the next call to
// fetch.
func TestRobotsFetchWaitsForTheCallersOwnBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newHostCount()
		tr := polite.New(next, polite.WithCrawlDelay(true), polite.WithMaxInFlight(1), polite.WithIdleTimeout(time.Minute))
		held, err := get(t, t.Context(), tr, "http://a.test/1")
		require.NoError(t, err)
		time.Sleep(3 * time.Minute) // robots.txt forgotten; the held place keeps the key

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = get(t, ctx, tr, "http://a.test/2")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 5*time.Second, time.Since(start), "waited until its deadline")
		peak, robots := next.figures("a.test")
		assert.Equal(t, 1, peak)
		assert.Equal(t, 1, robots, "robots.txt not fetched: no place")

		readBody(t, held)
		fetch(t, tr, "http://a.test/3")
		peak, robots = next.figures("a.test")
		assert.Equal(t, 1, peak)
		assert.Equal(t, 2, robots, "the next call fetched it")
	})
}

// A hook that panics as a robots.txt fetch gets its place (OnWait tells of
// the wait for it once over) leaves the place free, and robots.txt for the
// next call to fetch.
func TestRobotsFetchPanicFreesItsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newHostCount()
		var armed atomic.Bool
		hooks := polite.Hooks{OnWait: func(e polite.Event) {
			if e.Wait == polite.WaitSlot && armed.Swap(false) {
				panic("hook")
			}
		}}
		tr := polite.New(next, polite.WithCrawlDelay(true), polite.WithMaxInFlight(1), polite.WithIdleTimeout(time.Minute), polite.WithHooks(hooks))
		held, err := get(t, t.Context(), tr, "http://a.test/1")
		require.NoError(t, err)
		time.Sleep(3 * time.Minute)
		armed.Store(true)
		panicked := make(chan any)
		go func() {
			defer func() { panicked <- recover() }()
			_, _ = tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/2"))
		}()
		time.Sleep(time.Second) // a wait of no time is not told
		readBody(t, held)
		assert.Equal(t, "hook", <-panicked)
		_, robots := next.figures("a.test")
		assert.Equal(t, 1, robots, "the panic came before the fetch")

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		resp, err := get(t, ctx, tr, "http://a.test/3")
		require.NoError(t, err, "the place is free")
		readBody(t, resp)
		_, robots = next.figures("a.test")
		assert.Equal(t, 2, robots)
	})
}

// netError is a transport error for the tests.
type netError struct{ err error }

func (e *netError) Error() string { return "dial tcp: " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }
