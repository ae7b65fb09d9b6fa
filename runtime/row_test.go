package runtime_test

import (
	"context"
	"database/sql"
	"errors"
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

// rowNode is a node whose store also runs the row strategy.
func rowNode(t *testing.T, db *sql.DB, opts ...runtime.Option) *node {
	t.Helper()
	return sessionNode(t, db, opts...)
}

func rowCfg(name string, wait time.Duration) runtime.LockConfig {
	return runtime.LockConfig{Name: name, Strategy: runtime.StrategyRow, Wait: wait}
}

func TestRowMutualExclusion(t *testing.T) {
	tdb := testdb.New(t)
	cfg := rowCfg("row", time.Minute)
	var locks []*runtime.Lock
	for p := 0; p < 3; p++ {
		locks = append(locks, rowNode(t, tdb.Open(t)).lock(t, cfg))
	}
	contend(t, locks, 6, 10)
}

// TestRowTryHolderAndTokens: Try does not wait for a held row (NOWAIT),
// Holder sees the live holding although it is not committed, and every
// acquisition's token exceeds the one before.
func TestRowTryHolderAndTokens(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	l := rowNode(t, tdb.Open(t), runtime.WithOwner("holder")).lock(t, rowCfg("r", 0))
	lo := rowNode(t, tdb.Open(t), runtime.WithOwner("other")).lock(t, rowCfg("r", 0))

	var last int64
	for i := 0; i < 3; i++ {
		lease, err := l.Try(ctx, "")
		require.NoError(t, err)
		assert.Greater(t, lease.Token(), last)
		last = lease.Token()
		assert.NotNil(t, lease.Tx())

		start := time.Now()
		_, err = lo.Try(ctx, "")
		require.ErrorIs(t, err, runtime.ErrNotAcquired)
		assert.Less(t, time.Since(start), 900*time.Millisecond, "Try must not wait for the row lock")
		h, err := lo.Holder(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, runtime.Holder{Held: true, Owner: "holder", Token: lease.Token()}, h)

		require.NoError(t, lease.Release(ctx))
		h, err = lo.Holder(ctx, "")
		require.NoError(t, err)
		assert.False(t, h.Held)
		require.ErrorIs(t, lease.Release(ctx), runtime.ErrReleased, "release twice is an error, not a panic")
	}
	next, err := lo.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, next.Token(), last)
	require.NoError(t, next.Release(ctx))
}

// TestRowWaitEndsWithNotAcquired: a waiter gives up after its wait (rounded
// up to whole seconds on the server) and is served as soon as the holder
// releases within it.
func TestRowWait(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	holder := rowNode(t, tdb.Open(t)).lock(t, rowCfg("w", 0))
	waiter := rowNode(t, tdb.Open(t)).lock(t, rowCfg("w", time.Second))

	lease, err := holder.Try(ctx, "")
	require.NoError(t, err)
	start := time.Now()
	_, err = waiter.Acquire(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)

	got := make(chan error, 1)
	go func() {
		l2, err := waiter.Acquire(ctx, "")
		if err == nil {
			if l2.Token() <= lease.Token() {
				err = fmt.Errorf("token %d after %d", l2.Token(), lease.Token())
			}
			err = errors.Join(err, l2.Release(ctx))
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter queue on the server
	require.NoError(t, lease.Release(ctx))
	require.NoError(t, <-got)
}

// TestRowWithTxCommitsAtomically: fn's writes in the holding's transaction
// commit with the release when fn succeeds, and roll back (with the token
// bump) when fn fails or panics; the lock is free afterwards either way.
func TestRowWithTxCommitsAtomically(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	tdb.Exec(t, "CREATE TABLE row_writes (v INT NOT NULL)")
	tdb.Grant(t, "row_writes")
	db := tdb.Open(t)
	l := rowNode(t, db).lock(t, rowCfg("tx", time.Minute))
	count := func() (n int) {
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM row_writes").Scan(&n))
		return n
	}
	write := func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO row_writes VALUES (1)")
		require.NoError(t, err)
		assert.Equal(t, 0, count(), "not visible before the release commits")
		require.NoError(t, lease.Guard(ctx, tx), "Guard in the holding's own transaction")
		other, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.ErrorIs(t, lease.Guard(ctx, other), runtime.ErrInvalid, "Guard in another transaction would wait for itself")
		require.NoError(t, other.Rollback())
		return nil
	}
	require.NoError(t, l.WithTx(ctx, "", write))
	assert.Equal(t, 1, count())

	boom := errors.New("boom")
	err := l.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO row_writes VALUES (2)")
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 1, count(), "fn's error rolls its writes back")

	assert.Panics(t, func() {
		_ = l.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO row_writes VALUES (3)")
			require.NoError(t, err)
			panic("in fn")
		})
	})
	assert.Equal(t, 1, count(), "a panic rolls fn's writes back")

	// Nested WithTx with fn's context joins the holding and its transaction.
	require.NoError(t, l.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
		return l.WithTx(ctx, "", func(ctx context.Context, inner *sql.Tx, innerLease *runtime.Lease) error {
			assert.Same(t, tx, inner)
			assert.Same(t, lease, innerLease)
			_, err := inner.ExecContext(ctx, "INSERT INTO row_writes VALUES (4)")
			return err
		})
	}))
	assert.Equal(t, 2, count())

	lease, err := l.Try(ctx, "")
	require.NoError(t, err, "free after every kind of ending")
	require.NoError(t, lease.Release(ctx))
}

// TestRowKilledHolder: when the holder's connection dies, the server rolls
// its transaction back and frees the lock; the next holder's token is
// still greater than the dead holder's (whose token bump was rolled back),
// the dead holder's writes are gone, and its With reports ErrLeaseLost.
func TestRowKilledHolder(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	tdb.Exec(t, "CREATE TABLE row_writes (v INT NOT NULL)")
	tdb.Grant(t, "row_writes")
	db := tdb.Open(t)
	l := rowNode(t, db).lock(t, rowCfg("k", time.Minute))
	other := rowNode(t, tdb.Open(t)).lock(t, rowCfg("k", time.Minute))

	// A committed holding first, so the row exists when the holder dies.
	require.NoError(t, l.With(ctx, "", func(context.Context, *runtime.Lease) error { return nil }))
	var deadToken int64
	err := l.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
		deadToken = lease.Token()
		_, err := tx.ExecContext(ctx, "INSERT INTO row_writes VALUES (1)")
		require.NoError(t, err)
		var id int64
		require.NoError(t, tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
		_, err = tdb.Admin(t).ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		require.NoError(t, err)

		next, err := other.Acquire(ctx, "")
		require.NoError(t, err, "the server freed the dead holder's lock")
		assert.Greater(t, next.Token(), deadToken, "a rolled-back token bump is never handed out again")
		require.NoError(t, next.Release(ctx))
		return nil
	})
	require.ErrorIs(t, err, runtime.ErrLeaseLost)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM row_writes").Scan(&n))
	assert.Zero(t, n, "the dead holder's writes rolled back with its lock")
}

// TestRowRestoresLockWait: a pooled connection gets its own
// innodb_lock_wait_timeout back after a holding that changed it.
func TestRowRestoresLockWait(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	db.SetMaxOpenConns(1)
	var before int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&before))
	l := rowNode(t, db).lock(t, rowCfg("lw", 7*time.Second))
	require.NoError(t, l.With(ctx, "", func(ctx context.Context, lease *runtime.Lease) error {
		var inTx int64
		require.NoError(t, lease.Tx().QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&inTx))
		assert.Equal(t, before, inTx, "fn's statements run with the connection's own lock wait")
		return nil
	}))
	var after int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&after))
	assert.Equal(t, before, after)
}

// TestRowNeverTakesALiveLease: during a rolling change from lease to row,
// a row holder never takes a row held by a live lease.
func TestRowNeverTakesALiveLease(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	leaseLock := rowNode(t, tdb.Open(t)).lock(t, runtime.LockConfig{Name: "mix", TTL: time.Minute})
	rowLock := rowNode(t, tdb.Open(t)).lock(t, rowCfg("mix", 0))
	lease, err := leaseLock.Try(ctx, "")
	require.NoError(t, err)
	_, err = rowLock.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	require.NoError(t, lease.Release(ctx))
	held, err := rowLock.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, held.Token(), lease.Token())
	require.NoError(t, held.Release(ctx))
}

func TestRowConfigAndLeader(t *testing.T) {
	tdb := testdb.New(t)
	n := rowNode(t, tdb.Open(t))
	_, err := n.client.Lock(runtime.LockConfig{Name: "x", Strategy: runtime.StrategyRow, RenewEvery: time.Second})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	l := n.lock(t, rowCfg("leader", 0))
	err = l.RunAsLeader(context.Background(), func(context.Context, *runtime.Lease) error { return nil })
	require.ErrorIs(t, err, runtime.ErrInvalid)
	lease := n.lock(t, runtime.LockConfig{Name: "notrow", TTL: time.Second})
	err = lease.WithTx(context.Background(), "", func(context.Context, *sql.Tx, *runtime.Lease) error { return nil })
	require.ErrorIs(t, err, runtime.ErrInvalid)
}

// TestRowStatements counts what a row holding costs the server: Try and
// Acquire are 6 statements each (lock wait and autocommit set, isolation
// level, BEGIN, the lock, the token bump, lock wait restored) once the row
// exists; the release is 3 (row freed, COMMIT, autocommit restored).
func TestRowStatements(t *testing.T) {
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	for _, wait := range []time.Duration{0, time.Second} {
		l := rowNode(t, db).lock(t, rowCfg("count", wait))
		lease, err := l.Acquire(ctx, "") // creates the row, checks for Galera
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))

		before := counter.Count()
		lease, err = l.Acquire(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, int64(6), counter.Count()-before, "acquire with wait %v", wait)
		before = counter.Count()
		require.NoError(t, lease.Release(ctx))
		assert.Equal(t, int64(3), counter.Count()-before, "release")
	}
}

// TestRowHoldingOutlivesItsContext: the holding's transaction does not end
// when the context it was acquired with does (database/sql would roll it
// back), so cancelling that context never lets another holder in.
func TestRowHoldingOutlivesItsContext(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	l := rowNode(t, db).lock(t, rowCfg("ctx", 0))
	other := rowNode(t, tdb.Open(t)).lock(t, rowCfg("ctx", 0))
	ctx, cancel := context.WithCancel(context.Background())
	lease, err := l.Acquire(ctx, "")
	require.NoError(t, err)
	cancel()
	time.Sleep(50 * time.Millisecond) // database/sql's rollback-on-cancel would run by now
	_, err = other.Try(context.Background(), "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired, "still held after its context ended")
	require.NoError(t, lease.Release(ctx))
	assert.Zero(t, db.Stats().InUse, "the pinned connection went back")
}

// TestRowTransactionEndedUnderFn: when the server ends the holding's
// transaction under fn (as a deadlock does; here fn's own ROLLBACK), fn's
// later writes are not committed without the lock, and WithTx reports
// ErrLeaseLost whether fn returns nil or an error.
func TestRowTransactionEndedUnderFn(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	tdb.Exec(t, "CREATE TABLE row_writes (v INT NOT NULL)")
	tdb.Grant(t, "row_writes")
	db := tdb.Open(t)
	l := rowNode(t, db).lock(t, rowCfg("ended", 0))
	for _, fnErr := range []error{nil, errors.New("fn failed")} {
		err := l.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
			_, err := tx.ExecContext(ctx, "ROLLBACK") // the server ends the transaction, lock included
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, "INSERT INTO row_writes VALUES (99)")
			require.NoError(t, err)
			return fnErr
		})
		require.ErrorIs(t, err, runtime.ErrLeaseLost, "fn returned %v", fnErr)
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM row_writes").Scan(&n))
		assert.Zero(t, n, "a write after the lock was gone must not commit")
	}
	assert.Zero(t, db.Stats().InUse, "no pinned connection leaked")
	var autocommit int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@SESSION.autocommit").Scan(&autocommit))
	assert.Equal(t, 1, autocommit, "pooled connections get autocommit back")
}

// TestRowFnCommitsItself: fn committing the holding's transaction (a misuse)
// ends the holding then; the release reports ErrLeaseLost, the lock is not
// left looking held (any strategy can take it), and nothing leaks.
func TestRowFnCommitsItself(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	l := rowNode(t, db).lock(t, rowCfg("misuse", 0))
	err := l.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
		return tx.Commit()
	})
	require.ErrorIs(t, err, runtime.ErrLeaseLost)
	assert.Zero(t, db.Stats().InUse, "no pinned connection leaked")
	h, err := l.Holder(ctx, "")
	require.NoError(t, err)
	assert.False(t, h.Held, "a holding committed by fn is freed, not shown held")

	// Committed, then failed: the release cannot roll back and says so.
	err = l.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
		require.NoError(t, tx.Commit())
		return errors.New("fn failed after committing")
	})
	require.ErrorIs(t, err, runtime.ErrLeaseLost)
	assert.Zero(t, db.Stats().InUse, "no pinned connection leaked")
	h, err = l.Holder(ctx, "")
	require.NoError(t, err)
	assert.False(t, h.Held, "a holding committed by a failing fn is freed too")
	for _, cfg := range []runtime.LockConfig{
		{Name: "misuse", TTL: time.Second},
		{Name: "misuse", Strategy: runtime.StrategySession, TTL: time.Second},
		rowCfg("misuse", 0),
	} {
		lease, err := rowNode(t, tdb.Open(t)).lock(t, cfg).Try(ctx, "")
		require.NoError(t, err, "strategy %s", cfg.Strategy)
		require.NoError(t, lease.Release(ctx))
	}
}

// TestRowTokensStayAboveRolledBackBumps: a row holding that rolls back (fn
// failed) loses its token bump; the next holding of any strategy still gets
// a greater token.
func TestRowTokensStayAboveRolledBackBumps(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	row := rowNode(t, tdb.Open(t)).lock(t, rowCfg("mixed", 0))
	for _, next := range []runtime.LockConfig{
		{Name: "mixed", TTL: time.Second},
		{Name: "mixed", Strategy: runtime.StrategySession, TTL: time.Second},
		rowCfg("mixed", 0),
	} {
		require.NoError(t, row.With(ctx, "", func(context.Context, *runtime.Lease) error { return nil }))
		var rolledBack int64
		err := row.WithTx(ctx, "", func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
			rolledBack = lease.Token()
			return errors.New("fn failed")
		})
		require.Error(t, err)
		lease, err := rowNode(t, tdb.Open(t)).lock(t, next).Try(ctx, "")
		require.NoError(t, err)
		assert.Greater(t, lease.Token(), rolledBack, "strategy %s after a rolled-back row holding", next.Strategy)
		require.NoError(t, lease.Release(ctx))
	}
}

// TestRowWithRollsBackOnError: plain With (not WithTx) on a row lock: writes
// made on lease.Tx() commit when fn returns nil and roll back when fn
// returns an error, as with WithTx (they used to commit either way).
func TestRowWithRollsBackOnError(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	tdb.Exec(t, "CREATE TABLE row_with_writes (v INT NOT NULL)")
	tdb.Grant(t, "row_with_writes")
	db := tdb.Open(t)
	l := rowNode(t, db).lock(t, rowCfg("with", time.Minute))
	write := func(v int, result error) func(ctx context.Context, lease *runtime.Lease) error {
		return func(ctx context.Context, lease *runtime.Lease) error {
			_, err := lease.Tx().ExecContext(ctx, "INSERT INTO row_with_writes VALUES (?)", v)
			require.NoError(t, err)
			return result
		}
	}
	boom := errors.New("boom")
	require.ErrorIs(t, l.With(ctx, "", write(1, boom)), boom)
	require.NoError(t, l.With(ctx, "", write(2, nil)))
	var values []int
	rows, err := db.QueryContext(ctx, "SELECT v FROM row_with_writes ORDER BY v")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		values = append(values, v)
	}
	assert.Equal(t, []int{2}, values, "the failed fn's write rolled back, the other committed")
}
