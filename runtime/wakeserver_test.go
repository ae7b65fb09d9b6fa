package runtime_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// serverWaitCfg is a lease lock whose waiters wait on the server.
func serverWaitCfg(name string) runtime.LockConfig {
	return runtime.LockConfig{Name: name, TTL: 10 * time.Second, Wait: time.Minute, WaitOnServer: true}
}

// wakeHolderConn returns the server connection id holding the wake lock of
// (name, ""), or 0 when it is free.
func wakeHolderConn(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var id sql.NullInt64
	require.NoError(t, db.QueryRow("SELECT IS_USED_LOCK(?)", runtime.WakeLockNameForTest("lockgen_", name, "")).Scan(&id))
	return id.Int64
}

// TestWaitOnServerDoesNotPoll: while a holder in another process holds the
// lock for a while, a waiter with WaitOnServer sends a few statements (one
// try, then GET_LOCK on the holder's wake lock) where a polling waiter sends
// one per backoff step; the release wakes it and it takes the lock.
func TestWaitOnServerDoesNotPoll(t *testing.T) {
	const hold = 2 * time.Second
	for _, tc := range []struct {
		onServer bool
		check    func(t assert.TestingT, e1, e2 any, msgAndArgs ...any) bool
	}{
		{onServer: true, check: assert.LessOrEqual},
		{onServer: false, check: assert.Greater},
	} {
		t.Run(map[bool]string{true: "server", false: "poll"}[tc.onServer], func(t *testing.T) {
			tdb := testdb.New(t)
			ctx := context.Background()
			cfg := serverWaitCfg("wake")
			cfg.WaitOnServer = tc.onServer
			holder := sessionNode(t, tdb.Open(t), runtime.WithOwner("holder")).lock(t, cfg)
			counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
			wdb := sql.OpenDB(counter)
			t.Cleanup(func() { _ = wdb.Close() })
			wnode := sessionNode(t, wdb, runtime.WithOwner("waiter"))
			waiter := wnode.lock(t, cfg)
			require.NoError(t, wnode.client.CheckServer(ctx), "the server probe is not counted")
			base := counter.Count()

			lease, err := holder.Try(ctx, "")
			require.NoError(t, err)
			if tc.onServer {
				assert.NotZero(t, wakeHolderConn(t, tdb.Open(t), "wake"), "the holding holds its wake lock")
			}
			got := make(chan *runtime.Lease, 1)
			go func() {
				next, err := waiter.Acquire(ctx, "")
				assert.NoError(t, err)
				got <- next
			}()
			time.Sleep(hold)
			waited := counter.Count() - base
			require.NoError(t, lease.Release(ctx))
			next := <-got
			require.NotNil(t, next)
			assert.Greater(t, next.Token(), lease.Token())
			tc.check(t, waited, int64(4), "statements sent while waiting %v", hold)
			t.Logf("waiter sent %d statements while waiting %v", waited, hold)
			require.NoError(t, next.Release(ctx))
			assert.Zero(t, wakeHolderConn(t, tdb.Open(t), "wake"), "the release gives the wake lock back")
		})
	}
}

// TestWaitOnServerMutualExclusion: the overlap checker over three nodes
// contending with WaitOnServer: the wake lock never lets two in.
func TestWaitOnServerMutualExclusion(t *testing.T) {
	tdb := testdb.New(t)
	cfg := serverWaitCfg("contended-wake")
	cfg.TTL = 2 * time.Second
	var locks []*runtime.Lock
	for p := 0; p < 3; p++ {
		locks = append(locks, sessionNode(t, tdb.Open(t)).lock(t, cfg))
	}
	contend(t, locks, 8, 10)
}

// TestWaitOnServerHolderWithoutWakeLock: a holder that has no wake lock (a
// node without WaitOnServer) leaves the waiter holding the wake lock and
// polling; when the waiter gets the row its holding keeps that wake lock,
// and a third waiter, on the server, gets the lock at its release.
func TestWaitOnServerHolderWithoutWakeLock(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	probe := tdb.Open(t)
	plain := serverWaitCfg("mixed-wake")
	plain.WaitOnServer = false
	first, err := sessionNode(t, tdb.Open(t)).lock(t, plain).Try(ctx, "")
	require.NoError(t, err)
	assert.Zero(t, wakeHolderConn(t, probe, "mixed-wake"), "a holder without WaitOnServer takes no wake lock")

	second := sessionNode(t, tdb.Open(t), runtime.WithOwner("second")).lock(t, serverWaitCfg("mixed-wake"))
	secondGot := make(chan *runtime.Lease, 1)
	go func() {
		lease, err := second.Acquire(ctx, "")
		assert.NoError(t, err)
		secondGot <- lease
	}()
	require.Eventually(t, func() bool { return wakeHolderConn(t, probe, "mixed-wake") != 0 }, 10*time.Second, 10*time.Millisecond,
		"the waiter holds the free wake lock while it polls")
	waiterConn := wakeHolderConn(t, probe, "mixed-wake")
	require.NoError(t, first.Release(ctx))
	lease := <-secondGot
	require.NotNil(t, lease)
	assert.Equal(t, waiterConn, wakeHolderConn(t, probe, "mixed-wake"), "the holding kept the waiter's wake lock")

	third := sessionNode(t, tdb.Open(t), runtime.WithOwner("third")).lock(t, serverWaitCfg("mixed-wake"))
	thirdGot := make(chan *runtime.Lease, 1)
	go func() {
		lease, err := third.Acquire(ctx, "")
		assert.NoError(t, err)
		thirdGot <- lease
	}()
	time.Sleep(200 * time.Millisecond) // third blocks in GET_LOCK
	require.NoError(t, lease.Release(ctx))
	last := <-thirdGot
	require.NotNil(t, last)
	assert.Greater(t, last.Token(), lease.Token())
	require.NoError(t, last.Release(ctx))
}

// TestWaitOnServerWaiterGivesUp: a waiter whose wait ends gives the wake
// lock back (none is left held by nobody), and reports ErrNotAcquired.
func TestWaitOnServerWaiterGivesUp(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	probe := tdb.Open(t)
	plain := serverWaitCfg("giveup-wake")
	plain.WaitOnServer = false
	held, err := sessionNode(t, tdb.Open(t)).lock(t, plain).Try(ctx, "")
	require.NoError(t, err)
	cfg := serverWaitCfg("giveup-wake")
	cfg.Wait = 300 * time.Millisecond
	_, err = sessionNode(t, tdb.Open(t)).lock(t, cfg).Acquire(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	assert.Zero(t, wakeHolderConn(t, probe, "giveup-wake"), "the waiter gave the wake lock back")
	require.NoError(t, held.Release(ctx))
}

// TestWaitOnServerConfig: WaitOnServer is for lease locks on a store that
// can run GET_LOCK.
func TestWaitOnServerConfig(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	for _, cfg := range []runtime.LockConfig{
		{Name: "x", Strategy: runtime.StrategySession, TTL: time.Second, WaitOnServer: true},
		{Name: "x", Strategy: runtime.StrategyRow, WaitOnServer: true},
	} {
		_, err := sessionNode(t, db).client.Lock(cfg)
		assert.ErrorIs(t, err, runtime.ErrInvalid, "strategy %s", cfg.Strategy)
	}
}

// TestWaitOnServerLocalHolder: while the holder is in the same process, the
// first local waiter waits for the local release instead of pinning a
// second connection in GET_LOCK (a small pool would otherwise starve the
// holder's renewals).
func TestWaitOnServerLocalHolder(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	n := sessionNode(t, db)
	l := n.lock(t, serverWaitCfg("local-wake"))
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	got := make(chan *runtime.Lease, 1)
	go func() {
		next, err := l.Acquire(ctx, "")
		assert.NoError(t, err)
		got <- next
	}()
	require.Eventually(t, func() bool { return runtime.QueueLenForTest(n.client, "local-wake", "") == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the waiter settles into its wait
	assert.Equal(t, 1, db.Stats().InUse, "only the holder's wake lock connection is pinned")
	require.NoError(t, lease.Release(ctx))
	next := <-got
	require.NotNil(t, next)
	assert.Greater(t, next.Token(), lease.Token())
	require.NoError(t, next.Release(ctx))
}

// TestWaitOnServerHoldingKeepsItsLeaseOnASmallPool: a holding's wake lock
// pins a connection for the whole holding. With a pool of one, that is the
// only connection; with a pool of two, a waiter on another lock pins the
// other. The holding must still renew (on its pinned connection) for
// several TTLs, and release without waiting for the pool.
func TestWaitOnServerHoldingKeepsItsLeaseOnASmallPool(t *testing.T) {
	const ttl = time.Second
	for _, pool := range []int{1, 2} {
		t.Run(fmt.Sprintf("pool=%d", pool), func(t *testing.T) {
			tdb := testdb.New(t)
			ctx := context.Background()
			small := tdb.Open(t)
			small.SetMaxOpenConns(pool)
			n := sessionNode(t, small, runtime.WithOwner("small"))
			cfg := runtime.LockConfig{Name: "a", TTL: ttl, WaitOnServer: true}
			lease, err := n.lock(t, cfg).Try(ctx, "")
			require.NoError(t, err)
			observer := tdb.Open(t)
			require.NotZero(t, wakeHolderConn(t, observer, "a"), "the holding holds its wake lock")

			var waited chan error
			var other *runtime.Lease
			if pool == 2 {
				// Another node holds b; this node waits for it on the
				// server, pinning the pool's second connection.
				bcfg := runtime.LockConfig{Name: "b", TTL: 10 * time.Second, Wait: time.Minute, WaitOnServer: true}
				other, err = sessionNode(t, tdb.Open(t), runtime.WithOwner("other")).lock(t, bcfg).Try(ctx, "")
				require.NoError(t, err)
				waiter := n.lock(t, bcfg)
				waited = make(chan error, 1)
				go func() {
					got, err := waiter.Acquire(ctx, "")
					if err == nil {
						err = got.Release(ctx)
					}
					waited <- err
				}()
				require.Eventually(t, func() bool { return small.Stats().InUse == pool }, 10*time.Second, 10*time.Millisecond,
					"the waiter pins the pool's other connection")
			}

			time.Sleep(3 * ttl)
			require.NoError(t, lease.Err(), "the holding lost its lease to its own wake lock")
			watch := sessionNode(t, observer).lock(t, cfg)
			h, err := watch.Holder(ctx, "") // not through the small pool
			require.NoError(t, err)
			assert.True(t, h.Held)
			assert.Equal(t, lease.Token(), h.Token)
			assert.Greater(t, h.Remaining, ttl/2, "renewed lately")

			if other != nil {
				require.NoError(t, other.Release(ctx))
			}
			require.NoError(t, lease.Release(ctx))
			assert.Zero(t, wakeHolderConn(t, observer, "a"), "the release gives the wake lock back")
			h, err = watch.Holder(ctx, "")
			require.NoError(t, err)
			assert.False(t, h.Held, "the release freed the row")
			if waited != nil {
				select {
				case err := <-waited:
					require.NoError(t, err)
				case <-time.After(20 * time.Second):
					t.Fatal("the waiter never got b")
				}
			}
		})
	}
}
