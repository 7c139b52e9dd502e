package politecost

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Bounds of what the GraphQL reader reads: it never fails and never
// panics; past these it reads no deeper (a query GitHub would refuse
// anyway: it allows 500,000 nodes).
const (
	gqlMaxDepth    = 64      // nesting of selections, and of values
	gqlMaxNodes    = 1 << 17 // selections recorded
	gqlMaxCalls    = 1 << 12 // nesting of the cost's recursion, through fragments
	gqlMaxRequests = 1e15    // the count of requests saturates here
	gqlUnknownSize = 100     // a first or last whose value is not known: GitHub's maximum
)

// gqlDoc is what the cost rules read of a GraphQL document: its
// operations, its fragments, and their selections, each a node of one
// arena linked to its first child and its next sibling.
type gqlDoc struct {
	ops   []gqlOp
	frags map[string]int32 // a fragment's first selection; nil if none
	nodes []gqlNode
	sizes [][2]gqlValue // the first and last arguments of the connections
}

// gqlOp is an operation of a document.
type gqlOp struct {
	kind     string             // query, mutation or subscription
	name     string             // "" if anonymous
	defaults map[string]float64 // the variables' default values that are numbers; nil if none
	sel      int32              // its first selection; -1 if none
}

// gqlNode is a selection: a field (with its subselection, and the size
// its first or last arguments ask for, if a connection), an inline
// fragment, or a named fragment's spread.
type gqlNode struct {
	child, next int32  // -1: none
	size        int32  // a connection's first and last, in gqlDoc.sizes; -1: not a connection
	spread      string // a named fragment spread: the fragment's name
}

// gqlValue is an argument's value as the cost rules read it: a number
// literal or a variable.
type gqlValue struct {
	set      bool
	num      float64
	variable string // "" for a literal
}

// parseGraphQL reads the GraphQL document src.
func parseGraphQL(src string) *gqlDoc {
	p := gqlParser{lex: gqlLexer{src: src}, doc: &gqlDoc{nodes: make([]gqlNode, 0, min(len(src)/16, gqlMaxNodes))}}
	p.advance()
	p.document()
	return p.doc
}

// op returns the operation named name, or the first one if name is ""
// or names none; false if the document has none.
func (d *gqlDoc) op(name string) (gqlOp, bool) {
	if len(d.ops) == 0 {
		return gqlOp{}, false
	}
	for _, o := range d.ops {
		if name != "" && o.name == name {
			return o, true
		}
	}
	return d.ops[0], true
}

// githubRequests returns the requests GitHub counts to fulfil op: for
// each connection, one for each parent it is fetched for (the product of
// the sizes of the connections around it), summed. vars are the request's
// variables.
func (d *gqlDoc) githubRequests(op gqlOp, vars map[string]json.RawMessage) float64 {
	c := gqlCost{doc: d, op: op, vars: vars}
	return c.requests(op.sel, 0)
}

// gqlCost is the count of the requests of one operation.
type gqlCost struct {
	doc   *gqlDoc
	op    gqlOp
	vars  map[string]json.RawMessage
	frags map[string]float64 // the requests of each fragment counted; -1 while it is counted
}

// requests returns the requests of the selections from head on, for one
// parent.
func (c *gqlCost) requests(head int32, calls int) float64 {
	if calls > gqlMaxCalls {
		return 0
	}
	sum := 0.0
	for i := head; i >= 0 && int(i) < len(c.doc.nodes); i = c.doc.nodes[i].next {
		n := &c.doc.nodes[i]
		switch {
		case n.spread != "":
			sum += c.fragment(n.spread, calls+1)
		case n.size >= 0:
			sizes := c.doc.sizes[n.size]
			sum += 1 + max(c.size(sizes[0]), c.size(sizes[1]))*c.requests(n.child, calls+1)
		default:
			sum += c.requests(n.child, calls+1)
		}
		sum = min(sum, gqlMaxRequests)
	}
	return sum
}

// fragment returns the requests of the named fragment, for one parent; 0
// for a fragment not defined, or spread within itself.
func (c *gqlCost) fragment(name string, calls int) float64 {
	head, ok := c.doc.frags[name]
	if !ok {
		return 0
	}
	if r, ok := c.frags[name]; ok {
		return max(r, 0)
	}
	if c.frags == nil {
		c.frags = make(map[string]float64)
	}
	c.frags[name] = -1
	r := c.requests(head, calls)
	c.frags[name] = r
	return r
}

// size returns the number of nodes v asks for: its literal, or its
// variable's value (from the request's variables, or the operation's
// default); gqlUnknownSize if not known; 0 if v is not set.
func (c *gqlCost) size(v gqlValue) float64 {
	if !v.set {
		return 0
	}
	if v.variable == "" {
		return max(v.num, 0)
	}
	if raw, ok := c.vars[v.variable]; ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64); err == nil && !math.IsNaN(f) {
			return min(max(f, 0), gqlMaxRequests)
		}
	}
	if f, ok := c.op.defaults[v.variable]; ok {
		return min(max(f, 0), gqlMaxRequests)
	}
	return gqlUnknownSize
}

// gqlParser reads a GraphQL document, token by token, forgiving every
// error: what it cannot read it skips.
type gqlParser struct {
	lex gqlLexer
	tok gqlToken
	doc *gqlDoc
}

func (p *gqlParser) advance() { p.tok = p.lex.next() }

// is reports whether the current token is the punctuator c.
func (p *gqlParser) is(c byte) bool { return p.tok.kind == c }

// isName reports whether the current token is the name s.
func (p *gqlParser) isName(s string) bool { return p.tok.kind == tokName && p.tok.text == s }

// document reads the definitions.
func (p *gqlParser) document() {
	for !p.is(tokEOF) {
		switch {
		case p.is('{'):
			p.doc.ops = append(p.doc.ops, gqlOp{kind: "query", sel: p.selectionSet(0)})
		case p.isName("query") || p.isName("mutation") || p.isName("subscription"):
			p.operation()
		case p.isName("fragment"):
			p.fragment()
		default:
			p.advance()
		}
	}
}

// operation reads an operation definition.
func (p *gqlParser) operation() {
	op := gqlOp{kind: p.tok.text, sel: -1}
	p.advance()
	if p.is(tokName) {
		op.name = p.tok.text
		p.advance()
	}
	if p.is('(') {
		op.defaults = p.variables()
	}
	p.directives()
	if p.is('{') {
		op.sel = p.selectionSet(0)
	}
	p.doc.ops = append(p.doc.ops, op)
}

// variables reads variable definitions, and returns the defaults that are
// numbers.
func (p *gqlParser) variables() map[string]float64 {
	var defaults map[string]float64
	p.advance() // (
	for !p.is(')') && !p.is(tokEOF) {
		if !p.is('$') {
			p.advance()
			continue
		}
		p.advance()
		if !p.is(tokName) {
			continue
		}
		name := p.tok.text
		p.advance()
		if p.is(':') {
			p.advance()
		}
		for p.is(tokName) || p.is('[') || p.is(']') || p.is('!') {
			p.advance()
		}
		if p.is('=') {
			p.advance()
			if v := p.value(0); v.set && v.variable == "" {
				if defaults == nil {
					defaults = make(map[string]float64)
				}
				defaults[name] = v.num
			}
		}
		p.directives()
	}
	if p.is(')') {
		p.advance()
	}
	return defaults
}

// fragment reads a fragment definition.
func (p *gqlParser) fragment() {
	p.advance()
	name := ""
	if p.is(tokName) {
		name = p.tok.text
		p.advance()
	}
	if p.isName("on") {
		p.advance()
		if p.is(tokName) {
			p.advance()
		}
	}
	p.directives()
	if !p.is('{') {
		return
	}
	sel := p.selectionSet(0)
	if name == "" {
		return
	}
	if p.doc.frags == nil {
		p.doc.frags = make(map[string]int32)
	}
	if _, ok := p.doc.frags[name]; !ok {
		p.doc.frags[name] = sel
	}
}

// directives reads directives, if any: what they ask is not counted (a
// field @skip'ped or @include'd is counted as if fetched).
func (p *gqlParser) directives() {
	for p.is('@') {
		p.advance()
		if p.is(tokName) {
			p.advance()
		}
		if p.is('(') {
			p.arguments(nil)
		}
	}
}

// selectionSet reads a selection set, the current token its opening
// brace, and returns its first selection (-1 if none).
func (p *gqlParser) selectionSet(depth int) int32 {
	p.advance() // {
	if depth >= gqlMaxDepth {
		p.skipBlock()
		if p.is('}') {
			p.advance()
		}
		return -1
	}
	head, last := int32(-1), int32(-1)
	for !p.is('}') && !p.is(tokEOF) {
		n := gqlNode{child: -1, next: -1, size: -1}
		switch {
		case p.is(tokSpread):
			p.advance()
			if p.is(tokName) && p.tok.text != "on" {
				n.spread = p.tok.text
				p.advance()
				p.directives()
				break
			}
			if p.isName("on") {
				p.advance()
				if p.is(tokName) {
					p.advance()
				}
			}
			p.directives()
			if p.is('{') {
				n.child = p.selectionSet(depth + 1)
			}
		case p.is(tokName):
			p.advance()
			if p.is(':') { // an alias
				p.advance()
				if p.is(tokName) {
					p.advance()
				}
			}
			if p.is('(') {
				p.arguments(&n)
			}
			p.directives()
			if p.is('{') {
				n.child = p.selectionSet(depth + 1)
			}
		default:
			p.advance()
			continue
		}
		if len(p.doc.nodes) >= gqlMaxNodes {
			continue
		}
		p.doc.nodes = append(p.doc.nodes, n)
		i := int32(len(p.doc.nodes) - 1)
		if last < 0 {
			head = i
		} else {
			p.doc.nodes[last].next = i
		}
		last = i
	}
	if p.is('}') {
		p.advance()
	}
	return head
}

// skipBlock skips to the closing brace of the block whose opening brace
// was just read, nested blocks included.
func (p *gqlParser) skipBlock() {
	depth := 1
	for !p.is(tokEOF) {
		switch {
		case p.is('{'):
			depth++
		case p.is('}'):
			depth--
			if depth == 0 {
				return
			}
		}
		p.advance()
	}
}

// arguments reads arguments, the current token their opening parenthesis,
// and records first and last, if any, as n's size (if n is not nil).
func (p *gqlParser) arguments(n *gqlNode) {
	p.advance() // (
	var sizes [2]gqlValue
	defer func() {
		if n != nil && (sizes[0].set || sizes[1].set) {
			p.doc.sizes = append(p.doc.sizes, sizes)
			n.size = int32(len(p.doc.sizes) - 1)
		}
	}()
	for !p.is(')') && !p.is(tokEOF) {
		if !p.is(tokName) {
			p.advance()
			continue
		}
		name := p.tok.text
		p.advance()
		if !p.is(':') {
			continue
		}
		p.advance()
		v := p.value(0)
		switch name {
		case "first":
			sizes[0] = v
		case "last":
			sizes[1] = v
		}
	}
	if p.is(')') {
		p.advance()
	}
}

// value reads a value, and returns it if it is a number or a variable. It
// reads at least one token, but at the end.
func (p *gqlParser) value(depth int) gqlValue {
	var v gqlValue
	switch {
	case p.is('$'):
		p.advance()
		if p.is(tokName) {
			v = gqlValue{set: true, variable: p.tok.text}
			p.advance()
		}
	case p.is(tokNumber):
		if f, err := strconv.ParseFloat(p.tok.text, 64); err == nil {
			v = gqlValue{set: true, num: f}
		}
		p.advance()
	case depth < gqlMaxDepth && p.is('['):
		p.advance()
		for !p.is(']') && !p.is(tokEOF) {
			p.value(depth + 1)
		}
		if p.is(']') {
			p.advance()
		}
	case depth < gqlMaxDepth && p.is('{'):
		p.advance()
		for !p.is('}') && !p.is(tokEOF) {
			if p.is(tokName) {
				p.advance()
				if p.is(':') {
					p.advance()
					p.value(depth + 1)
				}
				continue
			}
			p.advance()
		}
		if p.is('}') {
			p.advance()
		}
	default:
		p.advance()
	}
	return v
}
