package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestSessionPartitionedHolderIsReplacedAfterItsDeadline: a session
// holder partitioned from the server (tcpproxy.Partition: the client gives
// up and closes, the server never learns) is replaced by a waiter as soon
// as the server ends the silent session, IdleBound(TTL) after its last
// statement, and never before the holder's local deadline: the holder is
// told first. With the server's wait_timeout (8 hours) the waiter never
// got the lock (issue 21, item 3).
func TestSessionPartitionedHolderIsReplacedAfterItsDeadline(t *testing.T) {
	tdb := testdb.New(t)
	proxy, viaProxy := testkit.OpenViaProxy(t, tdb)
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: 2 * time.Second, Wait: 30 * time.Second}
	holder := sessionNode(t, viaProxy).lock(t, cfg)
	rival := sessionNode(t, tdb.Open(t)).lock(t, cfg)
	ctx := context.Background()
	lease, err := holder.Try(ctx, "")
	require.NoError(t, err)

	proxy.Partition()
	next, err := rival.Acquire(ctx, "") // waits in GET_LOCK on the server
	require.NoError(t, err, "the server freed the partitioned holder's lock within the rival's 30 s wait")
	got := time.Now()
	defer func() { require.NoError(t, next.Release(ctx)) }()
	assert.False(t, got.Before(lease.LocalDeadline()), "the rival got the lock %v before the holder's local deadline", lease.LocalDeadline().Sub(got))
	require.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost, "the holder knows it lost the lock")
	assert.Greater(t, next.Token(), lease.Token())
	require.ErrorIs(t, lease.Release(ctx), runtime.ErrLeaseLost)
}
