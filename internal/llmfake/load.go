package llmfake

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Billed sets a's Admitted hook to sum what the requests it admits from
// from until to are billed (their input and output tokens), and returns
// a function that tells those sums once the API is done.
func Billed(a *API, from, to time.Time) func() (input, output float64) {
	var mu sync.Mutex
	var in, out float64
	a.Admitted = func(at time.Time, input, output int) {
		if !at.Before(from) && at.Before(to) {
			mu.Lock()
			in += float64(input)
			out += float64(output)
			mu.Unlock()
		}
	}
	return func() (float64, float64) {
		mu.Lock()
		defer mu.Unlock()
		return in, out
	}
}

// A Load is what the closed-loop callers of RunLoad got.
type Load struct {
	Done      int64   // calls answered 200 from skip to the run's end
	Billed    float64 // what those were billed (Draw.Bill)
	Estimated float64 // what those were charged at admission (Draw.Estimate)
	BigDone   int64   // of those, big requests
	BigSent   int64   // big requests drawn from skip on
	Failed    int64   // calls that ended in an error: the worker stopped
	Err       error   // the first of those errors
}

// RunLoad runs workers closed-loop callers of rt for length (of the
// bubble's time, under testing/synctest): each draws its next request
// from mix, POSTs body(draw) to url with a deadline of two minutes, and
// reads the answer to its end, as a caller does, so that its cost is
// settled. A caller whose call fails stops. The answers are counted from
// skip on.
func RunLoad(rt http.RoundTripper, url string, mix *Mix, body func(Draw) string, workers int, skip, length time.Duration) *Load {
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(length))
	defer cancel()
	var load Load
	var mu sync.Mutex // guards mix and load
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				d := mix.Next()
				mu.Unlock()
				err := call(rt, url, body(d), func(status int) {
					at := time.Since(start)
					mu.Lock()
					defer mu.Unlock()
					if d.Big && at >= skip {
						load.BigSent++
					}
					if status == http.StatusOK && at >= skip && at <= length {
						load.Done++
						load.Billed += float64(d.Bill())
						load.Estimated += float64(d.Estimate())
						if d.Big {
							load.BigDone++
						}
					}
				})
				if err != nil {
					mu.Lock()
					load.Failed++
					if load.Err == nil {
						load.Err = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return &load
}

// call POSTs body to url through rt, reads the answer to its end and
// tells its status to done.
func call(rt http.RoundTripper, url, body string, done func(status int)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	done(resp.StatusCode)
	return nil
}
