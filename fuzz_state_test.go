package polite_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
)

// FuzzTransport drives the whole Transport, in fake time, with a server
// whose answers and rate-limit headers come from the fuzzer: statuses one
// a byte (the last repeats), and the same Retry-After, X-RateLimit-* and
// RateLimit values on every answer. Whatever the server says, every call
// ends by its deadline with a response or an error, never both, and every
// response polite discards is closed.
func FuzzTransport(f *testing.F) {
	for _, seed := range []struct {
		script                                 []byte
		retryAfter, remaining, reset, ietfRate string
	}{
		{[]byte{0}, "", "", "", ""},
		{[]byte{1, 1, 0}, "1", "", "", ""},
		{[]byte{2, 9, 0}, "Thu, 01 Jan 2026 00:00:30 GMT", "0", "30", ""},
		{[]byte{1, 0, 1, 0}, "0.5", "3", "1767225630", `"default";r=0;t=10`},
		{[]byte{5}, "", "0", "4000000000", ""},
		{[]byte{1}, "99999999999999999999", "-1", "NaN", `"a";r=1;t=-5`},
		{[]byte{6, 3, 4, 2, 0}, "-3", "1e9", "6m0s", `,;=`},
	} {
		f.Add(seed.script, seed.retryAfter, seed.remaining, seed.reset, seed.ietfRate)
	}
	// The answers the server picks from, one a byte of its script; -1 is
	// a transport error.
	statuses := [...]int{200, 429, 503, 500, 502, 403, 408, 404, 204, -1}
	f.Fuzz(func(t *testing.T, script []byte, retryAfter, remaining, reset, ietfRate string) {
		if len(script) == 0 || len(script) > 16 {
			return
		}
		var replies []reply
		for _, b := range script {
			code := statuses[int(b)%len(statuses)]
			if code < 0 {
				replies = append(replies, fail(timeoutError{}))
				continue
			}
			replies = append(replies, status(code,
				"Retry-After", retryAfter, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", remaining,
				"X-RateLimit-Reset", reset, "RateLimit-Policy", `"default";q=10;w=10`, "RateLimit", ietfRate))
		}
		synctest.Test(t, func(t *testing.T) {
			next := newStub(replies...)
			tr := polite.New(next, polite.WithBackoff(time.Millisecond, time.Second), polite.WithMaxRetryAfter(time.Minute))
			for call := range 3 {
				seen := len(next.respBody)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				start := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/items", nil)
				resp, err := tr.RoundTrip(req)
				took := time.Since(start)
				cancel()
				if (resp == nil) == (err == nil) {
					t.Fatalf("call %d: response %v and error %v", call, resp, err)
				}
				if took > 5*time.Minute {
					t.Fatalf("call %d took %v, past its deadline", call, took)
				}
				next.mu.Lock()
				for i := seen; i < len(next.respBody); i++ {
					if resp != nil && i == len(next.respBody)-1 {
						continue // the caller's
					}
					if !next.respBody[i].closed.Load() {
						t.Fatalf("call %d: discarded body %d not closed", call, i)
					}
				}
				next.mu.Unlock()
				if resp != nil {
					resp.Body.Close()
				}
			}
		})
	})
}

// FuzzControllers feeds each rate controller a sequence of outcomes from
// the fuzzer: per byte, a gap of 0 to 63 × 50 ms and whether the server
// throttled (and, for Gentle, a stated limit from 0 to 3 a second). The
// rates they give must stay finite and positive.
func FuzzControllers(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0x81, 0x40, 0xff})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0, 0, 0, 0, 0x80})
	f.Add([]byte{0xc1, 0x3f, 0xc1, 0x3f})
	f.Fuzz(func(t *testing.T, events []byte) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		g, c, a := polite.NewGentle(now), polite.NewCubic(now), polite.NewAIMD(now)
		for i, e := range events {
			now = now.Add(time.Duration(e&0x3f) * 50 * time.Millisecond)
			throttled := e&0x80 != 0
			g.UpdateStated(now, throttled, float64(e>>6&1)*float64(i%4))
			c.Update(now, throttled)
			a.Update(now, throttled)
			for name, r := range map[string]float64{"Gentle": g.Rate(), "Gentle's limit": g.Limit(), "Cubic": c.Rate(), "AIMD": a.Rate()} {
				if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || (r == 0 && name != "Gentle's limit" && name != "Cubic" && name != "AIMD") {
					t.Fatalf("after %d outcomes, %s is %v", i+1, name, r)
				}
			}
		}
	})
}

// FuzzSignalsJSON decodes anything into Signals: an error or a value that
// encodes and decodes back to itself.
func FuzzSignalsJSON(f *testing.F) {
	f.Add(`{"retry_after":30,"has_retry_after":true,"retry_after_slack":1,"quota":{"limit":60,"remaining":0,"reset":"2026-01-01T00:00:30Z","slack":1,"window":0,"policy":"","unit":""},"has_quota":true,"bucket":"","global":false,"cached":false}`)
	f.Add(`{"retry_after":-1}`)
	f.Add(`{"quota":{"window":1e300}}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, in string) {
		var s polite.Signals
		if err := json.Unmarshal([]byte(in), &s); err != nil {
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("%q decoded to %+v, which does not encode: %v", in, s, err)
		}
		var back polite.Signals
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s does not decode: %v", b, err)
		}
		if !back.Quota.Reset.Equal(s.Quota.Reset) {
			t.Fatalf("reset %v came back %v", s.Quota.Reset, back.Quota.Reset)
		}
		back.Quota.Reset, s.Quota.Reset = time.Time{}, time.Time{}
		if len(back.Quotas) != len(s.Quotas) {
			t.Fatalf("quotas %+v came back %+v", s.Quotas, back.Quotas)
		}
		for i := range s.Quotas {
			if !back.Quotas[i].Reset.Equal(s.Quotas[i].Reset) {
				t.Fatalf("reset %v came back %v", s.Quotas[i].Reset, back.Quotas[i].Reset)
			}
			back.Quotas[i].Reset, s.Quotas[i].Reset = time.Time{}, time.Time{}
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("%+v came back %+v", s, back)
		}
	})
}
