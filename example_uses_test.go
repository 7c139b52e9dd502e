package polite_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite"
)

// The examples below are the README's uses, one each; fleet.ExampleNew,
// politecost.ExampleOpenAI and politeretry.ExampleNewClient are the
// others.

// An API SDK's client: polite with its defaults, told nothing of the API's
// limit, learns it from the server's headers and throttles, holds the
// pauses it asks for, and retries a throttled call once the server's
// Retry-After has passed. The server here is a local one that throttles
// the first call.
func Example_apiClient() {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `{"id":42}`)
	}))
	defer srv.Close()

	// In the SDK's constructor: every call of the SDK goes through it.
	client := &http.Client{
		Transport: polite.New(nil, polite.WithHooks(polite.Hooks{
			OnThrottled: func(e polite.Event) { fmt.Println("throttled:", e.Reason()) },
		})),
		Timeout: 30 * time.Second,
	}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL + "/items/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body), "after", requests.Load(), "requests")
	// Output:
	// throttled: status 429
	// 200 OK {"id":42} after 2 requests
}

// A crawler: each host's robots.txt read first for its Crawl-delay, at
// most one request in flight to a host, hosts idle for a minute
// forgotten. Eight workers fetch four pages from each of two local sites
// at once; each site counts the requests it had in flight together.
func Example_crawler() {
	type site struct {
		srv                  *httptest.Server
		robots, pages        atomic.Int64
		inFlight, mostAtOnce atomic.Int64
	}
	newSite := func() *site {
		s := &site{}
		s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				s.robots.Add(1)
				fmt.Fprint(w, "User-agent: *\nCrawl-delay: 0.01\n") // 10 ms between requests
				return
			}
			n := s.inFlight.Add(1)
			defer s.inFlight.Add(-1)
			for {
				most := s.mostAtOnce.Load()
				if n <= most || s.mostAtOnce.CompareAndSwap(most, n) {
					break
				}
			}
			s.pages.Add(1)
			fmt.Fprint(w, "<html>a page</html>")
		}))
		return s
	}
	sites := []*site{newSite(), newSite()}
	defer func() {
		for _, s := range sites {
			s.srv.Close()
		}
	}()

	client := &http.Client{Transport: polite.New(nil,
		polite.WithCrawlDelay(true),         // robots.txt's Crawl-delay spaces each host's requests
		polite.WithMaxInFlight(1),           // at most one request out to a host at once
		polite.WithGlobalRate(1000, 100),    // and at most 1000 a second over all hosts
		polite.WithIdleTimeout(time.Minute), // forget a host idle this long
	)}
	defer client.CloseIdleConnections()

	var urls []string
	for page := range 4 {
		for _, s := range sites {
			urls = append(urls, fmt.Sprintf("%s/page/%d", s.srv.URL, page))
		}
	}
	var wg sync.WaitGroup
	for _, u := range urls { // eight workers, one URL each
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Header.Set("User-Agent", "ExampleBot/1.0")
			resp, err := client.Do(req)
			if err != nil {
				fmt.Println(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	for i, s := range sites {
		fmt.Printf("site %d: robots.txt read %d time, %d pages, at most %d in flight\n",
			i+1, s.robots.Load(), s.pages.Load(), s.mostAtOnce.Load())
	}
	// Output:
	// site 1: robots.txt read 1 time, 4 pages, at most 1 in flight
	// site 2: robots.txt read 1 time, 4 pages, at most 1 in flight
}

// Two API tokens calling one host are two quotas: WithKey names the key
// by the host and the token, so that each token's calls are paced, and
// the server's pauses held, apart from the other's.
func ExampleWithKey() {
	api := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return respond(req, http.StatusOK, io.NopCloser(strings.NewReader("ok"))), nil
	})
	tr := polite.New(api, polite.WithKey(func(req *http.Request) string {
		token := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		return req.URL.Host + "|" + token // in real use, a hash of the token
	}))
	for _, token := range []string{"alice", "bob", "alice"} {
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/items", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	var keys []string
	for k := range tr.Keys() {
		keys = append(keys, k.Key)
	}
	slices.Sort(keys)
	fmt.Println(keys)
	// Output: [api.example|alice api.example|bob]
}
