// Command basic shows polite against a local server that enforces a rate
// limit the way real APIs do: 429 Too Many Requests with Retry-After. It
// sends the same 200 requests from 8 workers four times: through a plain
// http.Client; through polite listening to Retry-After only; through polite
// with its defaults, which find the server's rate; and through polite told
// the server's rate. It prints what each delivered.
//
//	go run ./examples/basic
package main

import (
	"fmt"
	"io"
	"math"
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
	limit    = 50 // requests a second the server accepts
	burst    = 5
	requests = 200
	workers  = 8
)

func main() {
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "client\tdelivered\trejected\tretries\tattempts\telapsed\t\n")
	for _, c := range []struct {
		name string
		opts []polite.Option
		bare bool
	}{
		{name: "plain http.Client", bare: true},
		{name: "polite, Retry-After only", opts: []polite.Option{polite.WithAdaptive(polite.AdaptiveOff)}},
		{name: "polite, defaults", opts: nil},
		{name: "polite, WithRate(50, 5)", opts: []polite.Option{polite.WithRate(limit, burst), polite.WithAdaptive(polite.AdaptiveOff)}},
	} {
		r := run(c.bare, c.opts...)
		fmt.Fprintf(out, "%s\t%d\t%d\t%d\t%d\t%v\t\n", c.name, r.delivered, r.rejected, r.retries, r.attempts, r.elapsed.Round(10*time.Millisecond))
	}
	out.Flush()
	fmt.Printf("\nThe server accepts %d requests a second (bursts of %d) and answers the rest with 429 and Retry-After.\n", limit, burst)
}

type result struct {
	delivered, rejected, retries, attempts int64
	elapsed                                time.Duration
}

// run starts a fresh server and sends the requests through a client made
// with opts (or a plain client if bare).
func run(bare bool, opts ...polite.Option) result {
	var attempts atomic.Int64
	srv := httptest.NewServer(limited(rate.NewLimiter(limit, burst), &attempts))
	defer srv.Close()

	var retries atomic.Int64
	next := &http.Transport{MaxIdleConnsPerHost: workers}
	defer next.CloseIdleConnections()
	var rt http.RoundTripper = next
	if !bare {
		opts = append(opts, polite.WithHooks(polite.Hooks{OnRetry: func(polite.Event) { retries.Add(1) }}))
		rt = polite.New(next, opts...)
	}
	client := &http.Client{Transport: rt, Timeout: time.Minute}

	var delivered, rejected atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				resp, err := client.Get(srv.URL + "/items/" + strconv.Itoa(i))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					delivered.Add(1)
				} else {
					rejected.Add(1)
				}
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return result{delivered.Load(), rejected.Load(), retries.Load(), attempts.Load(), time.Since(start)}
}

// limited is a server that accepts requests at lim's rate and answers the
// others with 429 and the time until a request would be accepted, in
// fractional seconds.
func limited(lim *rate.Limiter, attempts *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		now := time.Now()
		if lim.AllowN(now, 1) {
			io.WriteString(w, "ok")
			return
		}
		res := lim.ReserveN(now, 1)
		wait := res.DelayFrom(now)
		res.CancelAt(now)
		secs := math.Ceil(wait.Seconds()*1000) / 1000
		w.Header().Set("Retry-After", strconv.FormatFloat(secs, 'f', -1, 64))
		http.Error(w, "too many requests", http.StatusTooManyRequests)
	})
}
