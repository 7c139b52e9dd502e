package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dialectServer answers every request with status and the headers kv.
// The headers' values may hold {now+N}, replaced by the Unix time N
// seconds from the request.
func dialectServer(t *testing.T, status int, kv ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		for i := 0; i+1 < len(kv); i += 2 {
			v := kv[i+1]
			if rest, ok := strings.CutPrefix(v, "{now+"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(rest, "}"))
				v = strconv.FormatInt(now.Unix()+int64(n), 10)
			}
			w.Header().Add(kv[i], v)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestInspectReadsEveryDialect(t *testing.T) {
	type want struct {
		retryAfter     time.Duration // 0: none
		limit, remains float64       // limit -1: no quota
		window         time.Duration
		policy, bucket string
		global         bool
		unit           string
	}
	cases := []struct {
		name   string
		status int
		kv     []string
		want   want
	}{
		{"Retry-After seconds", 429, []string{"Retry-After", "7"}, want{retryAfter: 7 * time.Second, limit: -1}},
		{"Retry-After date", 503, []string{"Retry-After", "{date+30}"}, want{retryAfter: 30 * time.Second, limit: -1}},
		{"retry-after-ms", 429, []string{"Retry-After-Ms", "1500"}, want{retryAfter: 1500 * time.Millisecond, limit: -1}},
		{"GitHub X-RateLimit", 200, []string{"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4990", "X-RateLimit-Reset", "{now+3600}", "X-RateLimit-Resource", "core"},
			want{limit: 5000, remains: 4990, bucket: "core"}},
		{"IETF draft-10", 200, []string{"RateLimit-Policy", `"burst";q=100;w=60, "day";q=1000;w=86400`, "RateLimit", `"burst";r=40;t=30, "day";r=900;t=600`},
			want{limit: 100, remains: 40, window: time.Minute, policy: "burst"}},
		{"IETF draft-07", 200, []string{"RateLimit", "limit=10, remaining=3, reset=5"}, want{limit: 10, remains: 3}},
		{"RateLimit-* fields", 200, []string{"RateLimit-Limit", "60", "RateLimit-Remaining", "59", "RateLimit-Reset", "60"}, want{limit: 60, remains: 59}},
		{"tollbooth", 200, []string{"X-Rate-Limit-Limit", "10", "X-Rate-Limit-Duration", "1", "X-Rate-Limit-Remaining", "9"}, want{limit: 10, remains: 9, window: time.Second}},
		{"Discord", 429, []string{"X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "2.5", "X-RateLimit-Bucket", "abcd", "X-RateLimit-Global", "true", "Retry-After", "3"},
			want{retryAfter: 3 * time.Second, limit: 5, remains: 0, bucket: "abcd", global: true}},
		{"OpenAI", 200, []string{"x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "59", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-limit-tokens", "150000", "x-ratelimit-remaining-tokens", "149984", "x-ratelimit-reset-tokens", "6m0s"}, want{limit: 60, remains: 59}},
		{"Anthropic", 200, []string{"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "{rfc3339+60}"}, want{limit: 50, remains: 49}},
		{"Shopify", 200, []string{"X-Shopify-Shop-Api-Call-Limit", "32/40"}, want{limit: 40, remains: 8}},
		{"none", 200, []string{"Content-Type", "text/plain"}, want{limit: -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kv := dates(c.kv)
			srv := dialectServer(t, c.status, kv...)
			r := runPolite(t, "", "", 20*time.Second, "inspect", "-json", srv.URL)
			require.Equal(t, exitOK, r.code, r.stderr)
			var s polite.Signals
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)

			assert.Equal(t, c.want.retryAfter > 0, s.HasRetryAfter)
			assert.InDelta(t, c.want.retryAfter.Seconds(), s.RetryAfter.Seconds(), 1.01, "Retry-After")
			assert.Equal(t, c.want.limit >= 0, s.HasQuota, "quota")
			if c.want.limit >= 0 {
				assert.Equal(t, c.want.limit, s.Quota.Limit, "limit")
				assert.Equal(t, c.want.remains, s.Quota.Remaining, "remaining")
				assert.Equal(t, c.want.window, s.Quota.Window, "window")
				assert.Equal(t, c.want.policy, s.Quota.Policy, "policy")
			}
			assert.Equal(t, c.want.bucket, s.Bucket)
			assert.Equal(t, c.want.global, s.Global)

			// The text report lists every header polite read, and none other.
			r = runPolite(t, "", "", 20*time.Second, "inspect", srv.URL)
			require.Equal(t, exitOK, r.code, r.stderr)
			for i := 0; i+1 < len(kv); i += 2 {
				name := http.CanonicalHeaderKey(kv[i])
				assert.Equal(t, polite.IsSignalHeader(name), strings.Contains(r.stdout, "  "+name+": "), "%s in:\n%s", name, r.stdout)
			}
			assert.Contains(t, r.stdout, "What polite would do for "+strings.TrimPrefix(srv.URL, "http://"))
		})
	}
}

// dates replaces {date+N} and {rfc3339+N} in kv's values by the time N
// seconds from now, as an HTTP-date or in RFC 3339; {now+N} is left for
// the server.
func dates(kv []string) []string {
	out := append([]string(nil), kv...)
	now := time.Now()
	for i := range out {
		for prefix, layout := range map[string]string{"{date+": http.TimeFormat, "{rfc3339+": time.RFC3339} {
			if rest, ok := strings.CutPrefix(out[i], prefix); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(rest, "}"))
				// An HTTP-date counts whole seconds: round up, so the
				// delay is not read a second short.
				out[i] = now.Add(time.Duration(n)*time.Second + time.Second).UTC().Format(layout)
			}
		}
	}
	return out
}

func TestInspectSaysWhatPoliteWouldDo(t *testing.T) {
	t.Run("a spent quota", func(t *testing.T) {
		srv := dialectServer(t, 429, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "{now+20}")
		r := runPolite(t, "", "", 20*time.Second, "inspect", srv.URL)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "0 of 100 requests left")
		assert.Regexp(t, `next request +in 1\d(\.\d+)?s: the quota is spent until its reset`, r.stdout)
	})
	t.Run("a pause over the cap", func(t *testing.T) {
		srv := dialectServer(t, 429, "Retry-After", "3600")
		r := runPolite(t, "", "", 20*time.Second, "inspect", "-max-retry-after", "1m", srv.URL)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "refused: the server asks for 1h0m0s, over -max-retry-after 1m0s")
	})
	t.Run("a quota paces the host", func(t *testing.T) {
		srv := dialectServer(t, 200, "RateLimit-Policy", `"default";q=600;w=60`, "RateLimit", `"default";r=600;t=60`)
		r := runPolite(t, "", "", 20*time.Second, "inspect", srv.URL)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Regexp(t, `pace +\d+(\.\d+)? requests/s`, r.stdout)
		assert.Regexp(t, `window +1m0s\n`, r.stdout)
	})
	t.Run("a named bucket's quota paces the host", func(t *testing.T) {
		srv := dialectServer(t, 200, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4990", "X-RateLimit-Reset", "{now+1800}", "X-RateLimit-Resource", "core")
		r := runPolite(t, "", "", 20*time.Second, "inspect", srv.URL)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Regexp(t, `pace +2\.7\d requests/s`, r.stdout, "4,990 spread over the half hour to the reset")
	})
	t.Run("the key is the lower-cased host", func(t *testing.T) {
		srv := dialectServer(t, 200)
		url := strings.Replace(srv.URL, "127.0.0.1", "LOCALHOST", 1)
		r := runPolite(t, "", "", 20*time.Second, "inspect", "-rate", "5", url)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Regexp(t, `pace +5 requests/s`, r.stdout)
		assert.Contains(t, r.stdout, "What polite would do for localhost:")
	})
	t.Run("no headers on HEAD", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.Header.Get("Authorization") == "Bearer t0ken" {
				w.Header().Set("X-RateLimit-Limit", "10")
				w.Header().Set("X-RateLimit-Remaining", "9")
			}
		}))
		defer srv.Close()
		r := runPolite(t, "", "", 20*time.Second, "inspect", srv.URL)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "Rate-limit headers: none.")
		assert.Regexp(t, `pace +none yet`, r.stdout)
		assert.Contains(t, r.stdout, "try -X GET")

		r = runPolite(t, "", "", 20*time.Second, "inspect", "-X", "GET", "-H", "Authorization: Bearer t0ken", srv.URL)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "9 of 10 requests left")
		assert.NotContains(t, r.stdout, "t0ken", "the request's credentials are not printed")
	})
}

// inspect shows the key's queue by priority, highest first: its own
// request has gone by the time it prints, so none waits; a status whose
// calls wait reads by class, a priority between classes by its number.
func TestInspectShowsTheQueueByPriority(t *testing.T) {
	srv := dialectServer(t, 200)
	r := runPolite(t, "", "", 20*time.Second, "inspect", srv.URL)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `\n  waiting +none\n`, r.stdout)

	assert.Equal(t, "2 interactive, 1 at priority 5, 3 batch (by priority, highest first)", waiting([]polite.PriorityCount{
		{Priority: polite.PriorityInteractive, Calls: 2}, {Priority: 5, Calls: 1}, {Priority: polite.PriorityBatch, Calls: 3},
	}))
}

func TestInspectFailures(t *testing.T) {
	closed := closedURL(t) + "/"

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"inspect"}, exitUsage, "give one URL"},
		{[]string{"inspect", "a", "b"}, exitUsage, "give one URL"},
		{[]string{"inspect", "http://example.com/", "-json"}, exitUsage, "flags go before the URL"},
		{[]string{"inspect", "-burst", "0", "http://example.com/"}, exitUsage, "-burst must be at least 1"},
		{[]string{"inspect", "ftp://example.com/"}, exitUsage, "not an http or https URL"},
		{[]string{"inspect", "-H", "nocolon", "http://example.com/"}, exitUsage, "is not a header"},
		{[]string{"inspect", "-rate", "fast", "http://example.com/"}, exitUsage, "is not a rate"},
		{[]string{"inspect", "-nosuchflag"}, exitUsage, "flag provided but not defined"},
		{[]string{"inspect", closed}, exitFailure, "connection refused"},
		{[]string{"nosuchcommand"}, exitUsage, `unknown command "nosuchcommand"`},
		{nil, exitUsage, "Commands:"},
	} {
		r := runPolite(t, "", "", 20*time.Second, c.args...)
		assert.Equal(t, c.code, r.code, "%q: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.says, "%q", c.args)
		assert.Empty(t, r.stdout, "%q", c.args)
	}

	r := runPolite(t, "", "", 20*time.Second, "inspect", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "Usage: polite inspect [flags] URL")
	assert.Contains(t, r.stdout, "-max-retry-after")
}
