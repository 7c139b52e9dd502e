// Package robots reads a host's robots.txt for its Crawl-delay (RFC 9309,
// and the Crawl-delay and Request-rate extensions crawlers honour), and
// keeps, for each host, what it said and the spacing of the requests to
// it (Site): the two gates of WithCrawlDelay. Fetching robots.txt is the
// edge's: the engine knows nothing of HTTP.
package robots

import (
	"bufio"
	"io"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/signals"
)

// Crawl-delay, read from robots.txt.
const (
	MaxDelay  = time.Minute    // the longest Crawl-delay honoured
	MaxSize   = 512 << 10      // bytes of robots.txt read (RFC 9309 asks for at least 500 KiB)
	Redirects = 5              // redirects followed (RFC 9309: at least five)
	TTL       = 24 * time.Hour // how long a robots.txt is trusted (RFC 9309: at most a day)
	Retry     = time.Minute    // how soon an unreachable robots.txt is asked for again
	Path      = "/robots.txt"
)

// ProductToken returns the product token of a User-Agent, lower-cased:
// "MyBot/2.1 (+https://…)" gives "mybot".
func ProductToken(ua string) string {
	ua = strings.TrimSpace(ua)
	if i := strings.IndexAny(ua, "/ "); i >= 0 {
		ua = ua[:i]
	}
	return strings.ToLower(ua)
}

// Parse reads robots.txt and returns the Crawl-delay (or the spacing
// a Request-rate implies, whichever is longer) of the group that names
// agent, or else of the group for "*". Decimal delays are accepted
// (CPython's robotparser drops them); the result is capped at
// MaxDelay. Lines that do not parse are skipped.
func Parse(r io.Reader, agent string) time.Duration {
	var (
		sc              = bufio.NewScanner(r)
		agents          []string // the user agents of the group being read
		inRules         bool     // the group's rules have begun
		mine, any       time.Duration
		named, foundAny bool // a group names agent; a group for "*" has a delay
	)
	sc.Buffer(make([]byte, 0, 4096), MaxSize)
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
			token := ProductToken(value)
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
			d, _ = signals.Seconds(min(f, MaxDelay.Seconds()))
		case "request-rate": // "1/5": one request every five seconds
			n, per, ok := strings.Cut(value, "/")
			reqs, okN := signals.ParseDecimal(strings.TrimSpace(n))
			secs, okS := signals.ParseDecimal(strings.TrimSuffix(strings.TrimSpace(per), "s"))
			if !ok || !okN || !okS || reqs == 0 {
				continue
			}
			d, _ = signals.Seconds(min(secs/reqs, MaxDelay.Seconds()))
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
