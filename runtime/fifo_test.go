package runtime_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestLocalWaitersAreServedInArrivalOrder: with a clock whose timers never
// fire, waiters move only when woken by a release; they get the lock in the
// order they arrived, and only the first of them queries the database while
// they wait.
func TestLocalWaitersAreServedInArrivalOrder(t *testing.T) {
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	n := newNode(t, db, runtime.WithClock(frozenClock{now: time.Now()}))
	l := n.lock(t, runtime.LockConfig{Name: "fifo", TTL: time.Minute, Wait: time.Hour})
	ctx := context.Background()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)

	const waiters = 5
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	before := counter.Count()
	for i := 1; i <= waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, l.With(ctx, "", func(context.Context, *runtime.Lease) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			}))
		}()
		require.Eventually(t, func() bool { return runtime.QueueLenForTest(n.client, "fifo", "") == i }, 10*time.Second, time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int64(1), counter.Count()-before, "only the first waiter tried the database while the lock was held")
	require.NoError(t, lease.Release(ctx))
	wg.Wait()
	assert.Equal(t, []int{1, 2, 3, 4, 5}, order)
	assert.Zero(t, runtime.WaitersForTest(n.client))
}
