package periodic_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/politehttp/polite/internal/periodic"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		l := periodic.Start(time.Second, func() { calls.Add(1) })
		time.Sleep(3500 * time.Millisecond)
		assert.Equal(t, int32(3), calls.Load())
		l.Stop()
		l.Stop() // again: nothing
		time.Sleep(5 * time.Second)
		assert.Equal(t, int32(3), calls.Load(), "no call after Stop")
	})
}
