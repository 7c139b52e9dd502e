package politecost

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/politehttp/polite"
)

// chars counts the characters of the text a JSON value holds, as the LLM
// APIs count a request's characters for their estimates: a string's
// characters (an escape sequence counts as one); the sum over an array's
// elements; an object's text fields (a content part's text, a tool
// result's content, a function call's arguments and output) and the JSON
// length of a tool call's input; 4 for a number (a token of a token array).
// Images, audio and files count nothing. It decodes without keeping the
// text, and never fails: a value of another shape counts 0.
type chars int

// UnmarshalJSON counts the characters of b.
func (c *chars) UnmarshalJSON(b []byte) error {
	n, _ := textChars(b, 0)
	*c = chars(n)
	return nil
}

// maxTextDepth bounds the nesting textChars follows.
const maxTextDepth = 64

// textChars counts the characters of the JSON value b begins with, as
// chars documents, and returns them with the length of the value (its
// leading space included). It reads b once, without allocating; on a
// value that is not valid JSON it counts what it can and never reads past
// b.
func textChars(b []byte, depth int) (count, n int) {
	i := len(b) - len(skipSpace(b))
	if i >= len(b) {
		return 0, i
	}
	if depth > maxTextDepth {
		return 0, i + valueLen(b[i:])
	}
	switch b[i] {
	case '"':
		end := i + stringLen(b[i:])
		return stringChars(b[i:end]), end
	case '[':
		i++
		for i < len(b) {
			i += len(b[i:]) - len(skipSpace(b[i:]))
			if i >= len(b) || b[i] == ']' {
				return count, min(i+1, len(b))
			}
			if b[i] == ',' {
				i++
				continue
			}
			c, m := textChars(b[i:], depth+1)
			count, i = count+c, i+max(m, 1)
		}
		return count, i
	case '{':
		i++
		for i < len(b) {
			i += len(b[i:]) - len(skipSpace(b[i:]))
			if i >= len(b) || b[i] == '}' {
				return count, min(i+1, len(b))
			}
			if b[i] == ',' {
				i++
				continue
			}
			if b[i] != '"' { // not a key: a value out of place
				_, m := textChars(b[i:], depth+1)
				i += max(m, 1)
				continue
			}
			kend := i + stringLen(b[i:])
			key := b[i:kend]
			i = kend
			i += len(b[i:]) - len(skipSpace(b[i:]))
			if i < len(b) && b[i] == ':' {
				i++
			}
			c, m := textChars(b[i:], depth+1)
			switch {
			case string(key) == `"text"` || string(key) == `"content"` || string(key) == `"arguments"` || string(key) == `"output"`:
				count += c
			case string(key) == `"input"`: // a tool use's input: its JSON counts
				v := bytes.TrimSpace(b[i : i+m])
				if !bytes.Equal(v, []byte("null")) {
					count += len(v)
				}
			}
			i += max(m, 1)
		}
		return count, min(i, len(b))
	}
	// A literal or a number: up to the next delimiter. A number is one
	// token of a token array.
	j := i
	for j < len(b) && !delimiter(b[j]) {
		j++
	}
	if c := b[i]; c == '-' || c >= '0' && c <= '9' {
		count = 4
	}
	return count, max(j, i+1)
}

// valueLen returns the length of the JSON value b begins with, without
// recursion; all of b if it does not end.
func valueLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"':
		return stringLen(b)
	case '[', '{':
		depth := 0
		for i := 0; i < len(b); i++ {
			switch b[i] {
			case '"':
				i += stringLen(b[i:]) - 1
			case '[', '{':
				depth++
			case ']', '}':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	j := 0
	for j < len(b) && !delimiter(b[j]) {
		j++
	}
	return max(j, 1)
}

// delimiter reports whether c ends a JSON literal or number.
func delimiter(c byte) bool {
	return c == ',' || c == ']' || c == '}' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// stringLen returns the length of the JSON string b begins with, quotes
// included; all of b if it does not end.
func stringLen(b []byte) int {
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// stringChars returns the number of characters of the JSON string s,
// quotes included in s: each escape sequence and each UTF-8 sequence
// counts one.
func stringChars(s []byte) int {
	n := 0
	for i := 1; i < len(s)-1; n++ {
		switch c := s[i]; {
		case c == '\\':
			if i+1 < len(s) && s[i+1] == 'u' {
				i += 6
			} else {
				i += 2
			}
		case c < 0x80:
			i++
		default:
			i++
			for i < len(s) && s[i]&0xC0 == 0x80 {
				i++
			}
		}
	}
	return n
}

// rawLen is the length of a JSON value's text, as it was sent: what a tool
// definition or a tool call's input counts, in characters.
type rawLen int

// UnmarshalJSON counts b.
func (r *rawLen) UnmarshalJSON(b []byte) error {
	if !bytes.Equal(b, []byte("null")) {
		*r = rawLen(len(b))
	}
	return nil
}

// number is a JSON number that may be absent or null.
type number struct {
	v   float64
	set bool
}

// UnmarshalJSON reads b, a number; anything else leaves it unset.
func (n *number) UnmarshalJSON(b []byte) error {
	if v, err := strconv.ParseFloat(string(b), 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
		*n = number{v: v, set: true}
	}
	return nil
}

// or returns n's value, or def if n is unset or negative.
func (n number) or(def float64) float64 {
	if !n.set || n.v < 0 {
		return def
	}
	return n.v
}

// tokensOf returns the tokens of c characters, as OpenAI and Anthropic
// estimate them: one a four characters, rounded up.
func tokensOf(c chars) float64 {
	return math.Ceil(float64(max(c, 0)) / 4)
}

// maxKeyScan bounds how many occurrences of a key lastObject looks at.
const maxKeyScan = 32

// lastObject calls visit with the JSON object that follows each
// occurrence of the key "key" in b, from the last one back, until visit
// reports true; it reports whether one did. b need not be a whole JSON
// document (the tail of a body, a stream of events): an occurrence is a
// key if its quote is not escaped (text inside a JSON string has its quotes
// escaped) and a colon and an object follow it, whole.
func lastObject(b []byte, key string, visit func(obj []byte) bool) bool {
	quoted := make([]byte, 0, len(key)+2)
	quoted = append(append(append(quoted, '"'), key...), '"')
	end := len(b)
	for range maxKeyScan {
		i := bytes.LastIndex(b[:end], quoted)
		if i < 0 {
			return false
		}
		end = i
		if escaped(b, i) {
			continue
		}
		rest := skipSpace(b[i+len(quoted):])
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		rest = skipSpace(rest[1:])
		if obj := objectAt(rest); obj != nil && visit(obj) {
			return true
		}
	}
	return false
}

// escaped reports whether the byte at i is escaped: an odd number of
// backslashes come before it.
func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// skipSpace returns b without its leading JSON whitespace.
func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// objectAt returns the JSON object b begins with, up to its closing brace,
// or nil if b does not begin with one or it is not whole.
func objectAt(b []byte) []byte {
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return b[:i+1]
			}
		}
	}
	return nil
}

// eventStream reports whether resp, whose body ends with tail, is a stream
// of server-sent events: its Content-Type says so, or, without one, its
// tail reads as one.
func eventStream(resp *http.Response, tail []byte) bool {
	if resp != nil {
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			return len(ct) >= 17 && asciiEqualFold(ct[:17], "text/event-stream")
		}
	}
	t := skipSpace(tail)
	return bytes.HasPrefix(t, []byte("data:")) || bytes.HasPrefix(t, []byte("event:")) ||
		bytes.Contains(tail, []byte("\ndata:"))
}

// asciiEqualFold reports whether a and b are equal, ignoring ASCII case.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// eventData calls visit with the data of each "data:" line of the stream
// of server-sent events in tail, in order, until visit reports false. The
// first line is skipped when tail is cut (the body was longer): it may be
// the end of a line.
func eventData(tail []byte, cut bool, visit func(data []byte) bool) {
	if cut {
		i := bytes.IndexByte(tail, '\n')
		if i < 0 {
			return
		}
		tail = tail[i+1:]
	}
	for len(tail) > 0 {
		line := tail
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			line, tail = tail[:i], tail[i+1:]
		} else {
			tail = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		if !visit(bytes.TrimPrefix(data, []byte(" "))) {
			return
		}
	}
}

// requestBody returns the body of the request resp answers, read again
// through its GetBody (at most polite.MaxEstimateBody bytes), or nil.
func requestBody(resp *http.Response) []byte {
	if resp == nil || resp.Request == nil || resp.Request.GetBody == nil {
		return nil
	}
	rc, err := resp.Request.GetBody()
	if err != nil || rc == nil {
		return nil
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, polite.MaxEstimateBody+1))
	if err != nil || len(b) > polite.MaxEstimateBody {
		return nil
	}
	return b
}
