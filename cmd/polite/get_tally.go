package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite"
)

// getRecord is what is known of one URL's call: the attempts that
// polite's hooks count, and the time its requests spent on the wire, in
// the RoundTripper under polite (see wireTimer). The context of the URL's
// request carries it (see withGetRecord), and polite's retries and
// net/http's redirects keep that context, so that the hooks and the
// wireTimer, which see every request of the Transport, find the URL's own.
type getRecord struct {
	attempts atomic.Int64
	wire     atomic.Int64 // nanoseconds in the RoundTripper under polite
	sched    *getScheduler
	job      *getJob
	robots   bool // the URL's own path is /robots.txt
}

// newGetRecord returns the record of j's call, which sched handed out.
func newGetRecord(sched *getScheduler, j *getJob) *getRecord {
	rec := &getRecord{sched: sched, job: j}
	if u, err := url.Parse(j.url); err == nil {
		rec.robots = u.Path == getRobotsPath
	}
	return rec
}

// isRobotsFetch reports whether req, sent with the record in its context,
// is polite's fetch of a host's robots.txt rather than a request of the
// URL (see wireTimer).
func (r *getRecord) isRobotsFetch(req *http.Request) bool {
	return !r.robots && req.URL.Path == getRobotsPath
}

// sleeping tells the scheduler that the call is asleep before a retry,
// with budget tokens left in polite's retry budget.
func (r *getRecord) sleeping(budget int) {
	r.sched.sleep(r.job, budget)
}

// sending tells the scheduler that the call is sending a request.
func (r *getRecord) sending() {
	r.sched.wake(r.job)
}

// getRecordKey is the context key of a record.
type getRecordKey struct{}

// withGetRecord returns a copy of ctx that carries rec.
func withGetRecord(ctx context.Context, rec *getRecord) context.Context {
	return context.WithValue(ctx, getRecordKey{}, rec)
}

// getRecordOf returns the record that ctx carries, or nil.
func getRecordOf(ctx context.Context) *getRecord {
	rec, _ := ctx.Value(getRecordKey{}).(*getRecord)
	return rec
}

// getRobotsPath is where polite fetches a host's robots.txt under -robots.
const getRobotsPath = "/robots.txt"

// getTally counts what the URLs of a run came to, for the progress bar and
// the summary. It is safe for concurrent use.
type getTally struct {
	done      atomic.Int64 // URLs ended, with or without success
	ok        atomic.Int64 // URLs that got a 2xx response and its whole body
	canceled  atomic.Int64 // URLs in flight when the run was interrupted
	throttled atomic.Int64 // responses the servers throttled (429, 503 with Retry-After, …)
	attempts  atomic.Int64 // requests sent
	waited    atomic.Int64 // nanoseconds waited before sending, over all URLs
}

// hooks returns the polite hooks that feed the tally and each URL's
// getRecord: attempts and throttles, and the sleeps before retries, which
// give the call's place up (see getScheduler). The time waited is
// measured (see getter.fetch), not summed from OnWait's Delay: that is
// the wait as polite foresees it when the wait starts, and a wait that
// ends sooner (the key's rate rose meanwhile) is told in full, so that
// the sum can exceed the time the call took.
func (t *getTally) hooks() polite.Hooks {
	return polite.Hooks{
		OnAttempt: func(e polite.Event) {
			t.attempts.Add(1)
			if rec := getRecordOf(e.Request.Context()); rec != nil {
				rec.attempts.Add(1)
			}
		},
		OnRetry: func(e polite.Event) {
			if rec := getRecordOf(e.Request.Context()); rec != nil {
				rec.sleeping(e.Budget)
			}
		},
		OnThrottled: func(polite.Event) {
			t.throttled.Add(1)
		},
	}
}

// add counts the end of one URL, which waited waited.
func (t *getTally) add(r getResult, waited time.Duration) {
	t.done.Add(1)
	t.waited.Add(int64(waited))
	switch {
	case r.ok():
		t.ok.Add(1)
	case r.Error == errCanceled:
		t.canceled.Add(1)
	}
}

// summary returns the tally of a run of total URLs that took elapsed.
func (t *getTally) summary(total int, elapsed time.Duration) getSummary {
	done := int(t.done.Load())
	ok := int(t.ok.Load())
	canceled := int(t.canceled.Load())
	return getSummary{
		total:     total,
		done:      done,
		ok:        ok,
		canceled:  canceled,
		failed:    done - ok - canceled,
		throttled: t.throttled.Load(),
		attempts:  t.attempts.Load(),
		waited:    time.Duration(t.waited.Load()),
		elapsed:   elapsed,
	}
}

// getSummary is what a run of polite get came to.
type getSummary struct {
	total, done, ok, failed int
	canceled                int // in flight when the run was interrupted
	throttled, attempts     int64
	waited, elapsed         time.Duration
	interrupted             bool  // the run was stopped (Ctrl-C)
	fault                   error // a failure of the run itself: the JSON lines could not be written
}

// String returns the summary as one line, such as
//
//	polite: 1000 URLs in 5.2s: 1000 ok, 0 failed, 143 throttled, 1143 attempts, waited 80.1s in all
func (s getSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "polite: %s in %s: %d ok, %d failed", getPlural(s.total, "URL"), s.elapsed.Round(100*time.Millisecond), s.ok, s.failed)
	if s.canceled > 0 {
		fmt.Fprintf(&b, ", %d canceled", s.canceled)
	}
	if s.done < s.total {
		fmt.Fprintf(&b, ", %d not started", s.total-s.done)
	}
	fmt.Fprintf(&b, ", %d throttled, %s, waited %.1fs in all", s.throttled, getPlural(s.attempts, "attempt"), s.waited.Seconds())
	if s.interrupted {
		b.WriteString(" (interrupted)")
	}
	return b.String()
}

// getPlural returns n and noun, with an s unless n is 1: "1 URL", "0 URLs".
func getPlural[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// getResult is the JSON line of one URL.
type getResult struct {
	URL      string  `json:"url"`
	Status   int     `json:"status"`   // 0 when no response
	Bytes    int64   `json:"bytes"`    // body bytes received
	Attempts int64   `json:"attempts"` // requests sent
	Waited   float64 `json:"waited"`   // seconds in polite but not on the wire
	Elapsed  float64 `json:"elapsed"`  // seconds from start to the end of the body
	Error    string  `json:"error"`    // "" when none
}

// ok reports whether the URL got a 2xx response and its whole body.
func (r getResult) ok() bool {
	return r.Error == "" && r.Status >= 200 && r.Status < 300
}

// secondsOf returns d in seconds, rounded to the microsecond.
func secondsOf(d time.Duration) float64 {
	return math.Round(d.Seconds()*1e6) / 1e6
}

// errCanceled is the error of the URLs in flight when the run is
// interrupted.
const errCanceled = "canceled"
