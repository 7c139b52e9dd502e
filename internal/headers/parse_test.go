package headers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/politehttp/polite/internal/signals"
)

// vectorNow is the now of the header-format reference
// (shared/research/beyond-go.md §11): 2026-01-01T00:00:00Z.
var vectorNow = time.Unix(1767225600, 0).UTC()

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func in(d time.Duration) time.Time { return vectorNow.Add(d) }

// The test vectors of §11, one row each where it concerns headers.
func TestParseSignalsVectors(t *testing.T) {
	tests := []struct {
		row  int
		name string
		give http.Header
		want signals.Signals
	}{
		{1, "delay-seconds", headers("Retry-After", "120"),
			signals.Signals{RetryAfter: 120 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{2, "IMF-fixdate", headers("Retry-After", "Thu, 01 Jan 2026 00:00:30 GMT"),
			signals.Signals{RetryAfter: 30 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{3, "RFC 850", headers("Retry-After", "Thursday, 01-Jan-26 00:00:30 GMT"),
			signals.Signals{RetryAfter: 30 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{4, "asctime", headers("Retry-After", "Thu Jan  1 00:00:30 2026"),
			signals.Signals{RetryAfter: 30 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{5, "past date", headers("Retry-After", "Wed, 31 Dec 2025 23:59:00 GMT"),
			signals.Signals{RetryAfter: 0, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{6, "float", headers("Retry-After", "2.0"),
			signals.Signals{RetryAfter: 2 * time.Second, HasRetryAfter: true}},
		{7, "garbage", headers("Retry-After", "soon"), signals.Signals{}},
		{7, "negative", headers("Retry-After", "-5"), signals.Signals{}},
		{7, "exponent", headers("Retry-After", "1e100"), signals.Signals{}},
		{8, "ms wins", headers("retry-after-ms", "1500", "retry-after", "2"),
			signals.Signals{RetryAfter: 1500 * time.Millisecond, HasRetryAfter: true}},
		{9, "Azure ms", headers("x-ms-retry-after-ms", "250"),
			signals.Signals{RetryAfter: 250 * time.Millisecond, HasRetryAfter: true}},
		{10, "AWS ms", headers("x-amz-retry-after", "1200"),
			signals.Signals{RetryAfter: 1200 * time.Millisecond, HasRetryAfter: true}},
		{11, "IETF draft-10, Cloudflare",
			headers("RateLimit", `"default";r=50;t=30`, "RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`),
			signals.Signals{Quota: signals.Quota{Remaining: 50, Reset: in(30 * time.Second), Slack: time.Second, Policy: "default"}, HasQuota: true}},
		{11, "IETF draft-10, linked policy",
			headers("RateLimit", `"burst";r=50;t=30`, "RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`),
			signals.Signals{Quota: signals.Quota{Limit: 100, Window: time.Minute, Remaining: 50, Reset: in(30 * time.Second), Slack: time.Second, Policy: "burst"}, HasQuota: true}},
		{12, "IETF pk and qu",
			headers("RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`,
				"RateLimit", `"peruser";r=300;pk=:sdfjLJUOUH==:`),
			signals.Signals{Quota: signals.Quota{Limit: 65535, Window: 10 * time.Second, Remaining: 300, Policy: "peruser", Unit: "content-bytes"},
				HasQuota: true, Bucket: ":sdfjLJUOUH==:",
				Quotas: []signals.Quota{{Limit: 65535, Window: 10 * time.Second, Remaining: 300, Policy: "peruser", Unit: "content-bytes"}}}},
		{13, "Retry-After wins over t", headers("Retry-After", "20", "RateLimit", `"default";r=0;t=10`),
			signals.Signals{RetryAfter: 20 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second,
				Quota: signals.Quota{Remaining: 0, Reset: in(10 * time.Second), Slack: time.Second, Policy: "default"}, HasQuota: true}},
		{14, "IETF draft-07 dictionary", headers("RateLimit", "limit=100, remaining=50, reset=5", "RateLimit-Policy", "100;w=10"),
			signals.Signals{Quota: signals.Quota{Limit: 100, Remaining: 50, Reset: in(5 * time.Second), Slack: time.Second, Window: 10 * time.Second}, HasQuota: true}},
		{15, "IETF draft-06", headers("RateLimit-Limit", "100", "RateLimit-Remaining", "0", "RateLimit-Reset", "7"),
			signals.Signals{Quota: signals.Quota{Limit: 100, Remaining: 0, Reset: in(7 * time.Second), Slack: time.Second}, HasQuota: true}},
		{16, "GitLab epoch in RateLimit-Reset",
			headers("RateLimit-Reset", "1767225660", "RateLimit-Remaining", "10", "RateLimit-Limit", "600"),
			signals.Signals{Quota: signals.Quota{Limit: 600, Remaining: 10, Reset: in(time.Minute), Slack: time.Second}, HasQuota: true}},
		{17, "GitHub primary",
			headers("x-ratelimit-remaining", "0", "x-ratelimit-reset", "1767225900", "x-ratelimit-resource", "core", "x-ratelimit-limit", "5000"),
			signals.Signals{Quota: signals.Quota{Limit: 5000, Remaining: 0, Reset: in(5 * time.Minute), Slack: time.Second}, HasQuota: true, Bucket: "core"}},
		{18, "GitHub secondary", headers("retry-after", "60"),
			signals.Signals{RetryAfter: time.Minute, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{19, "X/Twitter", headers("x-rate-limit-remaining", "0", "x-rate-limit-reset", "1767226500"),
			signals.Signals{Quota: signals.Quota{Remaining: 0, Reset: in(15 * time.Minute), Slack: time.Second}, HasQuota: true}},
		{20, "Reddit", headers("X-Ratelimit-Used", "4", "X-Ratelimit-Remaining", "596.0", "X-Ratelimit-Reset", "412"),
			signals.Signals{Quota: signals.Quota{Remaining: 596, Reset: in(412 * time.Second), Slack: time.Second}, HasQuota: true}},
		{21, "Discord route",
			headers("Retry-After", "65", "X-RateLimit-Reset", "1767225664.57", "X-RateLimit-Reset-After", "64.57",
				"X-RateLimit-Bucket", "abcd1234", "X-RateLimit-Scope", "user", "X-RateLimit-Remaining", "0", "X-RateLimit-Limit", "5"),
			signals.Signals{RetryAfter: 65 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second,
				Quota: signals.Quota{Limit: 5, Remaining: 0, Reset: in(64570 * time.Millisecond)}, HasQuota: true, Bucket: "abcd1234"}},
		{22, "Discord global", headers("X-RateLimit-Global", "true", "X-RateLimit-Scope", "global", "Retry-After", "65"),
			signals.Signals{RetryAfter: 65 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second, Global: true}},
		{24, "OpenAI durations",
			headers("x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1s",
				"x-ratelimit-limit-tokens", "150000", "x-ratelimit-remaining-tokens", "1200", "x-ratelimit-reset-tokens", "6m0s"),
			signals.Signals{Quota: signals.Quota{Limit: 60, Remaining: 0, Reset: in(time.Second), Refill: true}, HasQuota: true,
				Quotas: []signals.Quota{{Limit: 150000, Remaining: 1200, Reset: in(6 * time.Minute), Unit: "tokens", Refill: true}}}},
		{26, "Anthropic RFC 3339",
			headers("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-01-01T00:00:59Z",
				"anthropic-ratelimit-requests-limit", "50", "retry-after", "59"),
			signals.Signals{RetryAfter: 59 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second,
				Quota: signals.Quota{Limit: 50, Remaining: 0, Reset: in(59 * time.Second), Slack: time.Second, Refill: true}, HasQuota: true}},
		{0, "Anthropic input and output tokens: the combined tokens left out of Quotas",
			headers("anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "2026-01-01T00:00:02Z",
				"anthropic-ratelimit-requests-limit", "50",
				"anthropic-ratelimit-tokens-limit", "8000", "anthropic-ratelimit-tokens-remaining", "7000",
				"anthropic-ratelimit-tokens-reset", "2026-01-01T00:00:08Z",
				"anthropic-ratelimit-input-tokens-limit", "30000", "anthropic-ratelimit-input-tokens-remaining", "29000",
				"anthropic-ratelimit-input-tokens-reset", "2026-01-01T00:00:02Z",
				"anthropic-ratelimit-output-tokens-limit", "8000", "anthropic-ratelimit-output-tokens-remaining", "7000",
				"anthropic-ratelimit-output-tokens-reset", "2026-01-01T00:00:08Z"),
			signals.Signals{Quota: signals.Quota{Limit: 50, Remaining: 49, Reset: in(2 * time.Second), Slack: time.Second, Refill: true}, HasQuota: true,
				Quotas: []signals.Quota{
					{Limit: 30000, Remaining: 29000, Reset: in(2 * time.Second), Slack: time.Second, Unit: "input-tokens", Refill: true},
					{Limit: 8000, Remaining: 7000, Reset: in(8 * time.Second), Slack: time.Second, Unit: "output-tokens", Refill: true},
				}}},
		{0, "GitHub GraphQL counts points",
			headers("x-ratelimit-remaining", "4990", "x-ratelimit-reset", "1767225900", "x-ratelimit-resource", "graphql",
				"x-ratelimit-limit", "5000", "x-ratelimit-used", "10"),
			signals.Signals{Quota: signals.Quota{Limit: 5000, Remaining: 4990, Reset: in(5 * time.Minute), Slack: time.Second, Unit: "points"}, HasQuota: true,
				Bucket: "graphql", Quotas: []signals.Quota{{Limit: 5000, Remaining: 4990, Reset: in(5 * time.Minute), Slack: time.Second, Unit: "points"}}}},
		{28, "Shopify REST", headers("X-Shopify-Shop-Api-Call-Limit", "39/40"),
			signals.Signals{Quota: signals.Quota{Limit: 40, Remaining: 1}, HasQuota: true}},
		{36, "Akamai-style ISO reset", headers("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2026-01-01T00:01:00Z"),
			signals.Signals{Quota: signals.Quota{Remaining: 0, Reset: in(time.Minute), Slack: time.Second}, HasQuota: true}},
		{38, "lemlist JS date, ignored", headers("X-RateLimit-Remaining", "3",
			"X-RateLimit-Reset", "Tue Feb 16 2021 09:02:42 GMT+0100 (Central European Standard Time)"),
			signals.Signals{Quota: signals.Quota{Remaining: 3}, HasQuota: true}},
		{39, "Symfony retry-after epoch", headers("X-RateLimit-Retry-After", "1767225630"),
			signals.Signals{RetryAfter: 30 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{39, "Symfony retry-after delta", headers("X-RateLimit-Retry-After", "30"),
			signals.Signals{RetryAfter: 30 * time.Second, HasRetryAfter: true, RetryAfterSlack: time.Second}},
		{40, "parallel lists: the exhausted one binds",
			headers("X-RateLimit-Limit", "1, 3", "X-RateLimit-Remaining", "0, 2", "X-RateLimit-Reset", "5, 60",
				"X-RateLimit-Policy", "1;w=5, 3;w=60"),
			signals.Signals{Quota: signals.Quota{Limit: 1, Remaining: 0, Reset: in(5 * time.Second), Slack: time.Second, Window: 5 * time.Second}, HasQuota: true}},
		{0, "tollbooth: the window in X-Rate-Limit-Duration",
			headers("X-Rate-Limit-Limit", "100.00", "X-Rate-Limit-Duration", "1", "RateLimit-Limit", "100",
				"RateLimit-Remaining", "7", "RateLimit-Reset", "1"),
			signals.Signals{Quota: signals.Quota{Limit: 100, Remaining: 7, Reset: in(time.Second), Slack: time.Second, Window: time.Second}, HasQuota: true}},
		{0, "sethvargo/go-limiter: a reset as a date, in Go's RFC 1123",
			headers("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "7", "X-RateLimit-Reset", "Thu, 01 Jan 2026 00:00:01 UTC"),
			signals.Signals{Quota: signals.Quota{Limit: 100, Remaining: 7, Reset: in(time.Second), Slack: time.Second}, HasQuota: true}},
		{41, "cached response", headers("RateLimit", `"p";r=0;t=10`, "Age", "30"), signals.Signals{Cached: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Parse(tt.give, vectorNow), "row %d", tt.row)
		})
	}
}

func TestParseSignalsMostConstrainingPolicy(t *testing.T) {
	// Two IETF policies: 50 left for 30s (1.7/s) and 900 left for a day
	// (0.01/s): the daily one binds.
	s := Parse(headers(
		"RateLimit", `"burst";r=50;t=30, "daily";r=900;t=86400`,
		"RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`), vectorNow)
	assert.Equal(t, "daily", s.Quota.Policy)
	assert.Equal(t, 900.0, s.Quota.Remaining)

	// Split over two field lines, the list is the same.
	split := Parse(http.Header{
		"Ratelimit":        {`"burst";r=50;t=30`, `"daily";r=900;t=86400`},
		"Ratelimit-Policy": {`"burst";q=100;w=60, "daily";q=1000;w=86400`},
	}, vectorNow)
	assert.Equal(t, s, split)

	// A token quota binds only when spent.
	s = Parse(headers(
		"x-ratelimit-remaining-requests", "10", "x-ratelimit-reset-requests", "10s",
		"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "20ms"), vectorNow)
	assert.Equal(t, "tokens", s.Quota.Unit)
	assert.Equal(t, in(20*time.Millisecond), s.Quota.Reset)
}

func TestParseSignalsIgnoresMalformedFields(t *testing.T) {
	for _, field := range []string{
		`"default";r=50;t=30,`,     // trailing comma
		`"default";r=50;t=30 junk`, // junk after a member
		`"unterminated;r=1`,
		`"default";R=5`, // keys are lower case
		`(inner list);r=1`,
	} {
		s := Parse(headers("RateLimit", field), vectorNow)
		assert.False(t, s.HasQuota, "RateLimit: %s", field)
	}
	for _, v := range []string{"-1", "1e9", "NaN", "", "ten", "1,,2"} {
		s := Parse(headers("X-RateLimit-Remaining", v, "X-RateLimit-Reset", "10"), vectorNow)
		assert.False(t, s.HasQuota, "X-RateLimit-Remaining: %q", v)
	}
	// A reset too far to be a time, or overflowing, is dropped; the
	// remaining count still stands.
	for _, v := range []string{"99999999999999", "1e400", "-3"} {
		s := Parse(headers("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", v), vectorNow)
		assert.True(t, s.Quota.Reset.IsZero(), "X-RateLimit-Reset: %q", v)
	}
}

func TestParseSignalsCorrectsClockSkew(t *testing.T) {
	// The server's clock is 10 minutes ahead of ours: its epoch reset,
	// five minutes after its Date, is five minutes after our now.
	serverNow := vectorNow.Add(10 * time.Minute)
	s := Parse(headers(
		"Date", serverNow.Format(http.TimeFormat),
		"X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "1767226500"), vectorNow) // server now + 5 min
	assert.Equal(t, in(5*time.Minute), s.Quota.Reset)

	// Date counts whole seconds, truncated: a skew of more than a second
	// is rounded up to the second, and a reset moved by it is off by less
	// than a second, its Slack.
	s = Parse(headers(
		"Date", vectorNow.Add(2*time.Second).Format(http.TimeFormat),
		"X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "1767225660"), vectorNow.Add(300*time.Millisecond)) // its Date is 1.7 s ahead of our clock
	assert.Equal(t, in(58*time.Second), s.Quota.Reset)
	assert.Equal(t, time.Second, s.Quota.Slack)

	// A Date within a second of ours, beyond its truncation, is a clock in
	// step: whichever side of ours it falls, the reset stays put.
	for _, received := range []time.Duration{-900 * time.Millisecond, 300 * time.Millisecond, 999 * time.Millisecond} {
		s = Parse(headers(
			"Date", vectorNow.Format(http.TimeFormat),
			"X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "1767225660"), vectorNow.Add(received))
		assert.Equal(t, in(time.Minute), s.Quota.Reset, "received %v after its Date", received)
	}

	// A clock in step with ours: a Date up to a second behind is no skew.
	s = Parse(headers(
		"Date", vectorNow.Format(http.TimeFormat),
		"X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "1767225660"), vectorNow.Add(700*time.Millisecond))
	assert.Equal(t, in(time.Minute), s.Quota.Reset)

	// Relative values need no correction.
	s = Parse(headers(
		"Date", serverNow.Format(http.TimeFormat),
		"X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset-After", "3.5"), vectorNow)
	assert.Equal(t, in(3500*time.Millisecond), s.Quota.Reset)
}

func TestParseSignalsNonCanonicalNames(t *testing.T) {
	h := http.Header{"x-ratelimit-remaining": {"7"}, "retry-after": {"3"}}
	s := Parse(h, vectorNow)
	assert.Equal(t, 7.0, s.Quota.Remaining)
	assert.Equal(t, 3*time.Second, s.RetryAfter)
}

func TestSignalsDelay(t *testing.T) {
	for _, tt := range []struct {
		give   signals.Signals
		want   time.Duration
		wantOK bool
	}{
		{signals.Signals{}, 0, false},
		{signals.Signals{RetryAfter: 20 * time.Second, HasRetryAfter: true,
			Quota: signals.Quota{Remaining: 0, Reset: in(10 * time.Second)}, HasQuota: true}, 20 * time.Second, true},
		{signals.Signals{Quota: signals.Quota{Remaining: 0, Reset: in(10 * time.Second)}, HasQuota: true}, 10 * time.Second, true},
		{signals.Signals{Quota: signals.Quota{Remaining: 0, Reset: in(-10 * time.Second)}, HasQuota: true}, 0, true},
		{signals.Signals{Quota: signals.Quota{Remaining: 5, Reset: in(10 * time.Second)}, HasQuota: true}, 0, false},
		{signals.Signals{Quota: signals.Quota{Remaining: 0}, HasQuota: true}, 0, false},
	} {
		got, ok := tt.give.Delay(vectorNow)
		assert.Equal(t, tt.wantOK, ok)
		assert.Equal(t, tt.want, got)
	}
}

// FuzzParseSignals feeds one value to each of the headers Parse
// reads. It must never panic, and what it reports must be sane: no
// negative delay or count, no time out of this millennium's reach.
func FuzzParseSignals(f *testing.F) {
	for _, seed := range [][2]string{
		{"120", `"default";r=50;t=30`}, {"Thu, 01 Jan 2026 00:00:30 GMT", `"burst";q=100;w=60,"daily";q=1000;w=86400`},
		{"2.0", "limit=100, remaining=50, reset=5"}, {"-5", `"peruser";r=300;pk=:sdfjLJUOUH==:`},
		{"1767225660", "100;w=10"}, {"1767225664.57", `"a";r=0;t=10, "b";r=1`}, {"6m0s", "1, 3"},
		{"2026-01-01T00:00:59Z", "0, 2"}, {"39/40", "1;w=5, 3;w=60"}, {"99999999999999999999", `"x\"y";r=1`},
		{"", ""}, {"1e3", ","}, {"NaN", `"unterminated`},
	} {
		f.Add(seed[0], seed[1])
	}
	names := []string{
		"Retry-After", "Retry-After-Ms", "X-Ratelimit-Retry-After", "X-Ratelimit-Limit", "X-Ratelimit-Remaining",
		"X-Ratelimit-Reset", "X-Ratelimit-Reset-After", "X-Ratelimit-Policy", "X-Ratelimit-Reset-Requests",
		"X-Ratelimit-Remaining-Tokens", "Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Remaining",
		"X-Shopify-Shop-Api-Call-Limit", "Date", "Age",
	}
	f.Fuzz(func(t *testing.T, value, structured string) {
		h := http.Header{"Ratelimit": {structured}, "Ratelimit-Policy": {structured}}
		for _, name := range names {
			h.Set(name, value)
		}
		s := Parse(h, vectorNow)
		lo, hi := vectorNow.AddDate(-100, 0, 0), time.Date(5000, 1, 1, 0, 0, 0, 0, time.UTC)
		if s.RetryAfter < 0 || s.Quota.Remaining < 0 || s.Quota.Limit < 0 || s.Quota.Window < 0 {
			t.Fatalf("negative value in %+v", s)
		}
		if r := s.Quota.Reset; !r.IsZero() && (r.Before(lo) || r.After(hi)) {
			t.Fatalf("reset %v out of reach", r)
		}
		if _, ok := s.Delay(vectorNow); ok && !s.HasRetryAfter && !s.HasQuota {
			t.Fatalf("a delay from nothing: %+v", s)
		}
	})
}

// FuzzStructuredFields checks the structured-field reader: it never
// panics, always ends, and hands out pieces of its input.
func FuzzStructuredFields(f *testing.F) {
	for _, seed := range []string{
		`"default";r=50;t=30`, `"burst";q=100;w=60, "daily";q=1000;w=86400`, `limit=100, remaining=50, reset=5`,
		`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, `a, b;c=?1, d=:YQ==:`, `"x\"y";r=1`, `,`, `"a",`, `;`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, field string) {
		for _, dict := range []bool{false, true} {
			n := 0
			for rest := trimOWS(field); rest != "" && n <= len(field); n++ {
				m, next, ok := sfNext(rest, dict)
				if !ok {
					break
				}
				if len(next) >= len(rest) {
					t.Fatalf("sfNext(%q) made no progress", rest)
				}
				for _, piece := range []string{m.key, m.item, m.params} {
					if piece != "?1" && !strings.Contains(field, piece) {
						t.Fatalf("%q is not from the field %q", piece, field)
					}
				}
				sfParam(m.params, "r")
				rest = next
			}
			if n > len(field) {
				t.Fatalf("no end reading %q", field)
			}
		}
	})
}
