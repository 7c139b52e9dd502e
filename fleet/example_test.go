package fleet_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
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
