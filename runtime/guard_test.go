package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/probe"
)

const fencedSchema = `CREATE TABLE fenced (id INT PRIMARY KEY, value VARCHAR(20) NOT NULL, token BIGINT NOT NULL)`

// TestGuardRejectsPausedHolder: a holder "paused" past its TTL (its clock
// is frozen: no renewal, no local deadline, like a long GC pause) cannot
// commit a guarded write once a new holder has acquired the lock.
func TestGuardRejectsPausedHolder(t *testing.T) {
	tdb := testdb.New(t)
	tdb.Exec(t, fencedSchema)
	tdb.Grant(t, "fenced")
	dbA, dbB := tdb.Open(t), tdb.Open(t)
	cfg := runtime.LockConfig{Name: "fenced", TTL: 300 * time.Millisecond}
	paused := newNode(t, dbA, runtime.WithClock(frozenClock{now: time.Now()}))
	fresh := newNode(t, dbB)
	ctx := context.Background()

	old, err := paused.lock(t, cfg).Try(ctx, "")
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond) // the old holder is paused past its TTL
	next, err := fresh.lock(t, cfg).Try(ctx, "")
	require.NoError(t, err, "the row expired, so a new holder gets it")
	require.NoError(t, old.Err(), "the paused holder has not noticed anything")

	tx, err := dbA.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO fenced VALUES (1, 'stale', ?)", old.Token())
	require.NoError(t, err)
	require.ErrorIs(t, old.Guard(ctx, tx), runtime.ErrLeaseLost)
	require.NoError(t, tx.Rollback())

	tx, err = dbB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, next.Guard(ctx, tx))
	_, err = tx.ExecContext(ctx, "INSERT INTO fenced VALUES (1, 'fresh', ?)", next.Token())
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	var value string
	require.NoError(t, dbB.QueryRow("SELECT value FROM fenced WHERE id = 1").Scan(&value))
	assert.Equal(t, "fresh", value)
	require.NoError(t, next.Release(ctx))
	require.ErrorIs(t, old.Release(ctx), runtime.ErrLeaseLost)
}

// TestGuardHoldsOffNewHolderUntilCommit: once Guard passed, the lock row is
// share-locked: even after the lease's row expires, a new holder's acquire
// waits until the guarded transaction commits, and then gets a higher token.
func TestGuardHoldsOffNewHolderUntilCommit(t *testing.T) {
	tdb := testdb.New(t)
	tdb.Exec(t, fencedSchema)
	tdb.Grant(t, "fenced")
	dbA, dbB := tdb.Open(t), tdb.Open(t)
	cfg := runtime.LockConfig{Name: "held-off", TTL: 300 * time.Millisecond}
	paused := newNode(t, dbA, runtime.WithClock(frozenClock{now: time.Now()}))
	rival := newNode(t, dbB)
	ctx := context.Background()

	lease, err := paused.lock(t, cfg).Try(ctx, "")
	require.NoError(t, err)
	tx, err := dbA.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, lease.Guard(ctx, tx))
	time.Sleep(400 * time.Millisecond) // the row expires while the guarded tx is open

	type result struct {
		token int64
		err   error
	}
	got := make(chan result, 1)
	go func() {
		// A longer TTL than the wait for the guarded transaction, so the
		// slow acquire is still a lease when it returns.
		next, err := rival.lock(t, runtime.LockConfig{Name: cfg.Name, TTL: 5 * time.Second}).Try(ctx, "")
		if err != nil {
			got <- result{err: err}
			return
		}
		got <- result{token: next.Token(), err: next.Release(ctx)}
	}()
	select {
	case r := <-got:
		t.Fatalf("the rival acquired (token %d, err %v) while the guarded transaction was open", r.token, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO fenced VALUES (1, 'guarded', ?)", lease.Token())
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	r := <-got
	require.NoError(t, r.err)
	assert.Greater(t, r.token, lease.Token())
	require.ErrorIs(t, lease.Release(ctx), runtime.ErrLeaseLost)
}

func TestGuardMisuse(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	n := newNode(t, db)
	ctx := context.Background()
	lease, err := n.lock(t, runtime.LockConfig{Name: "g", TTL: time.Second}).Try(ctx, "")
	require.NoError(t, err)
	require.ErrorIs(t, lease.Guard(ctx, nil), runtime.ErrInvalid)
	require.NoError(t, lease.Release(ctx))
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	require.ErrorIs(t, lease.Guard(ctx, tx), runtime.ErrReleased)
}

// galeraLeaseStore is a store on a node that reports wsrep_on. It hides its
// pool (driver.Target.DB), so the runtime skips the server probe, which
// would ask the real server's wsrep_on instead.
type galeraLeaseStore struct{ driver.Store }

func (galeraLeaseStore) ServerGalera(context.Context) (bool, error) { return true, nil }
func (galeraLeaseStore) Server() driver.Target                      { return driver.Target{} }

// TestGuardRefusedOnGalera: Galera does not replicate LOCK IN SHARE MODE,
// so a guarded transaction on one node could commit after a new holder
// acquired on another; Guard says so (ErrUnsupported) instead of passing.
// The lease itself works there.
func TestGuardRefusedOnGalera(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	c, err := runtime.NewClient(galeraLeaseStore{lockgendb.NewStore(db)})
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "guard-galera", TTL: 5 * time.Second})
	require.NoError(t, err)
	ctx := context.Background()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err, "lease works on Galera")
	defer lease.Release(ctx)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	err = lease.Guard(ctx, tx)
	require.ErrorIs(t, err, runtime.ErrUnsupported)
	assert.Contains(t, err.Error(), "Galera")
}

// TestGuardRefusedOnClusters: Group Replication, like Galera, certifies
// write sets only, so Guard's shared lock holds off acquires on its own
// member alone; with the probe's answer for a Group Replication member (or
// a Galera node), Guard says so (ErrUnsupported) instead of passing, and a
// lone server keeps Guard. The lease itself works on both clusters.
func TestGuardRefusedOnClusters(t *testing.T) {
	for _, tc := range []struct {
		cluster probe.Cluster
		refused string
	}{
		{probe.NoCluster, ""},
		{probe.GroupReplication, "Group Replication"},
		{probe.Galera, "Galera"},
	} {
		t.Run(string(tc.cluster), func(t *testing.T) {
			tdb := testdb.New(t)
			db := tdb.Open(t)
			c, err := runtime.NewClient(lockgendb.NewStore(db))
			require.NoError(t, err)
			l, err := c.Lock(runtime.LockConfig{Name: "guard-cluster", TTL: 5 * time.Second})
			require.NoError(t, err)
			ctx := context.Background()
			lease, err := l.Try(ctx, "") // probes the server
			require.NoError(t, err)
			defer lease.Release(ctx)
			runtime.ReportClusterForTest(c, tc.cluster)
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer tx.Rollback()
			err = lease.Guard(ctx, tx)
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, runtime.ErrUnsupported)
			assert.Contains(t, err.Error(), tc.refused)
			assert.Contains(t, err.Error(), "fencing token")
		})
	}
}
