package politecost

import "strings"

// The lexer of the GraphQL reader (graphql.go): the tokens of a query,
// its strings and comments skipped.

// Kinds of tokens besides punctuators, which are their own character.
const (
	tokEOF    = 0
	tokName   = 'a'
	tokNumber = '0'
	tokString = 's'
	tokSpread = '.'
	tokOther  = '?' // a character GraphQL does not have here
)

// gqlToken is a token of a GraphQL document.
type gqlToken struct {
	kind byte
	text string // a name's or a number's text
}

// gqlLexer splits a GraphQL document into tokens, skipping whitespace,
// commas and comments.
type gqlLexer struct {
	src string
	pos int
}

// next returns the next token; tokEOF at the end.
func (l *gqlLexer) next() gqlToken {
	l.skipIgnored()
	if l.pos >= len(l.src) {
		return gqlToken{}
	}
	start := l.pos
	c := l.src[l.pos]
	switch {
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		l.pos++
		for l.pos < len(l.src) && isNameChar(l.src[l.pos]) {
			l.pos++
		}
		return gqlToken{kind: tokName, text: l.src[start:l.pos]}
	case c == '-' || c >= '0' && c <= '9':
		l.pos++
		for l.pos < len(l.src) && isNumberChar(l.src[l.pos]) {
			l.pos++
		}
		return gqlToken{kind: tokNumber, text: l.src[start:l.pos]}
	case c == '"':
		l.skipString()
		return gqlToken{kind: tokString}
	case c == '.':
		if strings.HasPrefix(l.src[l.pos:], "...") {
			l.pos += 3
			return gqlToken{kind: tokSpread}
		}
		l.pos++
		return gqlToken{kind: tokOther}
	case strings.IndexByte("!$&():=@[]{|}", c) >= 0:
		l.pos++
		return gqlToken{kind: c}
	}
	l.pos++
	return gqlToken{kind: tokOther}
}

// skipIgnored skips whitespace, commas, byte order marks and comments.
func (l *gqlLexer) skipIgnored() {
	for l.pos < len(l.src) {
		switch c := l.src[l.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			l.pos++
		case c == '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' && l.src[l.pos] != '\r' {
				l.pos++
			}
		case strings.HasPrefix(l.src[l.pos:], "\uFEFF"):
			l.pos += len("\uFEFF")
		default:
			return
		}
	}
}

// skipString skips a string or a block string, the current character its
// opening quote; an unterminated one runs to the end of its line (a
// string) or of the document (a block string).
func (l *gqlLexer) skipString() {
	if strings.HasPrefix(l.src[l.pos:], `"""`) {
		l.pos += 3
		for l.pos < len(l.src) {
			switch {
			case strings.HasPrefix(l.src[l.pos:], `\"""`):
				l.pos += 4
			case strings.HasPrefix(l.src[l.pos:], `"""`):
				l.pos += 3
				return
			default:
				l.pos++
			}
		}
		return
	}
	l.pos++
	for l.pos < len(l.src) {
		switch l.src[l.pos] {
		case '\\':
			l.pos += 2
		case '"':
			l.pos++
			return
		case '\n', '\r':
			return
		default:
			l.pos++
		}
	}
	l.pos = min(l.pos, len(l.src))
}

func isNameChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isNumberChar(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
