package polite

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/politehttp/polite/internal/robots"
)

// WithCrawlDelay makes the Transport read each host's robots.txt (again
// after a day, or after the host has been idle past [WithIdleTimeout] and
// forgotten) and space its requests to the host by the Crawl-delay there (or by
// its Request-rate): the delay of the group that names the request's
// user agent (its User-Agent's product token), or else of the group for
// "*". Decimal delays are honoured; delays over a minute count as a
// minute. robots.txt is fetched through the wrapped RoundTripper by the
// first request to the host, following up to five redirects; the requests
// that come meanwhile wait for it. Each fetch is a request to the host
// like any other: under [WithMaxInFlight] it takes a place of the key of
// the call that fetches it, the first fetch as those after it, waiting
// for one while the key's places are held. By RFC 9309, a robots.txt
// answered with a 4xx means no restriction, and one unreachable (a 5xx, a
// 429 or a network error) puts the whole host off limits: requests to it
// fail with a [*RobotsError] until robots.txt is asked for again, a minute
// later.
// polite does not enforce Allow and Disallow rules; crawlers still check
// them.
//
// Default: false.
func WithCrawlDelay(enabled bool) Option {
	return func(c *config) { c.crawlDelay = enabled }
}

// WithSpacingJitter randomizes the spacing of requests to a host that
// [WithCrawlDelay] imposes: each gap is the Crawl-delay times a factor
// drawn uniformly from [1−f, 1+f], so f = 0.5 gives 0.5× to 1.5× (as
// Scrapy's and wget's random waits do), and the average stays the delay.
//
// Default: 0, no jitter. f is clamped to [0, 1].
func WithSpacingJitter(f float64) Option {
	return func(c *config) {
		if !(f > 0) {
			f = 0
		}
		c.spacingJitter = min(f, 1)
	}
}

// fetchRobots asks the host of req for its robots.txt through next,
// following up to five redirects, and returns its Crawl-delay for the
// request's user agent. By RFC 9309, a 4xx (unavailable) means no
// restriction, and a 5xx or a network error (unreachable) means the host is
// off limits: that is rerr. 429 counts as unreachable, as it does for the
// major search engines. err is the context's cause when the caller gave up.
func fetchRobots(ctx context.Context, next http.RoundTripper, req *http.Request) (delay time.Duration, rerr *RobotsError, err error) {
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
		resp, err := next.RoundTrip(get)
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
