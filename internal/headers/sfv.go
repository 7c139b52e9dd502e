package headers

import (
	"strings"

	"github.com/politehttp/polite/internal/signals"
)

// A minimal reader of RFC 8941 structured fields, as the IETF RateLimit and
// RateLimit-Policy fields use them: lists and dictionaries of bare items
// (strings, tokens, integers, decimals, byte sequences, booleans) with
// parameters. It does not allocate: it hands out the text of members,
// items and parameters as substrings. Inner lists are not supported (the
// fields never use them) and make a field malformed.

// sfMember is one member of a list, or one entry of a dictionary.
type sfMember struct {
	key    string // the dictionary key; "" in a list
	item   string // the bare item as written: `"burst"`, `100`, `:cHs=:`
	params string // the parameters as written, from the first ';'
}

// sfNext returns the first member of the list or dictionary s (its field
// lines joined by commas, leading spaces trimmed) and the rest after the
// comma that follows it. It reports false if s does not start with a well
// formed member, or if a comma is followed by nothing.
func sfNext(s string, dict bool) (m sfMember, rest string, ok bool) {
	if dict {
		n := sfKeyLen(s)
		if n == 0 {
			return m, "", false
		}
		m.key, s = s[:n], s[n:]
		if s == "" || s[0] != '=' {
			m.item = "?1" // a bare key is boolean true
		} else {
			s = s[1:]
		}
	}
	if m.item == "" {
		n := sfItemLen(s)
		if n == 0 {
			return m, "", false
		}
		m.item, s = s[:n], s[n:]
	}
	n := sfParamsLen(s)
	if n < 0 {
		return m, "", false
	}
	m.params, s = s[:n], trimOWS(s[n:])
	if s == "" {
		return m, "", true
	}
	if s[0] != ',' {
		return m, "", false
	}
	s = trimOWS(s[1:])
	return m, s, s != ""
}

// sfParam returns the value of the parameter name in params, as written
// (`100`, `"x"`, `?1` for a bare key), and whether it is there.
func sfParam(params, name string) (string, bool) {
	for params != "" && params[0] == ';' {
		params = strings.TrimLeft(params[1:], " ")
		n := sfKeyLen(params)
		key := params[:n]
		params = params[n:]
		value := "?1"
		if params != "" && params[0] == '=' {
			m := sfItemLen(params[1:])
			value, params = params[1:1+m], params[1+m:]
		}
		if key == name {
			return value, true
		}
	}
	return "", false
}

// sfItemLen returns the length of the bare item at the start of s, or 0 if
// there is none.
func sfItemLen(s string) int {
	if s == "" {
		return 0
	}
	switch c := s[0]; {
	case c == '"':
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
					return 0
				}
				i++
			case '"':
				return i + 1
			default:
				if s[i] < 0x20 || s[i] > 0x7e {
					return 0
				}
			}
		}
		return 0
	case c == ':':
		i := strings.IndexByte(s[1:], ':')
		if i < 0 {
			return 0
		}
		for _, b := range []byte(s[1 : 1+i]) {
			if !isBase64(b) {
				return 0
			}
		}
		return i + 2
	case c == '?':
		if len(s) >= 2 && (s[1] == '0' || s[1] == '1') {
			return 2
		}
		return 0
	case c == '-' || isDigit(c):
		i := 1
		for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
			i++
		}
		if s[i-1] == '-' || s[i-1] == '.' {
			return 0
		}
		return i
	case isAlpha(c) || c == '*':
		i := 1
		for i < len(s) && isTokenChar(s[i]) {
			i++
		}
		return i
	}
	return 0
}

// sfParamsLen returns the length of the parameters at the start of s, or
// -1 if they are malformed.
func sfParamsLen(s string) int {
	i := 0
	for i < len(s) && s[i] == ';' {
		i++
		for i < len(s) && s[i] == ' ' {
			i++
		}
		n := sfKeyLen(s[i:])
		if n == 0 {
			return -1
		}
		i += n
		if i < len(s) && s[i] == '=' {
			m := sfItemLen(s[i+1:])
			if m == 0 {
				return -1
			}
			i += 1 + m
		}
	}
	return i
}

// sfKeyLen returns the length of the key at the start of s, or 0.
func sfKeyLen(s string) int {
	if s == "" || !(isLower(s[0]) || s[0] == '*') {
		return 0
	}
	i := 1
	for i < len(s) && (isLower(s[i]) || isDigit(s[i]) || strings.IndexByte("_-.*", s[i]) >= 0) {
		i++
	}
	return i
}

// sfString returns the content of a string item without its quotes, if it
// needs no unescaping.
func sfString(item string) (string, bool) {
	if len(item) < 2 || item[0] != '"' || strings.IndexByte(item, '\\') >= 0 {
		return "", false
	}
	return item[1 : len(item)-1], true
}

// sfNumber returns the value of a non-negative integer or decimal item.
func sfNumber(item string) (float64, bool) {
	return signals.ParseDecimal(item)
}

// trimOWS trims spaces and tabs from both ends of s.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func isTokenChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}

func isBase64(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '='
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || ('A' <= c && c <= 'Z') }
