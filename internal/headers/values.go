package headers

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/signals"
)

// retryAfterValue reads a Retry-After value received at now from a server
// whose clock is skew ahead of ours (RFC 9110 §10.2.3): delta-seconds, also
// fractional ("2.5"), or an HTTP-date in any of the three formats of
// [http.ParseTime], which is a time by the server's clock, as its Date is.
// A date in the past gives 0. A
// well-formed value too large for a time.Duration (a date in the year 9999)
// means "not before then": it saturates to the longest Duration, which is
// over any WithMaxRetryAfter. It reports false for garbage and negative
// values.
func retryAfterValue(v string, now time.Time, skew time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, ok := parseSeconds(v); ok {
		return d, true
	}
	if isDecimal(v) {
		return math.MaxInt64, true // overflows a Duration
	}
	t, err := parseHTTPDate(v)
	if err != nil {
		return 0, false
	}
	return max(t.Add(-skew).Sub(now), 0), true // Time.Sub saturates
}

// parseInstant reads a reset instant: a Unix time (at least
// epochThreshold, fractions allowed), seconds from now (fractions allowed),
// an RFC 3339 time or an HTTP-date. Stated times are moved by the server's
// clock skew. It returns how much later than the true instant the result
// may be: a second when it counts whole seconds or comes through Date.
func parseInstant(v string, now time.Time, skew time.Duration) (t time.Time, slack time.Duration, ok bool) {
	if v == "" {
		return time.Time{}, 0, false
	}
	if f, ok := signals.ParseDecimal(v); ok {
		whole := strings.IndexByte(v, '.') < 0
		if f >= epochThreshold {
			if f >= 1e11 { // past the year 5000: not a time this century
				return time.Time{}, 0, false
			}
			sec, frac := math.Modf(f) // a float64 Unix time is good to a microsecond
			t := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).In(now.Location()).Add(-skew)
			return t, stateSlack(whole, skew), true
		}
		d, ok := signals.Seconds(f)
		return now.Add(d), wholeSlack(v), ok
	}
	if isDigit(v[0]) && strings.IndexByte(v, 'T') > 0 {
		if len(v) > maxRFC3339 {
			return time.Time{}, 0, false // not parsed: see maxRFC3339
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t.In(now.Location()).Add(-skew), stateSlack(t.Nanosecond() == 0, skew), true
		}
		return time.Time{}, 0, false
	}
	if t, err := parseHTTPDate(v); err == nil {
		return t.In(now.Location()).Add(-skew), time.Second, true
	}
	return time.Time{}, 0, false
}

// stateSlack is the slack of a time stated by the server's clock: a second
// if it counts whole seconds (truncated or rounded) or was moved by the
// skew from Date.
func stateSlack(whole bool, skew time.Duration) time.Duration {
	if whole || skew != 0 {
		return time.Second
	}
	return 0
}

// wholeSlack is the slack of a delay written as v: a second if it counts
// whole seconds (has no fraction).
func wholeSlack(v string) time.Duration {
	if strings.IndexByte(v, '.') < 0 {
		return time.Second
	}
	return 0
}

// paramSeconds reads the parameter name of the structured-field
// parameters params as non-negative seconds; raw is the value as written.
func paramSeconds(params, name string) (d time.Duration, raw string, ok bool) {
	raw, ok = sfParam(params, name)
	if !ok {
		return 0, "", false
	}
	f, ok := sfNumber(raw)
	if !ok {
		return 0, raw, false
	}
	d, ok = signals.Seconds(f)
	return d, raw, ok
}

// millis reads a non-negative number of milliseconds, fractions allowed;
// one too large for a Duration saturates, as in retryAfterValue.
func millis(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	f, ok := signals.ParseDecimal(v)
	switch {
	case ok && f/1000 <= signals.MaxSeconds:
		return time.Duration(f * float64(time.Millisecond)), true
	case isDecimal(v):
		return math.MaxInt64, true
	}
	return 0, false
}

// parseSeconds parses non-negative decimal seconds with an optional
// fraction ("120", "2.0", "0.25") into a Duration, truncated to the
// nanosecond, exactly. It rejects signs, exponents, spaces, empty parts
// ("1.", ".5") and values that overflow a Duration.
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

// The longest dates that Parse reads. A longer value is not a date,
// and is refused before it is parsed: time.Parse, which fails on it, would
// copy it into its error (http.ParseTime tries three layouts, so a
// megabyte of Retry-After cost 6 MB).
const (
	// maxHTTPDate is the longest HTTP-date of RFC 9110 §5.6.7: the
	// obsolete RFC 850 form with the longest day name. An IMF-fixdate has
	// 29 bytes ("Sun, 06 Nov 1994 08:49:37 GMT"), an asctime date 24.
	maxHTTPDate = len("Wednesday, 09-Nov-94 08:49:37 GMT")
	// maxRFC3339 is the longest RFC 3339 time stated to the nanosecond,
	// the finest a time.Time holds.
	maxRFC3339 = len("2006-01-02T15:04:05.999999999+07:00")
)

// errLongDate is parseHTTPDate's error for a value longer than any
// HTTP-date.
var errLongDate = errors.New("polite: longer than an HTTP-date")

// parseHTTPDate reads an HTTP-date as [http.ParseTime] does, and also the
// dates some servers write with Go's time.RFC1123, whose zone is "UTC"
// where HTTP says "GMT" (sethvargo/go-limiter's reset and Retry-After). A
// value longer than maxHTTPDate is refused unread.
func parseHTTPDate(v string) (time.Time, error) {
	if len(v) > maxHTTPDate {
		return time.Time{}, errLongDate
	}
	t, err := http.ParseTime(v)
	if err != nil {
		if rest, ok := strings.CutSuffix(v, " UTC"); ok {
			if t, err2 := http.ParseTime(rest + " GMT"); err2 == nil {
				return t, nil
			}
		}
	}
	return t, err
}

// splitParams splits "100;w=60" into "100" and ";w=60", trimmed.
func splitParams(s string) (item, params string) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ';'); i >= 0 {
		return strings.TrimSpace(s[:i]), s[i:]
	}
	return s, ""
}

// joinLines joins the lines of a list field with commas, allocating only
// when there are several.
func joinLines(lines []string) string {
	if len(lines) == 1 {
		return lines[0]
	}
	return strings.Join(lines, ",")
}

// isCanonical reports whether a header name is in the form
// textproto.CanonicalMIMEHeaderKey gives it.
func isCanonical(name string) bool {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// epochThreshold separates the two meanings of a numeric reset: a number
// at least this large (2024-01-01T00:00:00Z) is a Unix time, a smaller one
// is seconds from now.
const epochThreshold = 1704067200

// isDecimal reports whether s is digits with at most one inner dot ("12",
// "1.5"), of any length: a number as ParseDecimal and parseSeconds read it,
// whether or not it fits their ranges.
func isDecimal(s string) bool {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	switch {
	case i == 0:
		return false
	case i == len(s):
		return true
	}
	return s[i] == '.' && allDigits(s[i+1:]) // stops at the first byte that is not a digit
}

func allDigits(s string) bool {
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}
