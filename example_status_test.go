package polite_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politestatus"
)

// Mount the status page on the program's debug mux, where only its
// operators reach it; open /debug/polite/ in a browser, or read it as
// JSON (polite top does).
func ExampleTransport_StatusHandler() {
	t := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"120"}},
			Body: http.NoBody, Request: req}, nil
	}), polite.WithMaxAttempts(1))
	resp, _ := (&http.Client{Transport: t}).Get("https://api.example/items")
	resp.Body.Close()

	mux := http.NewServeMux()
	mux.Handle("/debug/polite/", http.StripPrefix("/debug/polite", t.StatusHandler()))
	debug := httptest.NewServer(mux) // in a program: go http.ListenAndServe("localhost:6060", mux)
	defer debug.Close()

	resp, err := http.Get(debug.URL + "/debug/polite/?format=json")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var page politestatus.Page
	json.NewDecoder(resp.Body).Decode(&page)
	k := page.Top[0]
	fmt.Println(page.Keys, k.Key, k.State, k.PausedUntil.Sub(page.Time).Round(time.Minute))
	// Output: 1 api.example climbing 2m0s
}

// A program can read the page without HTTP: here, the line that says why
// the busiest key waits.
func ExampleTransport_Status() {
	t := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req, Header: http.Header{
			"Ratelimit-Policy": {`"default";q=600;w=60`}, "Ratelimit": {`"default";r=599;t=60`},
		}}, nil
	}))
	resp, _ := (&http.Client{Transport: t}).Get("https://api.example/items")
	resp.Body.Close()

	page := t.Status(time.Now(), 1, "")
	k := page.Top[0]
	fmt.Printf("%s: limit %.0f/s (%s)\n", k.Key, k.Limit, k.LimitSource)
	// Output: api.example: limit 10/s (stated)
}
