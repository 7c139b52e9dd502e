package politeretry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politeretry"
)

// A retryablehttp.Client that paces as polite does and retries by
// polite's rules. The server here is a local one that is busy once.
func ExampleNewClient() {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "20") // busy for 20ms
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "done")
	}))
	defer srv.Close()

	client := politeretry.NewClient(polite.WithRate(10, 5)) // 10 requests a second, bursts of 5
	client.RetryWaitMin = 10 * time.Millisecond
	defer client.HTTPClient.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body), "after", requests.Load(), "requests")
	// Output: 200 OK done after 2 requests
}

// The recipe by hand, on a client of one's own: polite paces only,
// retryablehttp retries.
func ExampleCheckRetry() {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "try later")
	}))
	defer srv.Close()

	client := retryablehttp.NewClient()
	client.Logger = nil
	client.Backoff = politeretry.Backoff
	client.CheckRetry = politeretry.CheckRetry
	client.HTTPClient.Transport = polite.New(client.HTTPClient.Transport, polite.WithMaxAttempts(1))
	defer client.HTTPClient.CloseIdleConnections()

	// A POST without an Idempotency-Key is not sent twice: the 503 is
	// handed back.
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("order #1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body), "after", requests.Load(), "request")
	// Output: 503 Service Unavailable try later after 1 request
}

// A Retry-After of an hour: retryablehttp's DefaultBackoff waits for it
// whatever RetryWaitMax says; Backoff waits RetryWaitMax at most.
func ExampleBackoff() {
	resp := &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Header:     http.Header{"Retry-After": {"3600"}},
	}
	waitMin, waitMax := time.Second, 30*time.Second
	fmt.Println("retryablehttp:", retryablehttp.DefaultBackoff(waitMin, waitMax, 0, resp))
	fmt.Println("politeretry:  ", politeretry.Backoff(waitMin, waitMax, 0, resp))

	resp.Header.Set("Retry-After", "10000000000")
	fmt.Println("retryablehttp:", retryablehttp.DefaultBackoff(waitMin, waitMax, 0, resp))
	fmt.Println("politeretry:  ", politeretry.Backoff(waitMin, waitMax, 0, resp))
	// Output:
	// retryablehttp: 1h0m0s
	// politeretry:   30s
	// retryablehttp: -2346317h47m53.709551616s
	// politeretry:   30s
}
