package polite_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleetapi"
)

// What a Transport tells those who watch it: its hooks, the causes of its
// waits, its keys' status, a retry's resend count, and its judgement of
// failures.

// Several WithHooks all run, in the order of the options, and an empty one
// erases nothing; nil fields are skipped; OnNew hears of the Transport
// that New returns, before it returns.
func TestHooksCompose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		note := func(name, what string) func(polite.Event) {
			return func(e polite.Event) { got = append(got, name+" "+what+" "+e.Reason()) }
		}
		var made []*polite.Transport
		var keysAtNew int
		a := polite.Hooks{
			OnAttempt:   note("A", "attempt"),
			OnThrottled: note("A", "throttled"),
			OnRetry:     note("A", "retry"),
			OnWait:      note("A", "wait"),
			OnNew: func(tr *polite.Transport) {
				made = append(made, tr)
				for range tr.Keys() { // usable from OnNew
					keysAtNew++
				}
			},
		}
		b := polite.Hooks{ // OnThrottled and OnWait nil: skipped
			OnAttempt: note("B", "attempt"),
			OnRetry:   note("B", "retry"),
			OnNew:     func(tr *polite.Transport) { made = append(made, tr) },
		}
		next := newStub(status(429, "Retry-After", "1"), status(200))
		tr := polite.New(next, polite.WithAdaptive(polite.AdaptiveOff),
			polite.WithHooks(a), polite.WithHooks(b), polite.WithHooks(polite.Hooks{}))

		require.Len(t, made, 2, "OnNew of each WithHooks, once")
		assert.Same(t, tr, made[0])
		assert.Same(t, tr, made[1])
		assert.Zero(t, keysAtNew)

		fetch(t, tr, "http://a.test/")
		assert.Equal(t, []string{
			"A attempt status 429", "B attempt status 429",
			"A throttled status 429",
			"A retry status 429", "B retry status 429",
			"A wait ",
			"A attempt status 200", "B attempt status 200",
		}, got)
		assert.Len(t, made, 2, "OnNew is not called again")
	})
}

// attemptSeen is what OnAttempt reported of one attempt.
type attemptSeen struct {
	Attempt    int
	StatusCode int
	Err        error
}

// OnAttempt fires once per attempt answered, with its number and its
// status or transport error: the first, each retry, and the last, whether
// it succeeded or not.
func TestHooksOnAttempt(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name   string
		script []reply
		opts   []polite.Option
		want   []attemptSeen
	}{
		{
			name:   "an error, a 503, then a success",
			script: []reply{fail(refused), status(503), status(200)},
			want:   []attemptSeen{{1, 0, refused}, {2, 503, nil}, {3, 200, nil}},
		},
		{
			name:   "the first attempt succeeds",
			script: []reply{status(200)},
			want:   []attemptSeen{{1, 200, nil}},
		},
		{
			name:   "a 404 is not retried",
			script: []reply{status(404)},
			want:   []attemptSeen{{1, 404, nil}},
		},
		{
			name:   "attempts run out",
			script: []reply{status(503)},
			opts:   []polite.Option{polite.WithMaxAttempts(2)},
			want:   []attemptSeen{{1, 503, nil}, {2, 503, nil}},
		},
		{
			name:   "a transport error is the last word",
			script: []reply{fail(refused)},
			opts:   []polite.Option{polite.WithMaxAttempts(2)},
			want:   []attemptSeen{{1, 0, refused}, {2, 0, refused}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				req := mustRequest(t, t.Context(), "http://a.test/x")
				var got []attemptSeen
				hooks := polite.Hooks{OnAttempt: func(e polite.Event) {
					assert.Same(t, req, e.Request, "the caller's request")
					assert.Equal(t, "a.test", e.Key)
					assert.Zero(t, e.Wait, "not a wait")
					got = append(got, attemptSeen{e.Attempt, e.StatusCode, e.Err})
				}}
				opts := append([]polite.Option{polite.WithBackoff(0, 0), polite.WithHooks(hooks)}, tt.opts...)
				next := newStub(tt.script...)
				resp, err := polite.New(next, opts...).RoundTrip(req)
				if err == nil {
					readBody(t, resp)
				}
				assert.Equal(t, tt.want, got)
				assert.Equal(t, next.calls(), len(got), "one event per attempt sent")
			})
		})
	}
}

// waitSeen is what OnWait reported of one wait.
type waitSeen struct {
	Path   string
	Wait   polite.WaitCause
	Delay  time.Duration
	Server bool
}

// waitLog records the waits of a Transport; its calls may run at once.
type waitLog struct {
	mu   sync.Mutex
	seen []waitSeen
}

func (l *waitLog) option() polite.Option {
	return polite.WithHooks(polite.Hooks{OnWait: func(e polite.Event) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen = append(l.seen, waitSeen{e.Request.URL.Path, e.Wait, e.Delay, e.Server})
	}})
}

func (l *waitLog) waits() []waitSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// Each cause of a wait, reached as it happens: the scenario returns the
// waits it expects, in order, and OnWait must report exactly those.
func TestWaitCauses(t *testing.T) {
	off := polite.WithAdaptive(polite.AdaptiveOff) // no controller: only the cause under test paces
	tests := []struct {
		name string
		run  func(t *testing.T, hooks polite.Option) []waitSeen
	}{
		{
			name: "WithRate paces",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				tr := polite.New(newStub(status(200)), hooks, off, polite.WithRate(2, 1))
				fetch(t, tr, "http://a.test/1")
				fetch(t, tr, "http://a.test/2")
				return []waitSeen{{"/2", polite.WaitRate, 500 * time.Millisecond, false}}
			},
		},
		{
			name: "WithGlobalRate paces",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				tr := polite.New(newStub(status(200)), hooks, off, polite.WithGlobalRate(1, 1))
				fetch(t, tr, "http://a.test/1")
				fetch(t, tr, "http://b.test/2")
				return []waitSeen{{"/2", polite.WaitRate, time.Second, false}}
			},
		},
		{
			name: "WithWindow paces",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				tr := polite.New(newStub(status(200)), hooks, off, polite.WithWindow(2, time.Second))
				for _, path := range []string{"/1", "/2", "/3"} {
					fetch(t, tr, "http://a.test"+path)
				}
				return []waitSeen{{"/3", polite.WaitRate, time.Second + 50*time.Millisecond, false}} // and the guard
			},
		},
		{
			name: "a retry waits for the server's Retry-After",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				next := newStub(status(429, "Retry-After", "5"), status(200))
				fetch(t, polite.New(next, hooks, off), "http://a.test/")
				require.Equal(t, []time.Duration{5 * time.Second}, next.gaps())
				return []waitSeen{{"/", polite.WaitPause, 5 * time.Second, true}}
			},
		},
		{
			name: "a retry waits for a spent quota's reset: a quota wait, not a pause",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				next := newStub(status(429, "RateLimit", `"default";r=0;t=30`), status(200))
				fetch(t, polite.New(next, hooks, off), "http://a.test/")
				require.Equal(t, []time.Duration{30 * time.Second}, next.gaps())
				return []waitSeen{{"/", polite.WaitQuota, 30 * time.Second, true}}
			},
		},
		{
			name: "the key's other calls wait for the server's pause",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				next := newStub(status(429, "Retry-After", "5"), status(200))
				tr := polite.New(next, hooks, off, polite.WithMaxAttempts(1))
				fetch(t, tr, "http://a.test/1")
				time.Sleep(2 * time.Second)
				fetch(t, tr, "http://a.test/2")
				return []waitSeen{{"/2", polite.WaitPause, 3 * time.Second, true}}
			},
		},
		{
			name: "a retry without Retry-After backs off",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				next := newStub(status(503), status(200))
				fetch(t, polite.New(next, hooks, off, polite.WithBackoff(time.Second, time.Second), polite.WithSeed(1)), "http://a.test/")
				gaps := next.gaps()
				require.Len(t, gaps, 1)
				require.Greater(t, gaps[0], time.Duration(0))
				require.Less(t, gaps[0], time.Second, "full jitter below the limit")
				return []waitSeen{{"/", polite.WaitBackoff, gaps[0], false}}
			},
		},
		{
			name: "a Retry-After shorter than the backoff is no pause",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				next := newStub(status(503, "Retry-After", "0"), status(200))
				fetch(t, polite.New(next, hooks, off, polite.WithBackoff(time.Second, time.Second), polite.WithSeed(1)), "http://a.test/")
				gaps := next.gaps()
				require.Len(t, gaps, 1)
				require.Greater(t, gaps[0], time.Duration(0))
				return []waitSeen{{"/", polite.WaitBackoff, gaps[0], false}}
			},
		},
		{
			name: "a quota reported spent holds calls until its reset",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				next := newStub(status(200, "RateLimit", `"default";r=0;t=30`), status(200))
				tr := polite.New(next, hooks, off)
				fetch(t, tr, "http://api.test/1")
				fetch(t, tr, "http://api.test/2")
				return []waitSeen{{"/2", polite.WaitQuota, 30 * time.Second, true}}
			},
		},
		{
			name: "a quota with some left is spread over its window",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				next := newStub(status(200, "RateLimit-Policy", `"default";q=10;w=10`, "RateLimit", `"default";r=9;t=10`), status(200))
				tr := polite.New(next, hooks, off)
				for _, path := range []string{"/1", "/2", "/3"} { // the second takes the first place
					fetch(t, tr, "http://api.test"+path)
				}
				gaps := next.gaps()
				require.Len(t, gaps, 2)
				require.Greater(t, gaps[1], time.Second, "about one a second, and a margin")
				return []waitSeen{{"/3", polite.WaitQuota, gaps[1], false}}
			},
		},
		{
			name: "WithMaxInFlight: a place waited for",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				tr := polite.New(newStub(status(200)), hooks, off, polite.WithMaxInFlight(1))
				resp, err := get(t, t.Context(), tr, "http://a.test/1")
				require.NoError(t, err)
				done := make(chan struct{})
				go func() {
					defer close(done)
					fetch(t, tr, "http://a.test/2")
				}()
				time.Sleep(3 * time.Second)
				readBody(t, resp) // frees the place
				<-done
				return []waitSeen{{"/2", polite.WaitSlot, 3 * time.Second, false}}
			},
		},
		{
			name: "WithCrawlDelay spaces a host's requests",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				s := newSite()
				s.robots["slow.test"] = robotsFile("User-agent: *\nCrawl-delay: 2\n")
				tr := polite.New(s, hooks, off, polite.WithCrawlDelay(true))
				for _, err := range crawl(t, tr, "http://slow.test/a", "http://slow.test/b") {
					require.NoError(t, err)
				}
				return []waitSeen{{"/b", polite.WaitCrawlDelay, 2 * time.Second, false}}
			},
		},
		{
			name: "a call queued for a token whose wait a pause lengthens is told of the pause",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				release := make(chan struct{})
				next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					if req.URL.Path == "/a" {
						<-release
						return newStub(status(429, "Retry-After", "5")).RoundTrip(req)
					}
					return newStub(status(200)).RoundTrip(req)
				})
				tr := polite.New(next, hooks, off, polite.WithRate(2, 1), polite.WithMaxAttempts(1))
				var wg sync.WaitGroup
				wg.Go(func() { fetch(t, tr, "http://a.test/a") }) // takes the token at 0 and waits for its answer
				synctest.Wait()
				wg.Go(func() { fetch(t, tr, "http://a.test/b") }) // queued: its token comes at 0.5 s
				synctest.Wait()
				time.Sleep(100 * time.Millisecond)
				close(release) // at 0.1 s: the key is paused until 5.1 s
				wg.Wait()
				return []waitSeen{
					{"/b", polite.WaitRate, 500 * time.Millisecond, false},
					{"/b", polite.WaitPause, 4600 * time.Millisecond, true},
				}
			},
		},
		{
			name: "a call that gives up waiting for a place is told of the time it waited",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				release := make(chan struct{})
				next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					<-release
					return newStub(status(200)).RoundTrip(req)
				})
				tr := polite.New(next, hooks, off, polite.WithMaxInFlight(1))
				done := make(chan struct{})
				go func() {
					fetch(t, tr, "http://a.test/a")
					close(done)
				}()
				synctest.Wait()
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				_, err := get(t, ctx, tr, "http://a.test/b")
				require.ErrorIs(t, err, context.DeadlineExceeded)
				close(release)
				<-done
				return []waitSeen{{"/b", polite.WaitSlot, 2 * time.Second, false}}
			},
		},
		{
			name: "a fleet's booking paces",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				f := &grantFleet{grant: fleetapi.Grant{Granted: true, Wait: 2 * time.Second}}
				fetch(t, polite.New(newStub(status(200)), hooks, off, polite.WithFleet(f)), "http://a.test/")
				return []waitSeen{{"/", polite.WaitRate, 2 * time.Second, false}}
			},
		},
		{
			name: "a fleet's booking waits out a pause",
			run: func(t *testing.T, hooks polite.Option) []waitSeen {
				f := &grantFleet{grant: fleetapi.Grant{Granted: true, Wait: 2 * time.Second, Paused: 2 * time.Second}}
				fetch(t, polite.New(newStub(status(200)), hooks, off, polite.WithFleet(f)), "http://a.test/")
				return []waitSeen{{"/", polite.WaitPause, 2 * time.Second, true}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log waitLog
				want := tt.run(t, log.option())
				assert.Equal(t, want, log.waits())
			})
		})
	}
}

func TestWaitCauseString(t *testing.T) {
	tests := []struct {
		cause polite.WaitCause
		want  string
	}{
		{polite.WaitRate, "rate"},
		{polite.WaitPause, "pause"},
		{polite.WaitQuota, "quota"},
		{polite.WaitSlot, "slot"},
		{polite.WaitCrawlDelay, "crawl_delay"},
		{polite.WaitBackoff, "backoff"},
		{polite.WaitCost, "cost"},
		{0, "WaitCause(0)"},
		{polite.WaitCost + 1, "WaitCause(8)"},
		{255, "WaitCause(255)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.cause.String())
		})
	}
}

// OnRefused fires once for each call polite refuses without sending it,
// with the error the call returns.
func TestHooksOnRefused(t *testing.T) {
	isThrottled := func(wait, allowed time.Duration, server bool) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var te *polite.ThrottledError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, wait, te.Wait)
			assert.Equal(t, allowed, te.Allowed)
			assert.Equal(t, server, te.Server)
		}
	}
	tests := []struct {
		name  string
		run   func(t *testing.T, hooks polite.Option) []error // the errors of the calls refused
		delay time.Duration                                   // the event's Delay
		check func(t *testing.T, err error)
	}{
		{
			name: "robots.txt unreachable",
			run: func(t *testing.T, hooks polite.Option) []error {
				s := newSite()
				s.robots["down.test"] = func() (*http.Response, error) {
					return respond(nil, http.StatusServiceUnavailable, newBody("busy")), nil
				}
				tr := polite.New(s, hooks, polite.WithCrawlDelay(true))
				errs := crawl(t, tr, "http://down.test/a", "http://down.test/b")
				assert.Empty(t, s.pages["down.test"], "nothing sent")
				return errs
			},
			check: func(t *testing.T, err error) {
				var re *polite.RobotsError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, "down.test", re.Host)
				assert.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
				assert.ErrorIs(t, err, polite.ErrRobotsUnreachable)
			},
		},
		{
			name: "the server's pause outlasts the deadline",
			run: func(t *testing.T, hooks polite.Option) []error {
				tr := polite.New(newStub(status(503, "Retry-After", "5")), hooks, polite.WithMaxAttempts(1))
				fetch(t, tr, "http://a.test/")
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				_, err := get(t, ctx, tr, "http://a.test/")
				return []error{err}
			},
			delay: 5 * time.Second,
			check: isThrottled(5*time.Second, time.Second, true),
		},
		{
			name: "the server's pause exceeds WithMaxRetryAfter",
			run: func(t *testing.T, hooks polite.Option) []error {
				tr := polite.New(newStub(status(429, "Retry-After", "5")), hooks, polite.WithMaxRetryAfter(2*time.Second))
				fetch(t, tr, "http://a.test/") // returned as is: longer than the Transport waits
				_, err := get(t, t.Context(), tr, "http://a.test/")
				return []error{err}
			},
			delay: 5 * time.Second,
			check: isThrottled(5*time.Second, 2*time.Second, true),
		},
		{
			name: "the fleet cannot book the send",
			run: func(t *testing.T, hooks polite.Option) []error {
				f := &grantFleet{grant: fleetapi.Grant{Wait: 10 * time.Second}}
				_, err := get(t, t.Context(), polite.New(newStub(status(200)), hooks, polite.WithFleet(f)), "http://a.test/")
				return []error{err}
			},
			delay: 10 * time.Second,
			check: isThrottled(10*time.Second, 0, false),
		},
		{
			name: "the fleet cannot book the send before the deadline",
			run: func(t *testing.T, hooks polite.Option) []error {
				f := &grantFleet{grant: fleetapi.Grant{Wait: 10 * time.Second}}
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				_, err := get(t, ctx, polite.New(newStub(status(200)), hooks, polite.WithFleet(f)), "http://a.test/")
				return []error{err}
			},
			delay: 10 * time.Second,
			check: isThrottled(10*time.Second, time.Second, false),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got []polite.Event
				hooks := polite.WithHooks(polite.Hooks{OnRefused: func(e polite.Event) { got = append(got, e) }})
				errs := tt.run(t, hooks)
				require.Len(t, got, len(errs), "one event per call refused")
				for i, e := range got {
					require.Error(t, errs[i])
					assert.Same(t, errs[i], e.Err, "the error the call returns")
					assert.Equal(t, tt.delay, e.Delay)
					assert.NotNil(t, e.Request)
					tt.check(t, e.Err)
				}
			})
		})
	}
}

// grantFleet is a Fleet that answers every booking with grant.
type grantFleet struct{ grant fleetapi.Grant }

func (f *grantFleet) Reserve(context.Context, string, fleetapi.Request) (fleetapi.Grant, error) {
	return f.grant, nil
}

func (f *grantFleet) Pause(context.Context, string, time.Duration, fleetapi.Request) error {
	return nil
}

func (f *grantFleet) Throttled(context.Context, string, uint64) error { return nil }
func (f *grantFleet) Paused(string) time.Duration                     { return 0 }
func (f *grantFleet) SharesController() bool                          { return false }
func (f *grantFleet) Size() int                                       { return 1 }
func (f *grantFleet) Adjust(string, []fleetapi.Adjust)                {}

// keys returns the keys of tr, sorted.
func keys(tr *polite.Transport) []polite.KeyStatus {
	var ks []polite.KeyStatus
	for k := range tr.Keys() {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b polite.KeyStatus) int { return cmp.Compare(a.Key, b.Key) })
	return ks
}

// Keys reports each key's pace and its server's limit, as configured,
// measured or stated.
func TestKeys(t *testing.T) {
	statedQuota := []string{"RateLimit-Policy", `"default";q=100;w=10`, "RateLimit", `"default";r=50;t=5`} // 10 a second
	tests := []struct {
		name   string
		opts   []polite.Option
		script []reply
		urls   []string
		check  func(t *testing.T, ks []polite.KeyStatus)
	}{
		{
			name:   "WithRate",
			opts:   []polite.Option{polite.WithRate(10, 1)},
			script: []reply{status(200)},
			urls:   []string{"http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				assert.Equal(t, []polite.KeyStatus{{Key: "a.test", Rate: 10, State: "unthrottled", Sent: 1}}, ks)
			},
		},
		{
			name:   "every key, and only keys",
			opts:   []polite.Option{polite.WithRate(10, 1)},
			script: []reply{status(200, "X-RateLimit-Bucket", "abcd1234", "X-RateLimit-Remaining", "5", "X-RateLimit-Reset-After", "10")},
			urls:   []string{"http://b.test/", "http://a.test/", "http://c.test/", "http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				var names []string
				for _, k := range ks {
					names = append(names, k.Key)
				}
				assert.Equal(t, []string{"a.test", "b.test", "c.test"}, names, "no named bucket")
			},
		},
		{
			name:   "a throttle gives the controller's estimate",
			script: []reply{status(429), status(200)},
			urls:   []string{"http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				require.Len(t, ks, 1)
				assert.Equal(t, "a.test", ks[0].Key)
				assert.Greater(t, ks[0].Limit, 0.0, "Gentle's estimate")
				assert.Greater(t, ks[0].Rate, 0.0, "the controller paces")
			},
		},
		{
			name:   "a throttle under Cubic gives the rate it came at",
			opts:   []polite.Option{polite.WithAdaptive(polite.AdaptiveCubic), polite.WithRate(10, 1)},
			script: append(slices.Repeat([]reply{status(200)}, 30), status(429), status(200)),
			urls:   slices.Repeat([]string{"http://a.test/"}, 31),
			check: func(t *testing.T, ks []polite.KeyStatus) {
				require.Len(t, ks, 1)
				assert.Greater(t, ks[0].Limit, 5.0, "Cubic's wMax, measured")
				assert.LessOrEqual(t, ks[0].Limit, 10.0)
				assert.Greater(t, ks[0].Rate, 0.0)
				assert.Less(t, ks[0].Rate, ks[0].Limit, "cut at the throttle")
			},
		},
		{
			name:   "a stated quota",
			opts:   []polite.Option{polite.WithAdaptive(polite.AdaptiveOff)},
			script: []reply{status(200, statedQuota...)},
			urls:   []string{"http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				require.Len(t, ks, 1)
				assert.Equal(t, 10.0, ks[0].Limit)
				assert.InDelta(t, 9.8, ks[0].Rate, 1e-9, "the limit less the margin")
				assert.LessOrEqual(t, ks[0].Rate, ks[0].Limit)
			},
		},
		{
			name:   "a stated quota, X-RateLimit with a window",
			script: []reply{status(200, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "50", "X-RateLimit-Reset", "5", "X-RateLimit-Policy", "100;w=10")},
			urls:   []string{"http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				require.Len(t, ks, 1)
				assert.Equal(t, 10.0, ks[0].Limit)
				assert.InDelta(t, 9.8, ks[0].Rate, 1e-9)
			},
		},
		{
			name: "what is left of a long window, spread until its reset",
			script: []reply{
				status(200, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4990", "X-RateLimit-Reset", "1800"),
				status(200, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4989", "X-RateLimit-Reset", "1800"),
			},
			urls: []string{"http://a.test/", "http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				require.Len(t, ks, 1)
				assert.Zero(t, ks[0].Limit, "the window is not known yet")
				assert.InDelta(t, 4989.0/1799*0.98, ks[0].Rate, 1e-9, "4,989 left by the earliest the reset may come (a reset that stayed put), less the margin")
			},
		},
		{
			name: "the quota of a bucket the server names for the route",
			script: []reply{status(200, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "50",
				"X-RateLimit-Reset-After", "60", "X-RateLimit-Bucket", "abcd1234")},
			urls: []string{"http://a.test/channels/1"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				require.Len(t, ks, 1)
				assert.InDelta(t, 50.0/59*0.98, ks[0].Rate, 1e-9, "50 left by the earliest the reset may come, less the margin")
			},
		},
		{
			name:   "a stated quota under a faster WithRate",
			opts:   []polite.Option{polite.WithRate(50, 1)},
			script: []reply{status(200, statedQuota...)},
			urls:   []string{"http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				require.Len(t, ks, 1)
				assert.Equal(t, 10.0, ks[0].Limit)
				assert.InDelta(t, 9.8, ks[0].Rate, 1e-9, "the slower of the two")
			},
		},
		{
			name:   "a stated quota over a slower WithRate",
			opts:   []polite.Option{polite.WithRate(5, 1)},
			script: []reply{status(200, statedQuota...)},
			urls:   []string{"http://a.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				assert.Equal(t, []polite.KeyStatus{{Key: "a.test", Rate: 5, Limit: 10, Stated: true, State: "unthrottled", Sent: 1}}, ks)
			},
		},
		{
			name:   "no limit and a quiet server",
			opts:   []polite.Option{polite.WithAdaptive(polite.AdaptiveOff)},
			script: []reply{status(200), status(503), status(200)},
			urls:   []string{"http://a.test/", "http://b.test/"},
			check: func(t *testing.T, ks []polite.KeyStatus) {
				assert.Empty(t, ks)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := polite.New(newStub(tt.script...), tt.opts...)
				for _, u := range tt.urls {
					fetch(t, tr, u)
				}
				tt.check(t, keys(tr))
			})
		})
	}
}

// A loop over Keys may stop early; the next loop sees every key again.
func TestKeysBreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(newStub(status(200)), polite.WithRate(10, 1))
		for _, host := range []string{"a", "b", "c", "d", "e"} {
			fetch(t, tr, "http://"+host+".test/")
		}
		n := 0
		for range tr.Keys() {
			n++
			break
		}
		assert.Equal(t, 1, n)
		assert.Len(t, keys(tr), 5)
	})
}

// Keys idle for a timeout, held in their shard's older generation until
// they are forgotten, are still keys.
func TestKeysIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(newStub(status(200)), polite.WithRate(10, 1), polite.WithIdleTimeout(time.Minute))
		hosts := make([]string, 200) // more than shards: the ones used again rotate those of the others
		for i := range hosts {
			hosts[i] = "http://h" + strconv.Itoa(i) + ".test/"
			fetch(t, tr, hosts[i])
		}
		time.Sleep(90 * time.Second)
		for _, h := range hosts[:100] {
			fetch(t, tr, h)
		}
		assert.Len(t, keys(tr), len(hosts))
	})
}

// Keys may be read while calls change what they report.
func TestKeysWhileCalling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(429, "Retry-After", "1"), status(200, "RateLimit-Policy", `"default";q=100;w=10`, "RateLimit", `"default";r=50;t=5`), status(503), status(200))
		tr := polite.New(next, polite.WithRate(20, 2), polite.WithBackoff(0, 0))
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for range 5 {
					fetch(t, tr, "http://h"+strconv.Itoa(i%3)+".test/")
				}
			})
		}
		wg.Go(func() {
			for range 20 {
				for k := range tr.Keys() {
					assert.GreaterOrEqual(t, k.Rate, 0.0)
					assert.LessOrEqual(t, k.Rate, 20.0, "never above WithRate")
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		wg.Wait()
		assert.Len(t, keys(tr), 3)
	})
}

func TestObserveFleet(t *testing.T) {
	assert.Nil(t, polite.New(nil).Fleet())
	f := &grantFleet{}
	assert.Same(t, f, polite.New(nil, polite.WithFleet(f)).Fleet())
}

type otherKey struct{}

// A retry's request context says how many times the request was sent
// before, and is the caller's context otherwise.
func TestResendCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), fail(io.ErrUnexpectedEOF), status(200))
		ctx := context.WithValue(t.Context(), otherKey{}, "mine")
		resp, err := get(t, ctx, polite.New(next, polite.WithBackoff(0, 0)), "http://a.test/")
		require.NoError(t, err)
		readBody(t, resp)
		require.Len(t, next.reqs, 3)
		for i, r := range next.reqs {
			assert.Equal(t, i, polite.ResendCount(r.Context()), "attempt %d", i+1)
			assert.Equal(t, "mine", r.Context().Value(otherKey{}), "attempt %d keeps the caller's values", i+1)
		}
	})

	for _, ctx := range []context.Context{
		context.Background(),
		t.Context(),
		context.WithValue(context.Background(), otherKey{}, 3),
	} {
		assert.Zero(t, polite.ResendCount(ctx), "a context polite did not make")
	}

	// A request a layer above has sent twice: polite counts on from there.
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(200))
		var attempts []int
		tr := polite.New(next, polite.WithBackoff(0, 0), polite.WithHooks(polite.Hooks{
			OnAttempt: func(e polite.Event) { attempts = append(attempts, e.Attempt) },
		}))
		resp, err := get(t, polite.ContextWithResendCount(t.Context(), 2), tr, "http://a.test/")
		require.NoError(t, err)
		readBody(t, resp)
		require.Len(t, next.reqs, 2)
		assert.Equal(t, 2, polite.ResendCount(next.reqs[0].Context()))
		assert.Equal(t, 3, polite.ResendCount(next.reqs[1].Context()))
		assert.Equal(t, []int{3, 4}, attempts)
	})
}

// Retryable judges a failure as polite's retries do.
func TestRetryable(t *testing.T) {
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "https://a.test/", Err: err} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name   string
		status int // 0: no response
		err    error
		want   bool
	}{
		{"408", 408, nil, true},
		{"429", 429, nil, true},
		{"500", 500, nil, true},
		{"502", 502, nil, true},
		{"503", 503, nil, true},
		{"504", 504, nil, true},
		{"501", 501, nil, false},
		{"404", 404, nil, false},
		{"403", 403, nil, false},
		{"200", 200, nil, false},
		{"connection refused", 0, refused, true},
		{"connection refused, from a client", 0, urlErr(refused), true},
		{"connection reset", 0, urlErr(syscall.ECONNRESET), true},
		{"unexpected EOF", 0, io.ErrUnexpectedEOF, true},
		{"timeout", 0, timeoutError{}, true},
		{"unknown certificate authority", 0, urlErr(x509.UnknownAuthorityError{}), false},
		{"certificate not verified", 0, urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), false},
		{"TLS alert", 0, &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, false},
		{"context canceled", 0, context.Canceled, false},
		{"context canceled, from a client", 0, urlErr(context.Canceled), false},
		{"dial canceled", 0, urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}), false},
		{"an error polite does not know", 0, errors.New("boom"), false},
		{"nothing", 0, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp *http.Response
			if tt.status != 0 {
				resp = &http.Response{StatusCode: tt.status}
			}
			assert.Equal(t, tt.want, polite.Retryable(resp, tt.err))
		})
	}
}

// Event.Throttled says what polite's controller heard: a 429, a 503 with
// any Retry-After (0 too), or a 403 with its quota spent; not a bare 503.
func TestEventThrottled(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  bool
	}{
		{"429", status(429), true},
		{"503 with Retry-After: 0", status(503, "Retry-After", "0"), true},
		{"403 with its quota spent", status(403, "X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0"), true},
		{"503", status(503), false},
		{"500", status(500), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var attempt, retry []bool
				tr := polite.New(newStub(tt.reply, status(200)), polite.WithBackoff(0, 0), polite.WithHooks(polite.Hooks{
					OnAttempt: func(e polite.Event) { attempt = append(attempt, e.Throttled) },
					OnRetry:   func(e polite.Event) { retry = append(retry, e.Throttled) },
				}))
				fetch(t, tr, "http://a.test/")
				assert.Equal(t, []bool{tt.want, false}, attempt)
				assert.Equal(t, []bool{tt.want}, retry)
			})
		})
	}
}

// Idempotent judges a request by its method and idempotency headers.
func TestIdempotent(t *testing.T) {
	for _, tt := range []struct {
		method string
		header string
		want   bool
	}{
		{"", "", true}, {http.MethodGet, "", true}, {http.MethodHead, "", true}, {http.MethodOptions, "", true},
		{http.MethodTrace, "", true}, {http.MethodPut, "", true}, {http.MethodDelete, "", true},
		{http.MethodPost, "", false}, {http.MethodPatch, "", false}, {"PROPFIND", "", false},
		{http.MethodPost, "Idempotency-Key", true}, {http.MethodPatch, "X-Idempotency-Key", true},
	} {
		req := &http.Request{Method: tt.method, Header: http.Header{}}
		if tt.header != "" {
			req.Header[tt.header] = nil // present with no value: it counts, as net/http counts it
		}
		assert.Equal(t, tt.want, polite.Idempotent(req), "%q %q", tt.method, tt.header)
	}
}
