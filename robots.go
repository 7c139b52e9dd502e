package polite

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/politehttp/polite/internal/signals"
)

// Crawl-delay, read from robots.txt under WithCrawlDelay.
const (
	robotsMaxDelay  = time.Minute    // the longest Crawl-delay honoured
	robotsMaxSize   = 512 << 10      // bytes of robots.txt read (RFC 9309 asks for at least 500 KiB)
	robotsRedirects = 5              // redirects followed (RFC 9309: at least five)
	robotsTTL       = 24 * time.Hour // how long a robots.txt is trusted (RFC 9309: at most a day)
	robotsRetry     = time.Minute    // how soon an unreachable robots.txt is asked for again
	robotsPath      = "/robots.txt"
)

// robotsEntry is what polite knows of one host's robots.txt, and the
// spacing of the requests to that host.
type robotsEntry struct {
	// mu guards the fields below.
	mu       sync.Mutex
	fetching chan struct{} // closed when the fetch under way ends; nil if none
	expires  int64         // Unix nanoseconds until which what follows holds; 0 before the first fetch
	delay    time.Duration // the host's Crawl-delay (or Request-rate), capped
	err      *RobotsError  // non-nil while robots.txt is unreachable: the host is off limits
	next     int64         // Unix nanoseconds before which no request may go to the host
}

// busy reports whether forgetting e at now, the present, would lose
// something: its robots.txt is being fetched, or the host's spacing has not
// run out. An entry locked at that moment is in use: busy.
func (e *robotsEntry) busy(now int64) bool {
	if !e.mu.TryLock() {
		return true
	}
	defer e.mu.Unlock()
	return e.fetching != nil || e.next > now
}

// robotsKey returns the key of the request's robots.txt: its scheme and
// host, as RFC 9309 scopes a robots.txt.
func (c *call) robotsKey() string {
	return c.req.URL.Scheme + "://" + c.req.URL.Host
}

// admitRobots makes sure the host's robots.txt is known, fetching it if it
// is not (one call fetches; the others wait for it), and refuses the
// request if robots.txt is unreachable: RFC 9309 then has crawlers assume
// the whole host disallowed.
func (c *call) admitRobots() error {
	now := time.Now()
	if c.site == nil { // a retry has it already
		c.site = c.t.robots.use(c.robotsKey(), now)
	}
	e := c.site
	for {
		e.mu.Lock()
		switch now := now.UnixNano(); {
		case e.expires > now:
			err := e.err
			e.mu.Unlock()
			if err != nil {
				c.t.offLimits(c.event(nil, err))
				return err
			}
			return nil
		case e.fetching != nil:
			wait := e.fetching
			e.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-c.ctx.Done():
				return context.Cause(c.ctx)
			}
		}
		done := make(chan struct{})
		e.fetching = done
		e.mu.Unlock()
		ctx := c.ctx
		if c.resends() > 0 { // robots.txt is a request of its own, sent for the first time
			ctx = ContextWithResendCount(ctx, 0)
		}
		if err := c.fetchRobotsInto(ctx, e, done); err != nil {
			return err
		}
	}
}

// fetchRobotsInto fetches robots.txt for e, which the call has marked as
// fetching with done, keeps what it says, and closes done. The fetch is a
// request to the key's server: under WithMaxInFlight it takes one of the
// key's slots, as an attempt does, waiting for it if the key has none
// free, and holds it until the fetch ends (robots.txt read, redirects
// followed). If the caller gave up, or a panic (next's, a hook's) ended
// the fetch, e is left as it was, for another call to fetch: the calls
// waiting on done never wait for a fetch that is over.
func (c *call) fetchRobotsInto(ctx context.Context, e *robotsEntry, done chan struct{}) error {
	var slot *keyState
	defer func() {
		if slot != nil {
			releaseSlot(slot)
		}
		e.mu.Lock()
		e.fetching = nil
		e.mu.Unlock()
		close(done)
	}()
	if err := c.takeSlot(&slot); err != nil {
		return err
	}
	delay, rerr, err := c.t.fetchRobots(ctx, c.req)
	if err != nil {
		return err
	}
	e.mu.Lock()
	now := time.Now()
	e.delay, e.err = delay, rerr
	e.expires = now.Add(robotsTTL).UnixNano()
	if rerr != nil {
		e.expires = now.Add(robotsRetry).UnixNano()
	}
	e.mu.Unlock()
	return nil
}

// spaceRobots waits for the host's Crawl-delay since its last request,
// randomized by WithSpacingJitter, and takes the next slot.
func (c *call) spaceRobots() error {
	e := c.site
	e.mu.Lock()
	if e.delay <= 0 {
		e.mu.Unlock()
		return nil
	}
	now := time.Now()
	slot := max(e.next, now.UnixNano())
	gap := e.delay
	if f := c.t.cfg.spacingJitter; f > 0 {
		gap = time.Duration(float64(gap) * (1 - f + 2*f*c.t.cfg.random()))
	}
	e.next = slot + int64(gap)
	e.mu.Unlock()
	wait := time.Duration(slot - now.UnixNano())
	if wait <= 0 {
		return nil
	}
	return c.waitFor(wait, now, WaitCrawlDelay, false, func() {
		e.mu.Lock()
		if e.next == slot+int64(gap) { // no one came after: the slot is free again
			e.next = slot
		}
		e.mu.Unlock()
	})
}

// fetchRobots asks the host of req for its robots.txt through next,
// following up to five redirects, and returns its Crawl-delay for the
// request's user agent. By RFC 9309, a 4xx (unavailable) means no
// restriction, and a 5xx or a network error (unreachable) means the host is
// off limits: that is rerr. 429 counts as unreachable, as it does for the
// major search engines. err is the context's cause when the caller gave up.
func (t *Transport) fetchRobots(ctx context.Context, req *http.Request) (delay time.Duration, rerr *RobotsError, err error) {
	agent := productToken(req.UserAgent())
	u := &url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host, Path: robotsPath}
	for range robotsRedirects + 1 {
		get, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return 0, &RobotsError{Host: req.URL.Host, Err: err}, nil
		}
		if ua := req.Header.Get("User-Agent"); ua != "" {
			get.Header.Set("User-Agent", ua)
		}
		resp, err := t.next.RoundTrip(get)
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil, context.Cause(ctx)
			}
			return 0, &RobotsError{Host: req.URL.Host, Err: err}, nil
		}
		code := resp.StatusCode
		switch {
		case code >= 200 && code < 300:
			delay = parseRobots(io.LimitReader(resp.Body, robotsMaxSize), agent)
			discard(resp)
			return delay, nil, nil
		case code >= 300 && code < 400 && resp.Header.Get("Location") != "":
			next, perr := u.Parse(resp.Header.Get("Location"))
			discard(resp)
			if perr != nil {
				return 0, nil, nil // a broken redirect: robots.txt unavailable
			}
			u = next
			continue
		case code == http.StatusTooManyRequests || code >= 500:
			discard(resp)
			return 0, &RobotsError{Host: req.URL.Host, StatusCode: code}, nil
		}
		discard(resp)
		return 0, nil, nil // 4xx, or anything else: unavailable, no restriction
	}
	return 0, nil, nil // too many redirects: unavailable
}

// productToken returns the product token of a User-Agent, lower-cased:
// "MyBot/2.1 (+https://…)" gives "mybot".
func productToken(ua string) string {
	ua = strings.TrimSpace(ua)
	if i := strings.IndexAny(ua, "/ "); i >= 0 {
		ua = ua[:i]
	}
	return strings.ToLower(ua)
}

// parseRobots reads robots.txt and returns the Crawl-delay (or the spacing
// a Request-rate implies, whichever is longer) of the group that names
// agent, or else of the group for "*". Decimal delays are accepted
// (CPython's robotparser drops them); the result is capped at
// robotsMaxDelay. Lines that do not parse are skipped.
func parseRobots(r io.Reader, agent string) time.Duration {
	var (
		sc              = bufio.NewScanner(r)
		agents          []string // the user agents of the group being read
		inRules         bool     // the group's rules have begun
		mine, any       time.Duration
		named, foundAny bool // a group names agent; a group for "*" has a delay
	)
	sc.Buffer(make([]byte, 0, 4096), robotsMaxSize)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, value = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(value)
		if key == "user-agent" {
			if inRules {
				agents, inRules = nil, false
			}
			token := productToken(value)
			agents = append(agents, token)
			named = named || token == agent && agent != ""
			continue
		}
		inRules = true
		var d time.Duration
		switch key {
		case "crawl-delay":
			f, ok := signals.ParseDecimal(value)
			if !ok {
				continue
			}
			d, _ = signals.Seconds(min(f, robotsMaxDelay.Seconds()))
		case "request-rate": // "1/5": one request every five seconds
			n, per, ok := strings.Cut(value, "/")
			reqs, okN := signals.ParseDecimal(strings.TrimSpace(n))
			secs, okS := signals.ParseDecimal(strings.TrimSuffix(strings.TrimSpace(per), "s"))
			if !ok || !okN || !okS || reqs == 0 {
				continue
			}
			d, _ = signals.Seconds(min(secs/reqs, robotsMaxDelay.Seconds()))
		default:
			continue
		}
		for _, a := range agents {
			switch {
			case a == agent && agent != "":
				mine = max(mine, d)
			case a == "*":
				any, foundAny = max(any, d), true
			}
		}
	}
	switch {
	case named: // the group that names the agent rules, delay or not
		return mine
	case foundAny:
		return any
	}
	return 0
}
