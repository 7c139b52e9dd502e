package signals

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Numbers as the headers write them: non-negative decimals, durations in
// seconds, and the classes of bytes they are made of.

// MaxSeconds is the most seconds a time.Duration holds, in round terms.
const MaxSeconds = float64(math.MaxInt64/int64(time.Second)) - 1

// Seconds converts non-negative seconds to a Duration, to the nearest
// nanosecond, refusing overflow.
func Seconds(f float64) (time.Duration, bool) {
	if !(f >= 0) || f > MaxSeconds {
		return 0, false
	}
	return time.Duration(math.Round(f * float64(time.Second))), true
}

// ParseDecimal reads a non-negative decimal number: digits with an
// optional fraction ("596.0"). No sign, exponent, spaces or specials.
func ParseDecimal(s string) (float64, bool) {
	if len(s) > 32 {
		return 0, false
	}
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || (dot && frac == "") {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) && s[i] != '.' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	if !dot && len(s) <= 15 { // exact in a float64: no need for ParseFloat
		return float64(n), true
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
