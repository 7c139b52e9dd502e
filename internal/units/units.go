// Package units names the units a server counts a request's cost in
// besides the request itself (LLM tokens, GraphQL points, bytes), and
// holds a cost as one figure a unit. It is a value type at the bottom of
// polite's core: the header parser, the quotas, the fleet and the public
// Cost all speak of units through it.
package units

import "math"

// A Unit is one of the units a cost counts in, as an index.
type Unit int8

// The units.
const (
	Tokens Unit = iota
	InputTokens
	OutputTokens
	Points
	Bytes
	N // how many units there are
)

// The units' names, as a quota's unit names them in headers (and as
// polite's Unit constants spell them).
const (
	NameTokens       = "tokens"
	NameInputTokens  = "input-tokens"
	NameOutputTokens = "output-tokens"
	NamePoints       = "points"
	NameBytes        = "content-bytes"
)

// String returns the unit's name.
func (u Unit) String() string {
	switch u {
	case Tokens:
		return NameTokens
	case InputTokens:
		return NameInputTokens
	case OutputTokens:
		return NameOutputTokens
	case Points:
		return NamePoints
	case Bytes:
		return NameBytes
	}
	return ""
}

// Named returns the unit named name, and false if a cost does not count
// in it (requests, or a unit polite does not know).
func Named(name string) (Unit, bool) {
	for u := range N {
		if u.String() == name {
			return u, true
		}
	}
	return 0, false
}

// A Vec is a cost, one figure a unit.
type Vec [N]float64

// Valid returns v with each figure made valid: at least 0, and finite.
func (v Vec) Valid() Vec {
	for u, x := range v {
		if !(x > 0) || math.IsInf(x, 1) {
			v[u] = 0
		}
	}
	return v
}

// Zero reports whether v spends nothing.
func (v Vec) Zero() bool { return v == Vec{} }

// Negated returns -v.
func (v Vec) Negated() Vec {
	for u := range v {
		v[u] = -v[u]
	}
	return v
}
