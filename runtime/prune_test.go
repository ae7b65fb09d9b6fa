package runtime_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestPruneKeepsHeldRowsAndTokensRising: pruning deletes only rows free for
// longer than the age given; a pruned key acquired again gets a token above
// every token it had.
func TestPruneKeepsHeldRowsAndTokensRising(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Open(t)
	n := newNode(t, tdb.Open(t))
	l := n.lock(t, runtime.LockConfig{Name: "orders", Keyed: true, TTL: 10 * time.Second})
	ctx := context.Background()
	tokens := map[string]int64{}
	for i := 0; i < 5; i++ {
		for r := 0; r < 3; r++ { // a few acquisitions per key
			lease, err := l.Try(ctx, strconv.Itoa(i))
			require.NoError(t, err)
			tokens[lease.Key()] = lease.Token()
			require.NoError(t, lease.Release(ctx))
		}
	}
	held, err := l.Try(ctx, "held")
	require.NoError(t, err)

	pruned, err := l.Prune(ctx, time.Hour)
	require.NoError(t, err)
	assert.Zero(t, pruned, "nothing has been free for an hour")
	time.Sleep(10 * time.Millisecond)
	pruned, err = l.Prune(ctx, 5*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, int64(5), pruned, "the five released keys, not the held one")
	var rows int
	require.NoError(t, admin.QueryRow("SELECT COUNT(*) FROM lockgen_locks WHERE name = 'orders'").Scan(&rows))
	assert.Equal(t, 1, rows)
	require.NoError(t, held.Err())

	for key, before := range tokens {
		lease, err := l.Try(ctx, key)
		require.NoError(t, err)
		assert.Greater(t, lease.Token(), before, "key %s: tokens keep rising across a prune", key)
		require.NoError(t, lease.Release(ctx))
	}
	require.NoError(t, held.Release(ctx))

	plain := n.lock(t, runtime.LockConfig{Name: "plain", TTL: time.Second})
	_, err = plain.Prune(ctx, time.Hour)
	require.ErrorIs(t, err, runtime.ErrInvalid)
}
