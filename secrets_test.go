package polite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// The secrets planted in the requests of TestNoSecretsInLogs, and in the
// robots.txt redirect of one of its servers (secretR): none may appear in
// what polite writes.
const (
	secretPass  = "S3cr3tPass"       // the URL's password
	secretQuery = "PLANTED_SECRET_Q" // the URL's query
	secretAuth  = "PLANTED_SECRET_A" // Authorization
	secretCook  = "PLANTED_SECRET_C" // Cookie
	secretProxy = "PLANTED_SECRET_P" // Proxy-Authorization
	secretFrag  = "PLANTED_SECRET_F" // the URL's fragment
	secretR     = "PLANTED_SECRET_R" // a robots.txt redirect's password and query
)

var plantedSecrets = []string{secretPass, secretQuery, secretAuth, secretCook, secretProxy, secretFrag, secretR}

// secretsNext is the RoundTripper under polite in TestNoSecretsInLogs: an
// http.Transport whose errors it wraps in a *url.Error with the request's
// URL, as a RoundTripper built on http.Client does (and worse: http.Client
// masks the password, this one keeps it), so that polite's logs meet a
// transport error that embeds the caller's URL.
type secretsNext struct{ base *http.Transport }

func (n secretsNext) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.base.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// secretsReset answers with a TCP reset and no response.
func secretsReset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST: "connection reset by peer"
	}
	_ = conn.Close()
}

// secretsRequest returns a GET of path on srv that carries every planted
// secret of the caller's: in its URL's userinfo, query and fragment, and
// in its Authorization, Cookie and Proxy-Authorization headers.
func secretsRequest(t *testing.T, srv *httptest.Server, path string) *http.Request {
	t.Helper()
	raw := "http://user:" + secretPass + "@" + srv.Listener.Addr().String() + path +
		"?api_key=" + secretQuery + "#" + secretFrag
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, raw, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secretAuth)
	req.Header.Set("Cookie", "session="+secretCook)
	req.Header.Set("Proxy-Authorization", "Basic "+secretProxy)
	return req
}

// TestNoSecretsInLogs runs polite through every path that writes text
// (retries after a 429 with Retry-After, a 503 and a connection reset;
// a throttle; a refusal over the WithMaxRetryAfter cap; a retry budget
// exhausted; a robots.txt that redirects and then fails, putting its host
// off limits; Crawl-delay waits) over real loopback, with requests that
// carry planted secrets, and greps every log line (slog at Debug, JSON),
// every event (all its fields but Request, which is the caller's own
// object, and Err, which is the error as the caller's RoundTripper returned
// it: its text is Reason, which is checked) and the text of every error
// polite returned, for each secret.
func TestNoSecretsInLogs(t *testing.T) {
	// The caller's secrets must reach the server: else the test proves nothing.
	var sawSecrets atomic.Int32
	hits := make(map[string]*atomic.Int32)
	var hitsMu sync.Mutex
	hit := func(r *http.Request) int32 {
		hitsMu.Lock()
		n := hits[r.Host+r.URL.Path]
		if n == nil {
			n = new(atomic.Int32)
			hits[r.Host+r.URL.Path] = n
		}
		hitsMu.Unlock()
		return n.Add(1)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+secretAuth && r.URL.Query().Get("api_key") == secretQuery {
			sawSecrets.Add(1)
		}
		n := hit(r)
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/robots-moved.txt", http.StatusMovedPermanently)
		case "/robots-moved.txt":
			io.WriteString(w, "User-agent: *\nCrawl-delay: 0.02\n")
		case "/503":
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ok")
		case "/reset":
			if n == 1 {
				secretsReset(w)
				return
			}
			io.WriteString(w, "ok")
		case "/reset-always":
			secretsReset(w)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	// A throttle slows its key's controller: on a server of its own, it
	// slows no other call.
	throttle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			http.NotFound(w, r) // no restriction
		case hit(r) == 1:
			w.Header().Set("Retry-After", "0.02")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer throttle.Close()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r) // no restriction
			return
		}
		w.Header().Set("Retry-After", "120") // over the cap: returned, then refused
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer refuse.Close()
	var off *httptest.Server
	off = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt": // the server's own secrets in the redirect: polite must not write them either
			http.Redirect(w, r, "http://robot:"+secretR+"@"+off.Listener.Addr().String()+
				"/robots-2.txt?sig="+secretR, http.StatusFound)
		case "/robots-2.txt":
			secretsReset(w) // unreachable: the host is off limits
		default:
			io.WriteString(w, "never asked for")
		}
	}))
	defer off.Close()

	var logs bytes.Buffer // slog's JSON handler writes each record whole, under its own lock
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var (
		mu        sync.Mutex
		events    []string
		rawURLErr int // events whose Err embeds the raw URL, secrets and all
	)
	record := func(kind string) func(polite.Event) {
		return func(e polite.Event) {
			line := fmt.Sprintf("%s key=%q attempt=%d status=%d reason=%q delay=%v retry_after=%v budget=%d server=%v wait=%v throttled=%v",
				kind, e.Key, e.Attempt, e.StatusCode, e.Reason(), e.Delay, e.RetryAfter, e.Budget, e.Server, e.Wait, e.Throttled)
			mu.Lock()
			defer mu.Unlock()
			events = append(events, line)
			var ue *url.Error
			if errors.As(e.Err, &ue) && strings.Contains(ue.URL, secretQuery) {
				rawURLErr++
			}
		}
	}
	hooks := polite.Hooks{
		OnRetry:           record("retry"),
		OnThrottled:       record("throttled"),
		OnBudgetExhausted: record("budget_exhausted"),
		OnWait:            record("wait"),
		OnRefused:         record("refused"),
		OnAttempt:         record("attempt"),
	}
	base := &http.Transport{DisableKeepAlives: true} // a reset reaches polite, not the pool's own retry
	defer base.CloseIdleConnections()
	next := ledgerNext{secretsNext{base: base}}
	common := []polite.Option{
		polite.WithLogger(logger), polite.WithHooks(hooks),
		polite.WithBackoff(time.Millisecond, 5*time.Millisecond), polite.WithMaxRetryAfter(time.Second),
	}
	tr := polite.New(next, append(common, polite.WithCrawlDelay(true))...)
	broke := polite.New(next, append(common, polite.WithRetryBudget(polite.NewRetryBudget(0)))...)

	var errs []error
	send := func(rt http.RoundTripper, to *httptest.Server, path string, wantStatus int) {
		t.Helper()
		resp, err := rt.RoundTrip(secretsRequest(t, to, path))
		if err != nil {
			errs = append(errs, err)
			assert.Zero(t, wantStatus, "%s: %v", path, err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, wantStatus, resp.StatusCode, path)
	}
	start := time.Now()
	send(tr, throttle, "/429", http.StatusOK)         // throttled, waits for Retry-After, retried
	send(tr, srv, "/503", http.StatusOK)              // retried after a backoff
	send(tr, srv, "/reset", http.StatusOK)            // a transport error that embeds the URL, retried
	send(tr, refuse, "/", http.StatusTooManyRequests) // a Retry-After over the cap: returned as is
	send(tr, refuse, "/", 0)                          // then refused: *ThrottledError
	send(tr, off, "/", 0)                             // robots.txt redirects, then fails: *RobotsError
	send(broke, srv, "/reset-always", 0)              // no budget: budgetError
	t.Logf("the run took %v", time.Since(start).Round(time.Millisecond))

	// The run went through every path that writes text.
	require.Positive(t, sawSecrets.Load(), "the server never saw the caller's secrets")
	require.Len(t, errs, 3)
	var te *polite.ThrottledError
	var re *polite.RobotsError
	assert.ErrorAs(t, errs[0], &te)
	assert.ErrorAs(t, errs[1], &re)
	assert.ErrorIs(t, errs[2], polite.ErrRetryBudgetExhausted)
	var ue *url.Error
	if assert.ErrorAs(t, errs[2], &ue, "the transport error is kept as it was") {
		assert.Contains(t, ue.URL, secretQuery, "the caller's own error is not redacted")
	}
	if assert.ErrorAs(t, errs[1], &ue) {
		assert.Contains(t, ue.URL, secretR, "the robots.txt fetch's error is kept as it was")
	}
	mu.Lock()
	assert.Positive(t, rawURLErr, "no event's Err embedded the URL: redaction untested")
	evs := strings.Join(events, "\n")
	mu.Unlock()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	for _, msg := range []string{
		"polite: retrying", "polite: server throttled", "polite: retry budget exhausted, not retrying",
		"polite: waiting", "polite: wait refused", "polite: host off limits, robots.txt unreachable",
	} {
		assert.Contains(t, logs.String(), `"msg":"`+msg+`"`)
	}
	assert.Contains(t, logs.String(), `"for":"crawl_delay"`)
	assert.Contains(t, logs.String(), "user:xxxxx@", "a redacted URL in the log")
	assert.Contains(t, logs.String(), "?REDACTED", "a redacted URL in the log")
	for _, kind := range []string{"retry", "throttled", "budget_exhausted", "wait", "refused", "attempt"} {
		assert.Contains(t, "\n"+evs, "\n"+kind+" ")
	}

	// The grep.
	texts := map[string][]string{"a log line": lines, "an event": strings.Split(evs, "\n")}
	for _, err := range errs {
		texts["a returned error"] = append(texts["a returned error"], err.Error())
	}
	for _, rt := range []*polite.Transport{tr, broke} { // the status page, as its JSON tells it
		rec := httptest.NewRecorder()
		rt.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
		assert.Contains(t, rec.Body.String(), `"reason"`, "the status page shows keys")
		texts["the status page"] = append(texts["the status page"], rec.Body.String())
	}
	for what, list := range texts {
		for _, text := range list {
			for _, s := range plantedSecrets {
				assert.NotContains(t, text, s, "%s carries a secret", what)
			}
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s\nevents:\n%s", logs.String(), evs)
	}
}

// TestEventReasonRedactsURLs checks the redaction of the URL of a
// *url.Error, wherever it sits in the error's chain.
func TestEventReasonRedactsURLs(t *testing.T) {
	reset := errors.New("connection reset by peer")
	uerr := func(raw string) error { return &url.Error{Op: "Get", URL: raw, Err: reset} }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"password and query", uerr("https://user:pw@h/p?api_key=k"),
			`Get "https://user:xxxxx@h/p?REDACTED": connection reset by peer`},
		{"http.Client's mask", uerr("https://user:***@h/p?k=v"),
			`Get "https://user:xxxxx@h/p?REDACTED": connection reset by peer`},
		{"user name alone: a token", uerr("https://ghp_token@h/p"),
			`Get "https://xxxxx@h/p": connection reset by peer`},
		{"fragment", uerr("https://h/p#access_token=t"), `Get "https://h/p": connection reset by peer`},
		{"nothing to hide", uerr("https://h:8080/p"), `Get "https://h:8080/p": connection reset by peer`},
		{"wrapped", fmt.Errorf("layer: %w", uerr("https://h/p?k=v")),
			`layer: Get "https://h/p?REDACTED": connection reset by peer`},
		{"joined", errors.Join(reset, uerr("https://h/?k=v")),
			"connection reset by peer\nGet \"https://h/?REDACTED\": connection reset by peer"},
		{"unparsable", uerr("https://h/%zz?k=v"), `Get "<redacted URL>": connection reset by peer`},
		{"no url.Error", reset, "connection reset by peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, polite.Event{Err: tt.err}.Reason())
		})
	}
}

// TestErrorsRedactURLs checks that the errors polite makes around a
// transport error redact its URL in their text and keep it in their chain.
func TestErrorsRedactURLs(t *testing.T) {
	uerr := &url.Error{Op: "Get", URL: "http://u:" + secretPass + "@h/robots.txt?sig=" + secretQuery, Err: io.EOF}
	re := &polite.RobotsError{Host: "h", Err: uerr}
	assert.Equal(t, `polite: robots.txt of h unreachable (Get "http://u:xxxxx@h/robots.txt?REDACTED": EOF), host off limits`, re.Error())
	assert.ErrorIs(t, re, io.EOF)
	var got *url.Error
	require.ErrorAs(t, re, &got)
	assert.Same(t, uerr, got)

	// A budget exhausted on a transport error: over a stub next.
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, uerr })
	tr := polite.New(next, polite.WithRetryBudget(polite.NewRetryBudget(0)))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://h/", nil)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, polite.ErrRetryBudgetExhausted)
	require.ErrorAs(t, err, &got)
	assert.Same(t, uerr, got)
	assert.Equal(t, `polite: retry budget exhausted (client-side), last attempt: Get "http://u:xxxxx@h/robots.txt?REDACTED": EOF`, err.Error())
}
