package polite

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/robots"
)

// fetchRobots asks the host of who's request for its robots.txt, under
// WithCrawlDelay: the engine's robots gate calls it for the first attempt
// that needs it (see robots.Site.Admit). robots.txt is a request of its
// own, sent for the first time, whatever attempt of its call needs it.
func (t *Transport) fetchRobots(who gate.Who) (delay time.Duration, offLimits, err error) {
	req, _ := who.Edge.(*http.Request)
	ctx := who.Ctx
	if ResendCount(ctx) > 0 {
		ctx = ContextWithResendCount(ctx, 0)
	}
	delay, rerr, err := t.fetchRobotsOf(ctx, req)
	if rerr != nil {
		return delay, rerr, err
	}
	return delay, nil, err
}

// fetchRobotsOf asks the host of req for its robots.txt through next,
// following up to five redirects, and returns its Crawl-delay for the
// request's user agent. By RFC 9309, a 4xx (unavailable) means no
// restriction, and a 5xx or a network error (unreachable) means the host is
// off limits: that is rerr. 429 counts as unreachable, as it does for the
// major search engines. err is the context's cause when the caller gave up.
func (t *Transport) fetchRobotsOf(ctx context.Context, req *http.Request) (delay time.Duration, rerr *RobotsError, err error) {
	agent := robots.ProductToken(req.UserAgent())
	u := &url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host, Path: robots.Path}
	for range robots.Redirects + 1 {
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
			delay = robots.Parse(io.LimitReader(resp.Body, robots.MaxSize), agent)
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
