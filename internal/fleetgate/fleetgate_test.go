package fleetgate

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/politehttp/polite/fleetapi"
)

// A key's untold successes are kept by generation, in order, in at most
// maxAccepted entries: the oldest two are merged under the older, so that
// a success is never told as newer than it is, and none is lost.
func TestAddAcceptedKeepsGenerationsInOrder(t *testing.T) {
	var a []fleetapi.Accepted
	for _, g := range []uint64{5, 3, 5, 7, 9, 11, 3} {
		a = addAccepted(a, g, 1)
	}
	assert.Equal(t, []fleetapi.Accepted{{Gen: 3, N: 4}, {Gen: 7, N: 1}, {Gen: 9, N: 1}, {Gen: 11, N: 1}}, a)
	a = addAccepted(a, 1, 4)
	assert.Equal(t, []fleetapi.Accepted{{Gen: 1, N: 8}, {Gen: 7, N: 1}, {Gen: 9, N: 1}, {Gen: 11, N: 1}}, a)
}
