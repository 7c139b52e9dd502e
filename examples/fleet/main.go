// Command fleet shows polite's fleet mode: N Transports (the processes of
// a service, here goroutines of one program, each with its own Transport
// and Redis client) share one quota through Redis, against a local server
// that enforces 100 requests a second with a token bucket. It runs them
// twice: each pacing alone at WithRate(100, 10), and sharing it with
// WithFleet, and prints each Transport's rate and the total against the
// limit.
//
//	go run ./examples/fleet            # an in-process Redis (miniredis)
//	REDIS_ADDR=localhost:6379 go run ./examples/fleet
//	go run ./examples/fleet -n 8 -d 5s
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

const (
	limit = 100 // requests a second the server accepts
	burst = 10
)

func main() {
	n := flag.Int("n", 4, "transports (processes) sharing the quota")
	d := flag.Duration("d", 4*time.Second, "how long each run lasts")
	flag.Parse()

	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		// An in-process Redis that runs Lua. Its TTLs move only when told
		// to: tick it, as polite's correctness never depends on expiry.
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					m.FastForward(100 * time.Millisecond)
				case <-stop:
					return
				}
			}
		}()
		addr = m.Addr()
		fmt.Printf("Redis: in process (miniredis at %s); set REDIS_ADDR to use a real one\n\n", addr)
	} else {
		fmt.Printf("Redis: %s\n\n", addr)
	}

	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "run\ttransport\taccepted/s\trefused/s\t\n")
	for _, shared := range []bool{false, true} {
		srv := newServer()
		hs := httptest.NewServer(srv)
		name := "alone"
		if shared {
			name = "fleet"
		}
		per, elapsed := run(hs.URL, addr, *n, *d, shared)
		hs.Close()
		var ok, refused int64
		for i, c := range per {
			fmt.Fprintf(out, "%s\t#%d\t%.1f\t%.1f\t\n", name, i+1, float64(c[0])/elapsed.Seconds(), float64(c[1])/elapsed.Seconds())
			ok, refused = ok+c[0], refused+c[1]
		}
		fmt.Fprintf(out, "%s\ttotal\t%.1f\t%.1f\t\n", name, float64(ok)/elapsed.Seconds(), float64(refused)/elapsed.Seconds())
		fmt.Fprintf(out, "%s\tlimit\t%d\t\t\n", name, limit)
	}
	out.Flush()
}

// run drives n Transports for d, each with 4 workers, and returns what the
// server accepted and refused from each, and how long they took.
func run(url, addr string, n int, d time.Duration, shared bool) ([][2]int64, time.Duration) {
	ok, refused := make([]atomic.Int64, n), make([]atomic.Int64, n)
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for i := range n {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		opts := []polite.Option{polite.WithRate(limit, burst), polite.WithMaxAttempts(1)}
		if shared {
			f := fleet.New(rdb, fleet.WithSize(n))
			defer f.Close()
			opts = append(opts, polite.WithFleet(f))
		}
		client := &http.Client{Transport: polite.New(nil, opts...)}
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					resp, err := client.Get(url)
					if err != nil {
						log.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						refused[i].Add(1)
					} else {
						ok[i].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start) // the calls started before stop end after it
	counts := make([][2]int64, n)
	for i := range counts {
		counts[i] = [2]int64{ok[i].Load(), refused[i].Load()}
	}
	return counts, elapsed
}

// server is a token bucket of limit a second holding burst, full at
// first, that answers 429 with Retry-After when it is empty.
type server struct{ bucket *rate.Limiter }

func newServer() *server { return &server{bucket: rate.NewLimiter(limit, burst)} }

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.bucket.Allow() {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}
}
