package polite_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain runs the tests, then fails the run if a body the tests' servers
// handed out was never closed (by polite, when it discarded a response, or
// by the test, which owns a response polite returned), or if a goroutine
// outlived the tests. Both are checked only when the tests passed: a
// failed test may stop before it closes what it holds.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if open := openBodies.unclosed(); len(open) > 0 {
			fmt.Fprintf(os.Stderr, "%d bodies were never closed:\n\t%s\n", len(open), strings.Join(open, "\n\t"))
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left by the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// scaledDown reports that the longest fake-time suites run scaled down:
// under the race detector, which slows them several times over, and in
// short mode (go test -short, the quick tier). CI runs them again in full,
// without the race detector.
func scaledDown() bool { return raceDetector || testing.Short() }

// openBodies is the ledger of the bodies the tests' servers handed out and
// nobody closed yet: every trackedBody is in it from its making to its
// first Close, with where it was made.
var openBodies = &bodyLedger{open: make(map[*trackedBody]string)}

// bodyLedger records the bodies not yet closed.
type bodyLedger struct {
	mu   sync.Mutex
	open map[*trackedBody]string
}

// add records b as open, made by the test code that called the helper.
func (l *bodyLedger) add(b *trackedBody) {
	where := "unknown"
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.File, "_test.go") && !strings.HasSuffix(f.File, "helpers_test.go") {
			where = fmt.Sprintf("%s:%d (%s)", filepath.Base(f.File), f.Line, f.Function)
			break
		}
		if !more {
			break
		}
	}
	l.mu.Lock()
	l.open[b] = where
	l.mu.Unlock()
}

// closed records that b was closed.
func (l *bodyLedger) closed(b *trackedBody) {
	l.mu.Lock()
	delete(l.open, b)
	l.mu.Unlock()
}

// unclosed lists where each body still open was made, the same places
// counted once.
func (l *bodyLedger) unclosed() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	count := make(map[string]int)
	for _, where := range l.open {
		count[where]++
	}
	var out []string
	for where, n := range count {
		out = append(out, fmt.Sprintf("%d made at %s", n, where))
	}
	slices.Sort(out)
	return out
}

// roundTripFunc turns a function into an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// trackedBody is a response or request body that records how much of it
// was read and whether it was closed. Made by newBody or trackBody, it is
// in the ledger of open bodies until its first Close.
type trackedBody struct {
	r      io.Reader
	read   atomic.Int64
	closed atomic.Bool
}

// newBody returns a tracked body that reads s.
func newBody(s string) *trackedBody { return trackBody(strings.NewReader(s)) }

// trackBody returns a tracked body that reads r.
func trackBody(r io.Reader) *trackedBody {
	b := &trackedBody{r: r}
	openBodies.add(b)
	return b
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	if !b.closed.Swap(true) {
		openBodies.closed(b)
	}
	return nil
}

// closingBody is a tracked body that also closes the body it reads.
type closingBody struct {
	*trackedBody
	inner io.Closer
}

func (b *closingBody) Close() error {
	_ = b.trackedBody.Close()
	return b.inner.Close()
}

// trackClose returns body wrapped so that the ledger sees whether it is
// closed; closing it closes body.
func trackClose(body io.ReadCloser) *closingBody {
	return &closingBody{trackedBody: trackBody(body), inner: body}
}

// ledgerNext sits under polite over a real transport: every response body
// it hands up is in the ledger of open bodies until it is closed.
type ledgerNext struct {
	next http.RoundTripper
}

func (l ledgerNext) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		resp.Body = trackClose(resp.Body)
	}
	return resp, err
}

// CloseIdleConnections closes next's idle connections.
func (l ledgerNext) CloseIdleConnections() {
	if c, ok := l.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// closedURL returns the URL (http://host:port, no path) of a loopback
// port where nothing listens: a connection to it is refused.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	return u
}

// reply is one scripted answer of a stub: a response with the given status
// and header pairs, or a transport error.
type reply struct {
	status int
	header []string // name, value, name, value, …
	body   string
	err    error
}

func status(code int, header ...string) reply { return reply{status: code, header: header} }
func fail(err error) reply                    { return reply{err: err} }

// stub is an in-memory server used as next. It answers with script[i] for
// the i-th request (the last entry repeats), reads and closes each request
// body as a real transport does, and records what it saw.
type stub struct {
	script []reply

	mu       sync.Mutex
	times    []time.Time // when each request arrived
	reqs     []*http.Request
	reqBody  []string       // each request's body as received
	respBody []*trackedBody // each response body handed out
}

func newStub(script ...reply) *stub { return &stub{script: script} }

func (s *stub) RoundTrip(req *http.Request) (*http.Response, error) {
	var body string
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		_ = req.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	n := len(s.times)
	s.times = append(s.times, time.Now())
	s.reqs = append(s.reqs, req)
	s.reqBody = append(s.reqBody, body)
	r := s.script[min(n, len(s.script)-1)]
	if r.err != nil {
		s.mu.Unlock()
		return nil, r.err
	}
	text := r.body
	if text == "" {
		text = "response " + strconv.Itoa(n)
	}
	tb := newBody(text)
	s.respBody = append(s.respBody, tb)
	s.mu.Unlock()
	return respond(req, r.status, tb, r.header...), nil
}

// respond returns a response to req with code, body and the header pairs.
// A body that is not a trackedBody (http.NoBody among them) is wrapped in
// one, so that the ledger sees whether it is closed: polite must close
// every response it discards, and a test every response it is given.
func respond(req *http.Request, code int, body io.ReadCloser, header ...string) *http.Response {
	if _, ok := body.(*trackedBody); !ok {
		body = trackClose(body)
	}
	h := make(http.Header)
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return &http.Response{
		StatusCode: code,
		Status:     strconv.Itoa(code) + " " + http.StatusText(code),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  h,
		Body:    body,
		Request: req,
	}
}

func (s *stub) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

// gaps returns the time between consecutive requests.
func (s *stub) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(s.times); i++ {
		g = append(g, s.times[i].Sub(s.times[i-1]))
	}
	return g
}

// checkDiscarded asserts that every discarded response body was drained at
// most 4 KiB and closed. When returned is true, the last body is the
// caller's and must be neither read nor closed; otherwise all were
// discarded.
func (s *stub) checkDiscarded(t *testing.T, returned bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.respBody {
		if returned && i == len(s.respBody)-1 {
			assert.False(t, b.closed.Load(), "the returned body %d was closed", i)
			assert.Zero(t, b.read.Load(), "the returned body %d was read", i)
			continue
		}
		assert.True(t, b.closed.Load(), "discarded body %d was not closed", i)
		assert.LessOrEqual(t, b.read.Load(), int64(4<<10), "discarded body %d was drained past 4 KiB", i)
	}
}

// get sends a GET to url through rt with ctx, checking the RoundTripper
// contract: a response or an error, never both.
func get(t *testing.T, ctx context.Context, rt http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	return roundTrip(t, rt, req)
}

func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if (resp == nil) == (err == nil) {
		t.Fatalf("RoundTrip returned response %v and error %v: want exactly one", resp, err)
	}
	return resp, err
}

// fetch sends a GET to url through rt, requires a response, and reads and
// closes its body.
func fetch(t *testing.T, rt http.RoundTripper, url string) *http.Response {
	t.Helper()
	resp, err := get(t, t.Context(), rt, url)
	require.NoError(t, err)
	readBody(t, resp)
	return resp
}

// readBody reads and closes a response body.
func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

// replayableRequest returns a request whose body can be rebuilt with GetBody,
// as http.NewRequest makes for a *bytes.Reader.
func replayableRequest(t *testing.T, ctx context.Context, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	require.NotNil(t, req.GetBody)
	return req
}

// timeoutError is a net.Error that reports a timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// discardLog returns a logger for http.Server that drops what it is told.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
