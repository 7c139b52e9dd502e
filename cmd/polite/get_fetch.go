package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// fetch fetches rawURL, whose call rec records, and returns its line and
// the time it waited: the request goes through the getter's client,
// bounded by -timeout (waits and retries included), and the body of a 2xx
// response goes to the getter's sink. runCtx is the run's context: once it
// is done, a URL that fails says "canceled". The time waited is the time
// the call spent in polite but not on the wire: waiting for its turn, a
// pause the server asked for, a retry's backoff, a place under
// -max-in-flight, its host's robots.txt under -robots.
func (g *getter) fetch(runCtx context.Context, rawURL string, rec *getRecord) (getResult, time.Duration) {
	start := time.Now()
	res := getResult{URL: rawURL}
	inCall, err := g.call(runCtx, rawURL, rec, &res)
	waited := max(0, inCall-time.Duration(rec.wire.Load()))
	res.Attempts = rec.attempts.Load()
	res.Waited = secondsOf(waited)
	res.Elapsed = secondsOf(time.Since(start))
	switch {
	case err == nil:
	case runCtx.Err() != nil:
		res.Error = errCanceled
	default:
		res.Error = err.Error()
	}
	return res, waited
}

// call does the work of fetch, setting res's status and bytes. It
// returns the time the request took to get its response (with polite's
// waits and retries and net/http's redirects) and why the URL has no
// response or no whole body.
func (g *getter) call(runCtx context.Context, rawURL string, rec *getRecord, res *getResult) (time.Duration, error) {
	req, err := g.flags.transport.newRequest(http.MethodGet, rawURL)
	if err != nil {
		return 0, err
	}
	ctx := withGetRecord(runCtx, rec)
	if g.flags.transport.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.flags.transport.timeout)
		defer cancel()
	}
	start := time.Now()
	resp, err := g.client.Do(req.WithContext(ctx))
	inCall := time.Since(start)
	if err != nil {
		return inCall, g.describe(ctx, err)
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	body := &bodyCounter{r: resp.Body}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		err = g.out.save(rawURL, body)
	} else {
		_, err = io.Copy(io.Discard, body)
	}
	res.Bytes = body.n
	if body.err != nil {
		return inCall, fmt.Errorf("reading the body: %w", g.describe(ctx, body.err))
	}
	return inCall, err
}

// wireTimer is the RoundTripper under polite: it adds the time each
// request spends in next, the network's RoundTripper, to the getRecord
// its context carries, and tells the scheduler that the call is sending.
//
// Under -robots, polite fetches a host's robots.txt with the context of
// the first call to the host, so that its record comes with it. That fetch
// is a wait before the URL's request, as it is for the calls to the host
// that wait for it, not the URL's time on the wire: a request for
// /robots.txt is not timed, unless the URL's own path is /robots.txt. (So
// a URL that redirects to /robots.txt has that hop counted as waited, and
// a robots.txt that redirects to another path has that hop counted as wire
// time: rare both, and a hop's time at most.)
type wireTimer struct {
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (w wireTimer) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := getRecordOf(req.Context())
	if rec != nil {
		rec.sending()
	}
	start := time.Now()
	resp, err := w.next.RoundTrip(req)
	if rec != nil && !rec.isRobotsFetch(req) {
		rec.wire.Add(int64(time.Since(start)))
	}
	return resp, err
}

// CloseIdleConnections closes next's idle connections.
func (w wireTimer) CloseIdleConnections() {
	if c, ok := w.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// describe returns err, the error of a call whose context is ctx, in
// words for its JSON line: without the method and URL that net/http's
// *url.Error repeats, and saying so when -timeout ended the call.
func (g *getter) describe(ctx context.Context, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded) {
		return &timeoutError{after: g.flags.transport.timeout, err: err}
	}
	return err
}

// timeoutError is the error of a call that -timeout ended. It reads
// "timed out after 5m0s (-timeout)", and unwraps to its cause, so that
// errors.Is(err, context.DeadlineExceeded) holds.
type timeoutError struct {
	after time.Duration // the -timeout
	err   error         // the call's error, which is context.DeadlineExceeded
}

// Error implements error.
func (e *timeoutError) Error() string {
	return fmt.Sprintf("timed out after %v (-timeout)", e.after)
}

// Unwrap returns the call's error.
func (e *timeoutError) Unwrap() error {
	return e.err
}

// bodyCounter counts the bytes read from r and keeps its first error
// other than io.EOF, so that a copy's read errors (the body broke) are
// told apart from its write errors (the disk is full).
type bodyCounter struct {
	r   io.Reader
	n   int64
	err error
}

// Read implements io.Reader.
func (c *bodyCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}
