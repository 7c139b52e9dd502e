// Command crawler crawls five local sites, each with rules of its own, the
// way a crawler meets them on the web, and prints what each site served
// and refused:
//
//   - api: a token bucket of 20 requests a second (bursts of 5); the rest
//     get 429 with Retry-After: 1;
//   - blog: robots.txt asks for a Crawl-delay of 0.1 s; requests closer
//     than 0.04 s to the one before get 429;
//   - shop: 10 requests per one-second window, announced in X-RateLimit-*
//     headers; the rest get 429;
//   - forum: at most 2 requests at once (each takes 20 ms); the rest get
//     429, as Stripe's concurrency limiter answers;
//   - down: robots.txt answers 503. RFC 9309 has crawlers then assume the
//     whole site disallowed.
//
// Four workers per site fetch its 30 pages, twice: through a plain
// http.Client, then through polite set up for crawling. polite
// learns each site's rate, reads each robots.txt, and spaces, paces and
// caps its requests per site; it sends nothing to down.
//
//	go run ./examples/crawler
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/politehttp/polite"
	"golang.org/x/time/rate"
)

const (
	pages     = 30 // per site
	workers   = 4  // per site
	userAgent = "ExampleCrawler/1.0 (+https://example.com/bot)"
)

// site is one local web site and what it saw.
type site struct {
	name, rule string
	handler    func(w http.ResponseWriter, r *http.Request) bool // serves a page; false if it refused it
	robots     string                                            // the robots.txt body; "" for a 503
	served     atomic.Int64
	refused    atomic.Int64
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		if s.robots == "" {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, s.robots)
		return
	}
	if s.handler(w, r) {
		s.served.Add(1)
		io.WriteString(w, "<html>a page</html>")
		return
	}
	s.refused.Add(1)
}

func tooMany(w http.ResponseWriter, retryAfter string) bool {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(http.StatusTooManyRequests)
	return false
}

// sites returns fresh sites, with their rules.
func sites() []*site {
	bucket := rate.NewLimiter(20, 5)
	var (
		mu          sync.Mutex
		last        time.Time // blog: the last request
		window      int64     // shop: the current window, in Unix seconds
		usedInShop  int
		forumActive atomic.Int32
	)
	return []*site{
		{name: "api", rule: "20/s, bursts of 5", robots: "User-agent: *\nDisallow: /private\n",
			handler: func(w http.ResponseWriter, r *http.Request) bool {
				if !bucket.Allow() {
					return tooMany(w, "1")
				}
				return true
			}},
		{name: "blog", rule: "robots.txt Crawl-delay: 0.1", robots: "User-agent: *\nCrawl-delay: 0.1\n",
			handler: func(w http.ResponseWriter, r *http.Request) bool {
				mu.Lock()
				defer mu.Unlock()
				now := time.Now()
				ok := now.Sub(last) >= 40*time.Millisecond
				last = now
				if !ok {
					return tooMany(w, "")
				}
				return true
			}},
		{name: "shop", rule: "10 per 1 s window, X-RateLimit-*", robots: "User-agent: *\nAllow: /\n",
			handler: func(w http.ResponseWriter, r *http.Request) bool {
				mu.Lock()
				defer mu.Unlock()
				now := time.Now()
				if sec := now.Unix(); sec != window {
					window, usedInShop = sec, 0
				}
				reset := time.Unix(window+1, 0).Sub(now).Seconds()
				w.Header().Set("X-RateLimit-Limit", "10")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatFloat(reset, 'f', 3, 64))
				if usedInShop >= 10 {
					w.Header().Set("X-RateLimit-Remaining", "0")
					return tooMany(w, strconv.FormatFloat(reset, 'f', 0, 64))
				}
				usedInShop++
				w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(10-usedInShop))
				return true
			}},
		{name: "forum", rule: "2 at once", robots: "User-agent: *\nDisallow:\n",
			handler: func(w http.ResponseWriter, r *http.Request) bool {
				defer forumActive.Add(-1)
				if forumActive.Add(1) > 2 {
					return tooMany(w, "")
				}
				time.Sleep(20 * time.Millisecond)
				return true
			}},
		{name: "down", rule: "robots.txt answers 503", robots: "",
			handler: func(w http.ResponseWriter, r *http.Request) bool { return true }},
	}
}

// outcome is what a crawl did at one site, as the crawler saw it.
type outcome struct {
	offLimits atomic.Int64 // requests polite did not send: robots.txt unreachable
	failed    atomic.Int64 // other errors
	took      time.Duration
}

// crawl fetches every page of every site through client, as crawlers do:
// each site has a queue of its own, served by workers goroutines. It
// returns what it did per site.
func crawl(client *http.Client, ss []*site, urls map[*site]string) map[*site]*outcome {
	outcomes := make(map[*site]*outcome)
	var wg sync.WaitGroup
	for _, s := range ss {
		o := new(outcome)
		outcomes[s] = o
		queue := make(chan string, pages)
		for p := range pages {
			queue <- urls[s] + "/page/" + strconv.Itoa(p)
		}
		close(queue)
		start := time.Now()
		var site sync.WaitGroup
		for range workers {
			site.Go(func() {
				for url := range queue {
					fetch(client, url, o)
				}
			})
		}
		wg.Go(func() {
			site.Wait()
			o.took = time.Since(start)
		})
	}
	wg.Wait()
	return outcomes
}

func fetch(client *http.Client, url string, o *outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	switch {
	case errors.Is(err, polite.ErrRobotsUnreachable):
		o.offLimits.Add(1)
		return
	case err != nil:
		o.failed.Add(1)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// run starts fresh sites and crawls them through the RoundTripper that
// wrap makes of a plain transport. It prints a row per site.
func run(out io.Writer, name string, wrap func(http.RoundTripper) http.RoundTripper) {
	ss := sites()
	urls := make(map[*site]string)
	for _, s := range ss {
		srv := httptest.NewServer(s)
		defer srv.Close()
		urls[s] = srv.URL
	}
	next := &http.Transport{MaxIdleConnsPerHost: workers}
	defer next.CloseIdleConnections()
	client := &http.Client{Transport: wrap(next)}
	outcomes := crawl(client, ss, urls)
	for _, s := range ss {
		o := outcomes[s]
		fmt.Fprintf(out, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%v\t\n", name, s.name, s.rule,
			s.served.Load(), s.refused.Load(), o.offLimits.Load(), o.failed.Load(), o.took.Round(10*time.Millisecond))
	}
}

func main() {
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(out, "client\tsite\trule\tserved\trefused\toff limits\tfailed\ttook\t\n")
	run(out, "plain http.Client", func(next http.RoundTripper) http.RoundTripper { return next })
	run(out, "polite", func(next http.RoundTripper) http.RoundTripper {
		return polite.New(next,
			polite.WithCrawlDelay(true),     // read robots.txt: Crawl-delay, and stay off unreachable sites
			polite.WithSpacingJitter(0.5),   // space requests 0.5× to 1.5× the Crawl-delay
			polite.WithMaxInFlight(2),       // at most two requests at once per site
			polite.WithMaxAttempts(5),       // retry a refused page up to four times
			polite.WithGlobalRate(1000, 50), // and never more than 1000 requests a second in all
		)
	})
	out.Flush()
	fmt.Printf("\n%d pages per site, %d workers per site. served: pages the site sent; refused: requests it answered with 429;\n"+
		"off limits: requests polite did not send, robots.txt being unreachable; failed: other errors.\n", pages, workers)
}
