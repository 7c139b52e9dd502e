package polite_test

// The servers of the control-quality suite: in-memory copies of the
// servers of bench/, each behaving as the real one does, header for header:
// its algorithm, burst, rounding and clock, read from its source (versions
// and samples in bench/README.md). The suite's fake clock starts in 2000,
// so the servers that state Unix times or dates live serverClockAhead
// later and say so in a Date, as a server whose clock is off would.

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/time/rate"
)

// serverClockAhead is how far the servers' clock runs ahead of the
// suite's: fake time starts in 2000, when a Unix reset would read as
// seconds from now, so the servers live in 2026 and say so in their Date,
// and polite must correct for the skew.
const serverClockAhead = 26 * 365 * 24 * time.Hour

// serverTime is the time by a server's clock at the suite's now.
func serverTime(now time.Time) time.Time { return now.Add(serverClockAhead).UTC() }

// dateHeader is the Date a server sends at now.
func dateHeader(now time.Time) []string {
	return []string{"Date", serverTime(now).Format(http.TimeFormat)}
}

// unixFloor is t by the server's clock in Unix seconds, truncated, as
// Go's Time.Unix gives it.
func unixFloor(t time.Time) string { return strconv.FormatInt(serverTime(t).Unix(), 10) }

// httprateWindow is go-chi/httprate v0.16's sliding window counter: the
// count of the current window plus the previous one's weighted by how much
// of it the sliding window still covers, rounded; windows start when the
// limiter is made; refusals are not counted. It answers X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (the end of the current
// window, Unix seconds truncated), and refuses with 429 and Retry-After: 1
// (the window, in seconds).
type httprateWindow struct {
	origin      time.Time
	index       int64
	prev, count float64
}

func (s *httprateWindow) allow(now time.Time, limit float64) (bool, int, []string) {
	if s.origin.IsZero() {
		s.origin = now
	}
	index := int64(now.Sub(s.origin) / time.Second)
	switch index - s.index {
	case 0:
	case 1:
		s.prev, s.count = s.count, 0
	default:
		s.prev, s.count = 0, 0
	}
	s.index = index
	start := s.origin.Add(time.Duration(index) * time.Second)
	elapsed := now.Sub(start).Seconds()
	estimate := math.Round(s.prev*(1-elapsed) + s.count)
	h := append(dateHeader(now),
		"X-RateLimit-Limit", strconv.Itoa(int(limit)),
		"X-RateLimit-Reset", unixFloor(start.Add(time.Second)))
	if estimate+1 > limit {
		h = append(h, "X-RateLimit-Remaining", strconv.Itoa(max(int(limit-estimate), 0)), "Retry-After", "1")
		return false, http.StatusTooManyRequests, h
	}
	s.count++
	return true, 0, append(h, "X-RateLimit-Remaining", strconv.Itoa(int(limit-estimate-1)))
}

// tokenBucket is x/time/rate's token bucket as tollbooth v8 uses it: a
// rate and a burst, full at first; a refusal takes no token. tollbooth
// answers every request with X-Rate-Limit-Limit (the rate, "100.00"),
// X-Rate-Limit-Duration: 1, RateLimit-Limit, RateLimit-Remaining (the
// whole tokens left) and RateLimit-Reset: 1 (a constant), and refuses with
// a bare 429. With headers false it sends none.
type tokenBucket struct {
	burst   float64
	headers bool
	tokens  float64
	last    time.Time
}

func (b *tokenBucket) allow(now time.Time, limit float64) (bool, int, []string) {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*limit)
	}
	b.last = now
	ok := b.tokens >= 1
	if ok {
		b.tokens--
	}
	var h []string
	if b.headers {
		h = append(dateHeader(now),
			"X-Rate-Limit-Limit", strconv.FormatFloat(limit, 'f', 2, 64),
			"X-Rate-Limit-Duration", "1",
			"RateLimit-Limit", strconv.Itoa(int(math.Round(limit))),
			"RateLimit-Reset", "1",
			"RateLimit-Remaining", strconv.Itoa(int(b.tokens)))
	}
	if !ok {
		return false, http.StatusTooManyRequests, h
	}
	return true, 0, h
}

// ululeWindow is ulule/limiter v3's memory store: a fixed window of a
// second that starts at the first request after the last one expired, and
// counts every request, refused ones too. It answers X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (the window's end, Unix
// seconds truncated), and refuses with a bare 429.
type ululeWindow struct {
	expires time.Time
	count   float64
}

func (u *ululeWindow) allow(now time.Time, limit float64) (bool, int, []string) {
	if !now.Before(u.expires) {
		u.expires, u.count = now.Add(time.Second), 0
	}
	u.count++
	ok := u.count <= limit
	h := append(dateHeader(now),
		"X-RateLimit-Limit", strconv.Itoa(int(limit)),
		"X-RateLimit-Remaining", strconv.Itoa(int(math.Max(0, limit-u.count))),
		"X-RateLimit-Reset", unixFloor(u.expires))
	if !ok {
		return false, http.StatusTooManyRequests, h
	}
	return true, 0, h
}

// sethvargoTicks is sethvargo/go-limiter's memory store: a bucket whose
// tokens are set back to the limit at every tick of a second counted from
// its first request, a fixed window; a refusal takes no token. It answers
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (the next
// tick as Go's RFC 1123 date in UTC, truncated to the second), and refuses
// with 429 and a Retry-After of the same date.
type sethvargoTicks struct {
	start  time.Time
	tick   int64
	tokens float64
}

func (s *sethvargoTicks) allow(now time.Time, limit float64) (bool, int, []string) {
	if s.start.IsZero() {
		s.start, s.tick, s.tokens = now, 0, limit
	}
	if tick := int64(now.Sub(s.start) / time.Second); tick > s.tick {
		s.tick, s.tokens = tick, limit
	}
	ok := s.tokens >= 1
	if ok {
		s.tokens--
	}
	reset := serverTime(s.start.Add(time.Duration(s.tick+1) * time.Second)).Format(time.RFC1123)
	h := append(dateHeader(now),
		"X-RateLimit-Limit", strconv.Itoa(int(limit)),
		"X-RateLimit-Remaining", strconv.Itoa(int(s.tokens)),
		"X-RateLimit-Reset", reset)
	if !ok {
		return false, http.StatusTooManyRequests, append(h, "Retry-After", reset)
	}
	return true, 0, h
}

// throttledGCRA is throttled/throttled v2's GCRA with MaxBurst maxBurst: a
// tolerance of maxBurst+1 emission intervals, so maxBurst+1 requests at
// once; a refusal changes nothing. It answers X-RateLimit-Limit (maxBurst+1,
// the bucket, not the rate), X-RateLimit-Remaining and X-RateLimit-Reset
// (seconds until the bucket is full, rounded up), and refuses with 429 and
// Retry-After (seconds until a request would pass, rounded up).
type throttledGCRA struct {
	maxBurst float64
	tat      time.Time
}

func (g *throttledGCRA) allow(now time.Time, limit float64) (bool, int, []string) {
	interval := time.Duration(float64(time.Second) / limit)
	tolerance := time.Duration(g.maxBurst+1) * interval
	tat := maxTime(g.tat, now)
	newTat := tat.Add(interval)
	ceil := func(d time.Duration) string { return strconv.Itoa(int(math.Ceil(d.Seconds()))) }
	remaining := func(ttl time.Duration) string { return strconv.Itoa(max(int((tolerance-ttl)/interval), 0)) }
	h := append(dateHeader(now), "X-RateLimit-Limit", strconv.Itoa(int(g.maxBurst)+1))
	if allowAt := newTat.Add(-tolerance); now.Before(allowAt) {
		ttl := tat.Sub(now)
		h = append(h, "X-RateLimit-Remaining", remaining(ttl), "X-RateLimit-Reset", ceil(ttl), "Retry-After", ceil(allowAt.Sub(now)))
		return false, http.StatusTooManyRequests, h
	}
	g.tat = newTat
	ttl := newTat.Sub(now)
	h = append(h, "X-RateLimit-Remaining", remaining(ttl), "X-RateLimit-Reset", ceil(ttl))
	return true, 0, h
}

// nginxLimitReq is nginx's limit_req with burst and nodelay: an excess of
// requests over the rate that leaks at the rate, and a request refused
// when it would take the excess past the burst; a new key starts with no
// excess, so burst+1 go at once. It answers a bare 429 (limit_req_status
// 429), and a refusal changes nothing.
type nginxLimitReq struct {
	burst  float64
	excess float64 // requests over the rate, leaking at it
	last   time.Time
}

func (n *nginxLimitReq) allow(now time.Time, limit float64) (bool, int, []string) {
	excess := 0.0 // a new key starts with none
	if !n.last.IsZero() {
		excess = math.Max(0, n.excess-now.Sub(n.last).Seconds()*limit+1)
	}
	if excess > n.burst {
		return false, http.StatusTooManyRequests, nil
	}
	n.excess, n.last = excess, now
	return true, 0, nil
}

// nginxQueue is nginx's limit_req with burst but without nodelay, the form
// nginx's documentation leads with: a request that finds an excess within
// the burst is held for excess ÷ rate, so that the held requests leave at
// the rate; one that would take the excess past the burst is refused with
// a bare 429.
type nginxQueue struct {
	nginxLimitReq
	hold time.Duration
}

func (n *nginxQueue) allow(now time.Time, limit float64) (bool, int, []string) {
	ok, status, h := n.nginxLimitReq.allow(now, limit)
	n.hold = 0
	if ok {
		n.hold = time.Duration(n.excess / limit * float64(time.Second))
	}
	return ok, status, h
}

func (n *nginxQueue) held() time.Duration { return n.hold }

// burstOne is the limiter most Go services write for themselves:
// golang.org/x/time/rate's limiter with a burst of 1 behind a middleware
// that answers a bare 429 when Allow says no. A refusal takes no token.
type burstOne struct {
	lim *rate.Limiter
}

func (b *burstOne) allow(now time.Time, limit float64) (bool, int, []string) {
	if b.lim == nil {
		b.lim = rate.NewLimiter(rate.Limit(limit), 1)
	}
	if l := rate.Limit(limit); b.lim.Limit() != l {
		b.lim.SetLimitAt(now, l)
	}
	if !b.lim.AllowN(now, 1) {
		return false, http.StatusTooManyRequests, nil
	}
	return true, 0, nil
}

// haproxyRate is HAProxy's stick table http_req_rate(1s) with a deny above
// the limit: a frequency counter over periods of a second aligned on the
// clock, read as the current period's count plus the previous one's
// weighted by what is left of the current period. Every request is
// counted, denied ones too, so a client that keeps sending above the limit
// is refused for as long as it does. It answers a bare 429.
type haproxyRate struct {
	period      int64
	curr, prev  float64
	initialized bool
}

func (h *haproxyRate) allow(now time.Time, limit float64) (bool, int, []string) {
	p := serverTime(now).Unix()
	switch {
	case !h.initialized:
		h.period, h.initialized = p, true
	case p == h.period+1:
		h.prev, h.curr, h.period = h.curr, 0, p
	case p > h.period+1:
		h.prev, h.curr, h.period = 0, 0, p
	}
	h.curr++
	left := 1 - float64(serverTime(now).Nanosecond())/1e9
	if math.Floor(h.curr+h.prev*left) > limit {
		return false, http.StatusTooManyRequests, nil
	}
	return true, 0, nil
}

// gcraBucket is the bench's synthetic server: a token bucket of burst
// tokens (for one request at a time, the decisions of a GCRA with that
// burst), full at first, that answers 429 with Retry-After in whole
// seconds, rounded up, and at least 1.
type gcraBucket struct {
	burst  float64
	tokens float64
	last   time.Time
}

func (b *gcraBucket) allow(now time.Time, limit float64) (bool, int, []string) {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*limit)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0, nil
	}
	wait := (1 - b.tokens) / limit
	return false, http.StatusTooManyRequests, []string{"Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait))))}
}

// githubWindow is the bench's GitHub-style server: fixed windows of window
// from its start, each allowing the limit times the window, with
// X-RateLimit-Limit, -Remaining, -Used, -Reset (the window's end, Unix
// seconds rounded up) and -Resource, and a Date; a spent window refuses
// with 429 and no Retry-After.
type githubWindow struct {
	window time.Duration
	origin time.Time
	index  int64
	used   int
}

func (g *githubWindow) allow(now time.Time, perSecond float64) (bool, int, []string) {
	if g.origin.IsZero() {
		g.origin = now
	}
	quota := int(math.Round(perSecond * g.window.Seconds()))
	if index := int64(now.Sub(g.origin) / g.window); index != g.index {
		g.index, g.used = index, 0
	}
	ok := g.used < quota
	if ok {
		g.used++
	}
	end := serverTime(g.origin.Add(time.Duration(g.index+1) * g.window))
	reset := end.Unix()
	if end.Nanosecond() > 0 {
		reset++
	}
	h := append(dateHeader(now),
		"X-RateLimit-Limit", strconv.Itoa(quota),
		"X-RateLimit-Remaining", strconv.Itoa(quota-g.used),
		"X-RateLimit-Used", strconv.Itoa(g.used),
		"X-RateLimit-Reset", strconv.FormatInt(reset, 10),
		"X-RateLimit-Resource", "core")
	if !ok {
		return false, http.StatusTooManyRequests, h
	}
	return true, 0, h
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// thirds returns a schedule of hi, lo and hi times L over thirds of length.
func thirds(length time.Duration, hi, lo float64) []step {
	return []step{{0, hi * qualityLimit}, {length / 3, lo * qualityLimit}, {2 * length / 3, hi * qualityLimit}}
}

// benchScenarios are the servers of bench/, run as the bench runs them:
// 16 closed-loop workers from a cold start, L = 100 a second, 8 seconds,
// the whole run measured.
func benchScenarios(length time.Duration) []scenario {
	constant := []step{{0, qualityLimit}}
	return []scenario{
		{name: "httprate", limiter: func() limiter { return &httprateWindow{} }, schedule: constant, length: length, headers: true},
		{name: "tollbooth", limiter: func() limiter { return &tokenBucket{burst: 10, headers: true} }, schedule: constant, length: length, headers: true},
		{name: "ulule", limiter: func() limiter { return &ululeWindow{} }, schedule: constant, length: length, headers: true},
		{name: "sethvargo", limiter: func() limiter { return &sethvargoTicks{} }, schedule: constant, length: length, headers: true},
		{name: "throttled", limiter: func() limiter { return &throttledGCRA{maxBurst: 9} }, schedule: constant, length: length},
		{name: "burst1", limiter: func() limiter { return &burstOne{} }, schedule: constant, length: length},
		{name: "nginx", limiter: func() limiter { return &nginxLimitReq{burst: 10} }, schedule: constant, length: length},
		{name: "nginx-queue", limiter: func() limiter { return &nginxQueue{nginxLimitReq: nginxLimitReq{burst: 10}} }, schedule: constant, length: length},
		{name: "haproxy", limiter: func() limiter { return &haproxyRate{} }, schedule: constant, length: length},
		{name: "gcra-drop", limiter: func() limiter { return &gcraBucket{burst: 10} }, schedule: thirds(length, 2, 0.5), length: length},
		{name: "drop4x", limiter: func() limiter { return &gcraBucket{burst: 10} }, schedule: thirds(length, 1, 0.25), length: length},
		{name: "outage", limiter: func() limiter { return &gcraBucket{burst: 10} }, schedule: constant, down: [2]time.Duration{length / 3, 2 * length / 3}, length: length},
		{name: "github", limiter: func() limiter { return &githubWindow{window: 5 * time.Second} }, schedule: constant, length: length, headers: true},
	}
}
