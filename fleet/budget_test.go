package fleet_test

import (
	"testing"

	"github.com/politehttp/polite/fleet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two processes that name one budget share it: what one takes the other
// cannot, and what one gives back the other can take.
func TestRetryBudgetIsSharedByProcesses(t *testing.T) {
	rdb := newClient(t, startRedis(t).addr)
	a := newFleet(t, rdb, fleet.WithMember("a")).RetryBudget("api", 10)
	b := newFleet(t, rdb, fleet.WithMember("b")).RetryBudget("api", 10)
	other := newFleet(t, rdb, fleet.WithMember("c")).RetryBudget("other", 10)

	assert.True(t, a.TryTake(5))
	assert.True(t, b.TryTake(5))
	assert.False(t, a.TryTake(5), "the fleet's 10 tokens are taken")
	assert.False(t, b.TryTake(1))
	assert.True(t, other.TryTake(10), "another name, another budget")

	b.Refund(3)
	require.NoError(t, b.Flush(ctx))
	assert.True(t, a.TryTake(3), "b's refund is a's to take")
	assert.False(t, a.TryTake(1))
	assert.Equal(t, 0, a.Remaining())
	assert.Equal(t, 10, a.Capacity())
}

// Refunds are told in batches: a process's many successes cost Redis a
// call every 100 ms at most, not one each, and none is lost.
func TestRetryBudgetBatchesRefunds(t *testing.T) {
	rdb := newClient(t, startRedis(t).addr)
	f := fleet.New(rdb)
	b := f.RetryBudget("api", 500)
	for b.TryTake(100) {
	}
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	for range 300 {
		b.Refund(1)
	}
	require.NoError(t, f.Close()) // waits for the flush out
	assert.LessOrEqual(t, scriptCalls(t, rdb), int64(2), "300 refunds, told in a call or two")
	require.NoError(t, b.Flush(ctx))
	assert.Equal(t, 300, b.Remaining())
	assert.True(t, b.TryTake(300), "every refund reached Redis")
	assert.False(t, b.TryTake(1))
}

// While Redis cannot answer, a process takes its retries from its share
// of the budget: the capacity over the fleet's size.
func TestRetryBudgetFallsBackToTheProcessShare(t *testing.T) {
	srv := startRedis(t)
	rdb := newClient(t, srv.addr)
	b := newFleet(t, rdb, fleet.WithSize(4)).RetryBudget("api", 100)
	require.True(t, b.TryTake(20), "on Redis: 80 left of 100")
	srv.stop()
	taken := 0
	for b.TryTake(5) {
		taken += 5
	}
	assert.Equal(t, 20, taken, "a quarter of the 80 the fleet held")
	assert.Equal(t, 0, b.Remaining())
	b.Refund(5)
	assert.True(t, b.TryTake(5), "refunds go to the share meanwhile")
}
