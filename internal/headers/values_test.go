package headers

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		give   string
		want   time.Duration
		wantOK bool
	}{
		// delta-seconds
		{"120", 2 * time.Minute, true},
		{"0", 0, true},
		{"007", 7 * time.Second, true},
		{"2.0", 2 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0.001", time.Millisecond, true},
		{"0.0000000019", 1, true}, // past the nanosecond: truncated
		{"  3  ", 3 * time.Second, true},
		{"\t3", 3 * time.Second, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372036.854775807", math.MaxInt64, true},
		// HTTP-dates, all three formats of RFC 9110 §5.6.7
		{"Sun, 22 Nov 2026 12:01:30 GMT", 90 * time.Second, true},
		{"Sunday, 22-Nov-26 12:01:30 GMT", 90 * time.Second, true},
		{"Sun Nov 22 12:01:30 2026", 90 * time.Second, true},
		{"Sun, 22 Nov 2026 12:01:30 UTC", 90 * time.Second, true},                  // Go's time.RFC1123, as sethvargo/go-limiter writes it
		{"Wednesday, 25-Nov-26 12:01:30 GMT", 72*time.Hour + 90*time.Second, true}, // the longest HTTP-date: 33 bytes
		{"Sun, 22 Nov 2026 11:00:00 GMT", 0, true},                                 // in the past: now
		{"Fri, 31 Dec 9999 23:59:59 GMT", math.MaxInt64, true},                     // beyond a Duration's 292 years: saturated
		// ignored
		{"", 0, false},
		{" ", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1.2.3", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"1 2", 0, false},
		{"5s", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		// well formed, but over a Duration: "not before then", saturated
		{"9223372037", math.MaxInt64, true},
		{"9223372036.854775808", math.MaxInt64, true}, // one nanosecond over
		{"99999999999999999999999999", math.MaxInt64, true},
		{"Sun, 22 Nov 2026 12:01:30 PST", 0, false},
		{"Sun, 22 Nov 2026 12:01:30.0000 GMT", 0, false}, // no HTTP-date: 34 bytes, not parsed (http.ParseTime takes it)
		{"2026-11-22T12:01:30Z", 0, false},
		{"soon", 0, false},
		{"<html>", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, ok := retryAfterValue(tt.give, testNow, 0)
			assert.Equal(t, tt.wantOK, ok)
			if ok {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

// A value longer than any date of its form is refused before it is
// parsed, whatever it ends with; one at the longest is read.
func TestLongDatesAreNotParsed(t *testing.T) {
	longest := "Wednesday, 25-Nov-26 12:01:30 GMT"
	_, err := parseHTTPDate(longest)
	assert.NoError(t, err)
	assert.Len(t, longest, maxHTTPDate)
	_, err = parseHTTPDate(longest + " ")
	assert.ErrorIs(t, err, errLongDate)
	_, err = parseHTTPDate("Sun, 22 Nov 2026 12:01:30" + strings.Repeat(" ", 10) + "UTC")
	assert.ErrorIs(t, err, errLongDate)

	nano := "2026-11-22T12:01:30.123456789+01:00"
	assert.Len(t, nano, maxRFC3339)
	at, _, ok := parseInstant(nano, testNow, 0)
	assert.True(t, ok)
	assert.Equal(t, 123456789, at.Nanosecond())
	_, _, ok = parseInstant("2026-11-22T12:01:30.1234567891+01:00", testNow, 0) // past the nanosecond
	assert.False(t, ok)
}

func TestParseRetryAfterFirstValueCounts(t *testing.T) {
	s := Parse(http.Header{"Retry-After": {"5", "100"}}, testNow)
	assert.True(t, s.HasRetryAfter)
	assert.Equal(t, 5*time.Second, s.RetryAfter)
	assert.False(t, Parse(http.Header{}, testNow).HasRetryAfter)
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"120", "0", "2.0", "1.5", " 7 ", "-1", "1e3", "", "9223372036", "9223372037",
		"9223372036.854775807", "9223372036.8547757", "99999999999999999999", "2" + strings.Repeat("0", 320), "0.0000000001",
		"Sun, 22 Nov 2026 12:01:30 GMT", "Sunday, 22-Nov-26 12:01:30 GMT", "Sun Nov 22 12:01:30 2026",
		"Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "soon", "1.", ".5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := retryAfterValue(s, testNow, 0)
		if !ok {
			if d != 0 {
				t.Fatalf("retryAfterValue(%q) = %v, false: want 0 with false", s, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("retryAfterValue(%q) = %v: negative", s, d)
		}
		v := strings.TrimSpace(s)
		if isDecimal(v) {
			f, _ := strconv.ParseFloat(v, 64) // +Inf when out of range
			// The float is a looser oracle: it rounds where we truncate,
			// and cannot tell the last nanoseconds before the longest
			// Duration from those past it, which saturate to it.
			tolerance := math.Max(1, f*1e9*1e-15)
			if f*1e9 >= math.MaxInt64+tolerance {
				if d != math.MaxInt64 {
					t.Fatalf("retryAfterValue(%q) = %v: want the longest Duration", s, d)
				}
				return
			}
			if diff := math.Abs(f*1e9 - float64(d)); diff > tolerance {
				t.Fatalf("retryAfterValue(%q) = %v, ParseFloat says %v s", s, d, f)
			}
			return
		}
		if _, err := http.ParseTime(v); err != nil {
			t.Fatalf("retryAfterValue(%q) accepted neither seconds nor a date", s)
		}
	})
}
