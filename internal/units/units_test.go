package units

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every unit is named as the headers name it, and only those: requests
// (no unit) and unknown units are no unit a cost counts in.
func TestUnitsNamed(t *testing.T) {
	for u := range N {
		got, ok := Named(u.String())
		assert.True(t, ok, u.String())
		assert.Equal(t, u, got)
	}
	for _, name := range []string{"", "requests", "Tokens"} {
		_, ok := Named(name)
		assert.False(t, ok, name)
	}
	assert.Empty(t, N.String())
}

// A cost's figures are made valid: negative, NaN and infinite count as 0.
func TestVecValid(t *testing.T) {
	v := Vec{1, -1, math.NaN(), math.Inf(1), 2.5}.Valid()
	assert.Equal(t, Vec{1, 0, 0, 0, 2.5}, v)
	assert.False(t, v.Zero())
	assert.True(t, Vec{}.Zero())
	assert.Equal(t, Vec{-1, 0, 0, 0, -2.5}, v.Negated())
}
