package polite

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// parseRetryAfter reads the Retry-After header of a response received at
// now (RFC 9110 §10.2.3): delta-seconds, also fractional ("2.5"), or an
// HTTP-date in any of the three formats of [http.ParseTime]. A date in the
// past gives 0. It reports false, and the value is not to be used, when the
// header is absent, garbage, negative, or too large for a time.Duration.
// When the header is repeated, the first value counts.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	v = strings.TrimSpace(v)
	if d, ok := parseSeconds(v); ok {
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d == math.MaxInt64 { // Time.Sub saturates: the date is out of range
		return 0, false
	}
	return max(d, 0), true
}

// parseSeconds parses non-negative decimal seconds with an optional
// fraction ("120", "2.0", "0.25") into a Duration, truncated to the
// nanosecond. It rejects signs, exponents, spaces, empty parts ("1.", ".5")
// and values that overflow a Duration.
func parseSeconds(s string) (time.Duration, bool) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") {
		return 0, false
	}
	var secs int64
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if secs > (math.MaxInt64/int64(time.Second)-int64(c-'0'))/10 {
			return 0, false // overflows a Duration
		}
		secs = secs*10 + int64(c-'0')
	}
	var nanos int64
	scale := int64(time.Second)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		scale /= 10 // digits past the nanosecond are checked, then dropped
		nanos += int64(c-'0') * scale
	}
	d := secs*int64(time.Second) + nanos
	if d < 0 {
		return 0, false
	}
	return time.Duration(d), true
}
