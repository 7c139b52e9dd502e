package fleet_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
	"github.com/redis/go-redis/v9"
)

// Two Transports (in real use, two processes) share 10 requests a second
// through Redis: together they send no faster than that. (The example
// runs an in-process Redis; in real use, pass a client of yours.)
func ExampleNew() {
	m, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	var clients []*http.Client
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer rdb.Close()
		f := fleet.New(rdb)
		defer f.Close() // it listens to the pauses of the fleet's other processes
		clients = append(clients, &http.Client{Transport: polite.New(nil,
			polite.WithRate(10, 1), // 10 a second for the whole fleet
			polite.WithFleet(f))})
	}
	start := time.Now()
	for i := range 6 {
		resp, err := clients[i%2].Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	fmt.Println("6 requests from two transports took at least 500ms:", time.Since(start) >= 500*time.Millisecond)
	// Output: 6 requests from two transports took at least 500ms: true
}

// The processes of a fleet retry from one budget, so that together they
// cannot multiply an outage with retries: with 10 tokens and a retry
// costing 5, two retries for the whole fleet. (The example runs an
// in-process Redis; in real use, pass a client of yours.)
func ExampleFleet_RetryBudget() {
	m, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	var attempts atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()

	var clients []*http.Client
	for range 2 { // in real use, one in each process
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer rdb.Close()
		f := fleet.New(rdb)
		defer f.Close()
		clients = append(clients, &http.Client{Transport: polite.New(nil,
			polite.WithBackoff(time.Millisecond, time.Millisecond),
			polite.WithRetryBudget(f.RetryBudget("api", 10)))})
	}
	for i := range 4 {
		resp, err := clients[i%2].Get(down.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	fmt.Println("4 calls, attempts:", attempts.Load())
	// Output: 4 calls, attempts: 6
}

// A status page shows what Redis holds for the keys it shows: here, a
// key that two processes sent to and one of them paused. (The example runs
// an in-process Redis; in real use, pass a client of yours.)
func ExampleFleet_Inspect() {
	m, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	var fleets []*fleet.Fleet
	for _, member := range []string{"a", "b"} { // in real use, one in each process
		f := fleet.New(rdb, fleet.WithMember(member))
		defer f.Close()
		fleets = append(fleets, f)
		if _, err := f.Reserve(context.Background(), "api.example", fleetapi.Request{PerSecond: 10, Burst: 1, MaxWait: -1}); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := fleets[0].Pause(context.Background(), "api.example", 30*time.Second, fleetapi.Request{PerSecond: 10, Burst: 1}); err != nil {
		fmt.Println(err)
		return
	}
	states, err := fleets[1].Inspect(context.Background(), []string{"api.example", "other.example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range states {
		if s.Paused.IsZero() {
			fmt.Printf("known %v, %d members, not paused\n", s.Known, s.Members)
			continue
		}
		fmt.Printf("known %v, %d members, paused for about %v\n", s.Known, s.Members, time.Until(s.Paused).Round(time.Second))
	}
	// Output:
	// known true, 2 members, paused for about 30s
	// known false, 0 members, not paused
}
