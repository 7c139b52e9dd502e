package polite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/politehttp/polite"
)

// The quick start: wrap the client's transport. Here the server is a local
// one; in real use it is the API you call.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: polite.New(nil,
		polite.WithRate(10, 5),    // at most 10 requests a second per host, in bursts of up to 5
		polite.WithMaxAttempts(3), // one try and at most two retries
	)}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body))
	// Output: 200 OK hello
}

// busyOnce answers 503 with Retry-After: 0 to the first request, then 200.
// It stands for a server in the examples below.
func busyOnce() http.RoundTripper {
	calls := 0
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			return respond(req, http.StatusServiceUnavailable, io.NopCloser(strings.NewReader("busy")), "Retry-After", "0"), nil
		}
		return respond(req, http.StatusOK, io.NopCloser(strings.NewReader("done"))), nil
	})
}

func ExampleNew() {
	tr := polite.New(busyOnce(), polite.WithBackoff(0, 0))
	req, _ := http.NewRequest(http.MethodGet, "http://api.example/items", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, "after a retry")
	// Output: 200 after a retry
}

func ExampleWithHooks() {
	tr := polite.New(busyOnce(), polite.WithBackoff(0, 0), polite.WithHooks(polite.Hooks{
		OnRetry: func(e polite.Event) {
			fmt.Printf("attempt %d to %s failed (%s); retrying in %v\n", e.Attempt, e.Key, e.Reason(), e.Delay)
		},
	}))
	req, _ := http.NewRequest(http.MethodGet, "http://api.example/items", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// attempt 1 to api.example failed (status 503); retrying in 0s
	// 200
}

// One budget shared by the transports of a process bounds their retries
// together. Against a server that is down, a budget of 5 allows one retry
// in all.
func ExampleWithRetryBudget() {
	down := func(calls *int) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			*calls++
			return respond(req, http.StatusServiceUnavailable, io.NopCloser(strings.NewReader("down"))), nil
		})
	}
	budget := polite.NewRetryBudget(5)
	var callsA, callsB int
	a := polite.New(down(&callsA), polite.WithRetryBudget(budget), polite.WithBackoff(0, 0))
	b := polite.New(down(&callsB), polite.WithRetryBudget(budget), polite.WithBackoff(0, 0))
	for _, tr := range []*polite.Transport{a, b} {
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	fmt.Println("attempts:", callsA, callsB, "budget left:", budget.Remaining())
	// Output: attempts: 2 1 budget left: 0
}

// A wait that cannot end before the deadline fails at once, and says how
// long it would have been.
func ExampleThrottledError() {
	ok := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return respond(req, http.StatusOK, io.NopCloser(strings.NewReader("ok"))), nil
	})
	tr := polite.New(ok, polite.WithRate(1, 1)) // one request a second
	req, _ := http.NewRequest(http.MethodGet, "http://api.example/", nil)
	resp, _ := tr.RoundTrip(req) // takes the only token
	resp.Body.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
	_, err := tr.RoundTrip(req)
	var te *polite.ThrottledError
	if errors.As(err, &te) {
		fmt.Printf("%s: would wait about %.0fs, only %v allowed\n", te.Key, te.Wait.Seconds(), te.Allowed.Round(100*time.Millisecond))
	}
	fmt.Println(errors.Is(err, polite.ErrThrottled))
	// Output:
	// api.example: would wait about 1s, only 100ms allowed
	// true
}

// A server that asks for a longer pause than the Transport waits on gets
// its response handed back at once.
func ExampleWithMaxRetryAfter() {
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return respond(req, http.StatusTooManyRequests, io.NopCloser(strings.NewReader("")), "Retry-After", "3600"), nil
	})
	tr := polite.New(next, polite.WithMaxRetryAfter(30*time.Second))
	req, _ := http.NewRequest(http.MethodGet, "http://api.example/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, "Retry-After:", resp.Header.Get("Retry-After"))
	// Output: 429 Retry-After: 3600
}

func ExampleRetryBudget() {
	b := polite.NewRetryBudget(polite.DefaultRetryBudgetCapacity)
	fmt.Println(b.TryTake(5), b.Remaining())
	b.Refund(100)
	fmt.Println(b.Remaining())
	// Output:
	// true 495
	// 500
}

// The controllers work outside HTTP too: feed each outcome, send at the
// rate once enabled.
func ExampleGentle() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := polite.NewGentle(start)
	// The server accepted 50 requests a second for 10 seconds, then
	// throttled one: its limit is at least 50 a second.
	for i := range 500 {
		g.Update(start.Add(time.Duration(i)*20*time.Millisecond), false)
	}
	g.Update(start.Add(10*time.Second), true)
	fmt.Printf("enabled %v, limit at least %.0f/s\n", g.Enabled(), g.Limit())
	// Gentle probes up; the server accepts 60 a second for 2 seconds, then
	// throttles again: between the two throttles it had nothing left to
	// give, so 60 a second is its limit.
	for i := range 120 {
		g.Update(start.Add(10*time.Second+time.Duration(i)*time.Second/60), false)
	}
	g.Update(start.Add(12*time.Second), true)
	fmt.Printf("limit %.0f/s, sending at %.1f/s\n", g.Limit(), g.Rate())
	// Output:
	// enabled true, limit at least 50/s
	// limit 60/s, sending at 59.4/s
}

func ExampleWithAdaptive() {
	// AWS SDKs' adaptive retry mode, number for number, instead of polite's
	// default controller.
	client := &http.Client{Transport: polite.New(nil, polite.WithAdaptive(polite.AdaptiveCubic))}
	_ = client
	fmt.Println(polite.AdaptiveCubic)
	// Output: cubic
}

func ExampleParseSignals() {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"burst";q=100;w=60`)
	h.Set("RateLimit", `"burst";r=40;t=30`)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := polite.ParseSignals(h, now)
	fmt.Printf("%s: %.0f of %.0f left, renewed in %v\n", s.Quota.Policy, s.Quota.Remaining, s.Quota.Limit, s.Quota.Reset.Sub(now))
	// Output: burst: 40 of 100 left, renewed in 30s
}

// The signals as JSON, as `polite inspect -json` prints them: snake_case
// names, durations in seconds.
func ExampleSignals_MarshalJSON() {
	h := http.Header{}
	h.Set("Retry-After", "30")
	h.Set("X-RateLimit-Limit", "60")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1767225630")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b, _ := json.Marshal(polite.ParseSignals(h, now))
	fmt.Println(string(b))
	// Output: {"retry_after":30,"has_retry_after":true,"retry_after_slack":1,"quota":{"limit":60,"remaining":0,"reset":"2026-01-01T00:00:30Z","slack":1,"window":0,"policy":"","unit":""},"has_quota":true,"bucket":"","global":false,"cached":false}
}

// Which headers of a response polite reads.
func ExampleIsSignalHeader() {
	for _, name := range []string{"x-ratelimit-remaining", "RateLimit-Policy", "Retry-After", "Content-Type"} {
		fmt.Println(name, polite.IsSignalHeader(name))
	}
	// Output:
	// x-ratelimit-remaining true
	// RateLimit-Policy true
	// Retry-After true
	// Content-Type false
}

// A crawler's Transport: each host's robots.txt read for its Crawl-delay
// (randomized 0.5× to 1.5×), at most two requests in flight per host, at
// most 100 requests a second over all hosts, and the state of hosts idle
// for 5 minutes forgotten.
func ExampleWithCrawlDelay() {
	site := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		body := "<html>a page</html>"
		if req.URL.Path == "/robots.txt" {
			body = "User-agent: *\nCrawl-delay: 2\n"
		}
		return respond(req, http.StatusOK, io.NopCloser(strings.NewReader(body))), nil
	})
	client := &http.Client{Transport: polite.New(site,
		polite.WithCrawlDelay(true),
		polite.WithSpacingJitter(0.5),
		polite.WithMaxInFlight(2),
		polite.WithGlobalRate(100, 10),
		polite.WithIdleTimeout(5*time.Minute),
	)}
	req, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	req.Header.Set("User-Agent", "ExampleBot/1.0 (+https://example.com/bot)")
	resp, err := client.Do(req) // reads robots.txt first; the next request to example.com waits 1 to 3 s
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// Under WithCrawlDelay, a host whose robots.txt is unreachable is off
// limits (RFC 9309): nothing is sent to it.
func ExampleRobotsError() {
	site := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Path == "/robots.txt" {
			return respond(req, http.StatusServiceUnavailable, http.NoBody), nil
		}
		panic("a page was requested")
	})
	tr := polite.New(site, polite.WithCrawlDelay(true))
	req, _ := http.NewRequest(http.MethodGet, "http://down.example/page", nil)
	_, err := tr.RoundTrip(req)
	var re *polite.RobotsError
	if errors.As(err, &re) {
		fmt.Println(re.Host, re.StatusCode, errors.Is(err, polite.ErrRobotsUnreachable))
	}
	fmt.Println(err)
	// Output:
	// down.example 503 true
	// polite: robots.txt of down.example unreachable (status 503), host off limits
}

// An API that states "3 requests per 200ms": WithWindow keeps every
// interval of 200ms to 3 requests, and the 4th waits for the first to
// leave the window.
func ExampleWithWindow() {
	api := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return respond(req, http.StatusOK, io.NopCloser(strings.NewReader("ok"))), nil
	})
	tr := polite.New(api, polite.WithWindow(3, 200*time.Millisecond))
	start := time.Now()
	for i := range 4 {
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/items", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		// Real time: told apart coarsely, so that a busy machine prints
		// the same.
		switch waited := time.Since(start); {
		case waited >= 200*time.Millisecond:
			fmt.Printf("request %d: after the window\n", i+1)
		case waited < 150*time.Millisecond:
			fmt.Printf("request %d: at once\n", i+1)
		default:
			fmt.Printf("request %d: %v\n", i+1, waited)
		}
	}
	// Output:
	// request 1: at once
	// request 2: at once
	// request 3: at once
	// request 4: after the window
}

// RedactURL names a request in a hook's log as polite names it in its own:
// no password, token or query string.
func ExampleRedactURL() {
	u, _ := url.Parse("https://user:s3cret@api.example/v1/items?api_key=k123#top")
	fmt.Println(polite.RedactURL(u))
	u, _ = url.Parse("https://ghp_token@api.example/repos")
	fmt.Println(polite.RedactURL(u))
	// Output:
	// https://user:xxxxx@api.example/v1/items?REDACTED
	// https://xxxxx@api.example/repos
}

// Unprocessed tells an error that proves the server processed nothing,
// after which polite sends even a POST again, from one after which it
// might have.
func ExampleUnprocessed() {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	fmt.Println(polite.Unprocessed(refused), polite.Unprocessed(reset))
	// Output: true false
}
