package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/politehttp/polite"
)

// transportFlags are the Transport's options as flags, shared by get and
// inspect.
type transportFlags struct {
	rate          rateFlag
	burst         int
	maxInFlight   int
	globalRate    rateFlag
	robots        bool
	retries       int
	maxRetryAfter time.Duration
	timeout       time.Duration
	userAgent     string
}

// register defines every flag on fs.
func (f *transportFlags) register(fs *flag.FlagSet) {
	f.registerPacing(fs, 5*time.Minute)
	fs.IntVar(&f.maxInFlight, "max-in-flight", 0, "requests in flight to each host at most (0: no cap)")
	fs.Var(&f.globalRate, "global-rate", "requests a second to all hosts together, as N, N/s, N/m or N/h, in bursts of -burst (default: none)")
	fs.BoolVar(&f.robots, "robots", false, "read each host's robots.txt and keep to its Crawl-delay (Allow and Disallow are not checked)")
	fs.IntVar(&f.retries, "retries", polite.DefaultMaxAttempts-1, "retries of a request after its first attempt, at most")
}

// registerPacing defines the flags that say how a host is paced and how
// long a call may take: -rate, -burst, -max-retry-after, -timeout (whose
// default is timeout) and -user-agent. The others keep their zero values:
// no cap in flight, no global rate, no robots.txt, no retries.
func (f *transportFlags) registerPacing(fs *flag.FlagSet, timeout time.Duration) {
	fs.Var(&f.rate, "rate", "requests a second to each host, as N, N/s, N/m or N/h (default: none; polite learns each host's limit from its answers)")
	fs.IntVar(&f.burst, "burst", 1, "requests to a host that -rate lets go at once (and to all hosts, under -global-rate)")
	fs.DurationVar(&f.maxRetryAfter, "max-retry-after", polite.DefaultMaxRetryAfter, "longest pause asked by a server that polite waits out; a longer one fails the request")
	fs.DurationVar(&f.timeout, "timeout", timeout, "time a URL may take, waits and retries included (0: none)")
	fs.StringVar(&f.userAgent, "user-agent", defaultUserAgent(), "User-Agent of every request")
}

// check reports flags whose values make no sense.
func (f *transportFlags) check() error {
	switch {
	case f.burst < 1:
		return fmt.Errorf("-burst must be at least 1, not %d", f.burst)
	case f.maxInFlight < 0:
		return fmt.Errorf("-max-in-flight must be 0 or more, not %d", f.maxInFlight)
	case f.retries < 0:
		return fmt.Errorf("-retries must be 0 or more, not %d", f.retries)
	case f.maxRetryAfter < 0:
		return fmt.Errorf("-max-retry-after must be 0 or more, not %v", f.maxRetryAfter)
	case f.timeout < 0:
		return fmt.Errorf("-timeout must be 0 or more, not %v", f.timeout)
	}
	return nil
}

// options returns the Transport's options the flags ask for.
func (f *transportFlags) options() []polite.Option {
	opts := []polite.Option{
		polite.WithMaxAttempts(f.retries + 1),
		polite.WithMaxRetryAfter(f.maxRetryAfter),
	}
	if f.rate > 0 {
		opts = append(opts, polite.WithRate(float64(f.rate), f.burst))
	}
	if f.globalRate > 0 {
		opts = append(opts, polite.WithGlobalRate(float64(f.globalRate), f.burst))
	}
	if f.maxInFlight > 0 {
		opts = append(opts, polite.WithMaxInFlight(f.maxInFlight))
	}
	if f.robots {
		opts = append(opts, polite.WithCrawlDelay(true))
	}
	return opts
}

// newRequest returns a GET (or method) request for rawURL with the flags'
// User-Agent. Its errors do not repeat the URL, which may carry a
// password or a key in its query: they say what is wrong with it, and the
// caller says which URL it was where that is safe.
func (f *transportFlags) newRequest(method, rawURL string) (*http.Request, error) {
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return nil, fmt.Errorf("not a URL: %w", uerr.Err)
		}
		return nil, err
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("not an http or https URL (scheme %q)", req.URL.Scheme)
	}
	req.Header.Set("User-Agent", f.userAgent)
	return req, nil
}

// defaultUserAgent names polite, its version and where to read about it,
// so that a server's operator knows who calls.
func defaultUserAgent() string {
	return "polite/" + version() + " (+https://github.com/politehttp/polite)"
}

// rateFlag is a rate in requests a second, written N, N/s, N/m or N/h.
type rateFlag float64

func (r *rateFlag) String() string {
	if r == nil || *r == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*r), 'g', -1, 64) + "/s"
}

func (r *rateFlag) Set(s string) error {
	v, err := parseRate(s)
	if err != nil {
		return err
	}
	*r = rateFlag(v)
	return nil
}

// parseRate parses a rate written N, N/s, N/m or N/h (also /sec, /min,
// /hour) into requests a second.
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("%q is not a rate: write N, N/s, N/m or N/h with N a number, 0 or more", s)
	}
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "", "s", "sec", "second":
		return n, nil
	case "m", "min", "minute":
		return n / 60, nil
	case "h", "hour":
		return n / 3600, nil
	}
	return 0, fmt.Errorf("%q is not a rate: its unit must be /s, /m or /h", s)
}
