package polite_test

// Integration tests over real loopback sockets, outside any synctest
// bubble. None depends on elapsed time: they use WithBackoff(0, 0) and
// Retry-After: 0, and check counts and statuses.

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// client returns a client over a fresh http.Transport wrapped by polite,
// counting the retries polite makes.
func client(t *testing.T, next *http.Transport, opts ...polite.Option) (*http.Client, *atomic.Int32) {
	t.Helper()
	var retries atomic.Int32
	opts = append([]polite.Option{polite.WithBackoff(0, 0), polite.WithHooks(polite.Hooks{
		OnRetry: func(polite.Event) { retries.Add(1) },
	})}, opts...)
	c := &http.Client{Transport: polite.New(ledgerNext{next}, opts...)}
	t.Cleanup(c.CloseIdleConnections)
	return c, &retries
}

func TestRealConnectionRefusedIsRetried(t *testing.T) {
	c, retries := client(t, &http.Transport{})
	_, err := c.Get(closedURL(t) + "/")
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Equal(t, int32(3), retries.Load())
}

func TestRealConnectionDroppedIsRetried(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // no response at all
			}
			return
		}
		io.WriteString(w, "finally")
	}))
	defer srv.Close()

	c, retries := client(t, &http.Transport{DisableKeepAlives: true})
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "finally", readBody(t, resp))
	assert.Equal(t, int32(2), retries.Load())
}

func TestRealTLSErrorIsNotRetried(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = discardLog()
	defer srv.Close()

	c, retries := client(t, &http.Transport{}) // does not trust the test certificate
	_, err := c.Get(srv.URL)
	require.Error(t, err)
	var unknown x509.UnknownAuthorityError
	assert.ErrorAs(t, err, &unknown)
	assert.Zero(t, retries.Load())
}

func TestRealSchemeErrorIsNotRetried(t *testing.T) {
	c, retries := client(t, &http.Transport{})
	_, err := c.Get("ftp://127.0.0.1/file")
	require.Error(t, err)
	assert.Zero(t, retries.Load())
}

func TestRealRetryOn503AndRetryAfter(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	c, retries := client(t, &http.Transport{})
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", readBody(t, resp))
	assert.Equal(t, int32(1), retries.Load())
}

// A drained body of up to 4 KiB lets the connection be reused; a larger
// one is not read to its end: its connection is closed instead.
func TestRealKeepAliveAfterDrain(t *testing.T) {
	for _, tt := range []struct {
		name      string
		size      int
		wantConns int32
	}{{"small bodies reuse the connection", 2 << 10, 1}, {"large bodies are not drained", 64 << 10, 4}} {
		t.Run(tt.name, func(t *testing.T) {
			var hits, conns atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) <= 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, strings.Repeat("x", tt.size))
					return
				}
				io.WriteString(w, "ok")
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()

			c, _ := client(t, &http.Transport{})
			resp, err := c.Get(srv.URL)
			require.NoError(t, err)
			assert.Equal(t, "ok", readBody(t, resp))
			assert.Equal(t, tt.wantConns, conns.Load())
		})
	}
}

// The whole stack (polite over a real http.Transport talking to a real
// http.Server) in fake time, over an in-memory listener: the Retry-After
// wait is exact.
func TestRealStackInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newPipeListener()
		var mu sync.Mutex
		var at []time.Time
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			at = append(at, time.Now())
			n := len(at)
			mu.Unlock()
			if n == 1 {
				w.Header().Set("Retry-After", "45")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, "slow down")
				return
			}
			io.WriteString(w, "ok")
		})}
		go srv.Serve(l)
		defer srv.Close()

		next := &http.Transport{DialContext: l.dial}
		defer next.CloseIdleConnections()
		c := &http.Client{Transport: polite.New(ledgerNext{next})}
		resp, err := c.Get("http://api.test/")
		require.NoError(t, err)
		assert.Equal(t, "ok", readBody(t, resp))
		require.Len(t, at, 2)
		assert.Equal(t, 45*time.Second, at[1].Sub(at[0]))
	})
}

// pipeListener is a net.Listener whose connections are in-memory pipes,
// so that a real http.Server can run inside a synctest bubble.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, errors.New("listener closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
