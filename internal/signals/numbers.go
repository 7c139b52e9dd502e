package signals

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Numbers as the headers write them: non-negative decimals, durations in
// seconds, and the classes of bytes they are made of.

// maxSeconds is the most seconds a time.Duration holds, in round terms.
const maxSeconds = float64(math.MaxInt64/int64(time.Second)) - 1

// seconds converts non-negative seconds to a Duration, to the nearest
// nanosecond, refusing overflow.
func Seconds(f float64) (time.Duration, bool) {
	if !(f >= 0) || f > maxSeconds {
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

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || ('A' <= c && c <= 'Z') }
