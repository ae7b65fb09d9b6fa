package runtime_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestPruneKeepsHeldRowsAndTokensRising: pruning deletes only rows free for
// longer than the age given; a pruned key acquired again gets a token above
// every token it had. For session locks the released rows keep their
// session mark, and Prune deletes them once their server-side lock is free
// and their token old enough, never the row of a live holding.
func TestPruneKeepsHeldRowsAndTokensRising(t *testing.T) {
	for _, strategy := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategySession} {
		t.Run(string(strategy), func(t *testing.T) {
			tdb := testdb.New(t)
			admin := tdb.Admin(t)
			var n *node
			name := "orders"
			if strategy == runtime.StrategySession {
				n = sessionNode(t, tdb.Open(t))
				name = uniqueName(t, tdb) // session lock names are server-wide
			} else {
				n = newNode(t, tdb.Open(t))
			}
			ttl := 500 * time.Millisecond
			l := n.lock(t, runtime.LockConfig{Name: name, Keyed: true, Strategy: strategy, TTL: ttl})
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
			if strategy == runtime.StrategySession {
				var marked int
				require.NoError(t, admin.QueryRow("SELECT COUNT(*) FROM lockgen_locks WHERE name = ? AND expires_at = '9999-12-31 23:59:59'", name).Scan(&marked))
				require.Equal(t, 6, marked, "released session holdings keep their mark")
			}

			pruned, err := l.Prune(ctx, time.Hour)
			require.NoError(t, err)
			assert.Zero(t, pruned, "nothing has been free for an hour")
			wait := ttl + 50*time.Millisecond
			if strategy == runtime.StrategySession {
				// A key's third holding took its token from the reservation
				// its second armed: the row's token, the bound, is ahead of
				// the clock by up to a second's worth of microseconds.
				wait += time.Second
			}
			time.Sleep(wait)
			pruned, err = l.Prune(ctx, ttl)
			require.NoError(t, err)
			assert.Equal(t, int64(5), pruned, "the five released keys, not the held one")
			var rows int
			require.NoError(t, admin.QueryRow("SELECT COUNT(*) FROM lockgen_locks WHERE name = ?", name).Scan(&rows))
			assert.Equal(t, 1, rows)
			require.NoError(t, held.Err())

			for key, before := range tokens {
				lease, err := l.Try(ctx, key)
				require.NoError(t, err)
				assert.Greater(t, lease.Token(), before, "key %s: tokens keep rising across a prune", key)
				require.NoError(t, lease.Release(ctx))
			}
			require.NoError(t, held.Release(ctx))

			plain := n.lock(t, runtime.LockConfig{Name: "plain", Strategy: strategy, TTL: time.Second})
			_, err = plain.Prune(ctx, time.Hour)
			require.ErrorIs(t, err, runtime.ErrInvalid)
		})
	}
}

// TestPruneWaitsOnNoHeldRow: a transaction that keeps one key's row locked
// (a row-strategy holding, an operator's SELECT … FOR UPDATE, a statement
// stranded on a dead connection) must neither stop Prune nor, through it,
// acquisitions of the lock's other keys. A DELETE over the lock's range of
// keys (REPEATABLE READ, the pool's default) locked every row it read,
// waited on the held one for the server's lock wait timeout, and kept the
// keys it had already read locked meanwhile.
func TestPruneWaitsOnNoHeldRow(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	n := newNode(t, tdb.Open(t))
	ttl := time.Second
	l := n.lock(t, runtime.LockConfig{Name: "orders", Keyed: true, TTL: ttl})
	ctx := context.Background()
	for _, key := range []string{"a", "c", "e"} {
		lease, err := l.Try(ctx, key)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	}
	// Free, and their newest tokens issued, an hour ago: all three are prunable.
	_, err := admin.Exec("UPDATE lockgen_locks SET expires_at = expires_at - INTERVAL 1 HOUR, token = token - 3600000000 WHERE name = 'orders'")
	require.NoError(t, err)

	tx, err := admin.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var key string
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT lock_key FROM lockgen_locks WHERE name = 'orders' AND lock_key = 'c' FOR UPDATE").Scan(&key))

	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pruned, err := l.Prune(pctx, ttl)
	require.NoError(t, err, "Prune waited on the held row")
	assert.Equal(t, int64(2), pruned, "a and e; c is held")
	for _, key := range []string{"a", "b", "d"} { // a pruned key, and new keys beside the held one
		lease, err := l.Try(pctx, key)
		require.NoError(t, err, "key %s", key)
		require.NoError(t, lease.Release(ctx))
	}
	require.NoError(t, tx.Rollback())
	var keys []string
	rows, err := admin.Query("SELECT lock_key FROM lockgen_locks WHERE name = 'orders' ORDER BY lock_key")
	require.NoError(t, err)
	for rows.Next() {
		require.NoError(t, rows.Scan(&key))
		keys = append(keys, key)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"a", "b", "c", "d"}, keys, "c was kept while held")
}

// untilWaiting waits until a statement of this test's database waits for
// an InnoDB lock: the generated statement named query.
func untilWaiting(t *testing.T, admin *sql.DB, query string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := admin.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX t
JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE p.DB = DATABASE() AND t.trx_state = 'LOCK WAIT' AND LOCATE(?, t.trx_query) > 0`, "-- name: "+query+" ").Scan(&n)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s statement waits for a lock (last error: %v)", query, err)
		}
		// MariaDB refreshes INNODB_TRX only when it was last read more
		// than 100 ms ago: polling faster would read a stale copy forever.
		time.Sleep(150 * time.Millisecond)
	}
}

// TestPruneKeepsATokenAWaitingAcquisitionHasNotSeen: an acquisition's token
// comes from the database clock at its statement's start, so a statement
// that waits in the row lock queue carries a clock from before everything
// that happens while it waits. Here a row-strategy holding (a node midway
// through a change of strategy, paused between its lock and its token bump)
// has a prunable row locked; Prune runs, and then a lease acquisition
// queues behind the holding; the holding takes a token (after the
// acquisition's statement started), releases and commits. Prune must not
// have deleted that row, or the waiting acquisition inserts a fresh row
// with its older clock: a token below the holding's, handed out after it.
func TestPruneKeepsATokenAWaitingAcquisitionHasNotSeen(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	db := tdb.Open(t)
	n := newNode(t, db)
	ttl := 10 * time.Second
	l := n.lock(t, runtime.LockConfig{Name: "orders", Keyed: true, TTL: ttl})
	ctx := context.Background()
	lease, err := l.Try(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
	// Free, and its newest token issued, an hour ago: prunable.
	_, err = admin.Exec("UPDATE lockgen_locks SET expires_at = expires_at - INTERVAL 1 HOUR, token = token - 3600000000 WHERE name = 'orders'")
	require.NoError(t, err)

	// The row holding: the row strategy's own statements, one at a time.
	rs := lockgendb.NewStore(tdb.Open(t))
	rtx, err := rs.RowBegin(ctx, 10*time.Second, 0)
	require.NoError(t, err)
	defer func() { _ = rtx.Rollback() }()
	require.NoError(t, rtx.LockWait(ctx, "orders", "k"))

	pruned, err := l.Prune(ctx, ttl)
	require.NoError(t, err)
	assert.Zero(t, pruned, "Prune deleted a row a holding has locked")
	type result struct {
		lease *runtime.Lease
		err   error
	}
	acquired := make(chan result, 1)
	go func() {
		lease, err := l.Try(ctx, "k")
		acquired <- result{lease, err}
	}()
	untilWaiting(t, admin, "LeaseAcquire") // its clock is now older than the bump below

	token, err := rtx.Take(ctx, "orders", "k", "row-holder")
	require.NoError(t, err)
	require.NotZero(t, token)
	ok, err := rtx.Free(ctx, driver.LeaseID{Name: "orders", Key: "k", Owner: "row-holder", Token: token})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, rtx.Commit())

	got := <-acquired
	require.NoError(t, got.err)
	defer func() { _ = got.lease.Release(ctx) }()
	assert.Greater(t, got.lease.Token(), token, "the acquisition after the row holding got a lower token")
}

// TestPruneRefusesAgesBelowTheTTL: an acquisition whose answer takes less
// than TTL − SafetyMargin is used, however long it waited on the server, so
// Prune refuses ages that could delete a row such a statement has not seen.
func TestPruneRefusesAgesBelowTheTTL(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	ttl := 2 * time.Second
	l := n.lock(t, runtime.LockConfig{Name: "orders", Keyed: true, TTL: ttl})
	ctx := context.Background()
	for _, age := range []time.Duration{0, 5 * time.Millisecond, ttl - time.Microsecond} {
		_, err := l.Prune(ctx, age)
		require.ErrorIs(t, err, runtime.ErrInvalid, "age %v", age)
	}
	_, err := l.Prune(ctx, ttl)
	require.NoError(t, err)

	row := n.lock(t, runtime.LockConfig{Name: "rows", Keyed: true, Strategy: runtime.StrategyRow})
	_, err = row.Prune(ctx, 0) // row holdings take their token after their wait
	require.NoError(t, err)
}

// TestSessionTokenThatWaitedPastTheTTLIsGivenBack: a session holding's token
// statement (run after GET_LOCK) that waits for the lock row longer than
// TTL − SafetyMargin carries a clock older than Prune's bound allows for, so
// the holding is never used: the client gives the statement up after one
// TTL (every acquisition statement is bounded) and reports the lock busy.
// The server may still run the abandoned statement once the row is free,
// marking the row with a token nobody holds; its session is gone, so the
// server-side lock frees and the next holder takes the row over, with a
// greater token.
func TestSessionTokenThatWaitedPastTheTTLIsGivenBack(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	n := sessionNode(t, tdb.Open(t))
	ttl := 300 * time.Millisecond
	l := n.lock(t, runtime.LockConfig{Name: uniqueName(t, tdb), Keyed: true, Strategy: runtime.StrategySession, TTL: ttl})
	ctx := context.Background()
	lease, err := l.Try(ctx, "k")
	require.NoError(t, err)
	before := lease.Token()
	require.NoError(t, lease.Release(ctx))

	// A long lock wait: another transaction keeps the row locked for two
	// TTLs while the token statement waits for it.
	tx, err := admin.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var token int64
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT token FROM lockgen_locks WHERE name = ? AND lock_key = 'k' FOR UPDATE", l.Config().Name).Scan(&token))
	require.Equal(t, before, token)
	type result struct {
		lease *runtime.Lease
		err   error
	}
	acquired := make(chan result, 1)
	go func() {
		lease, err := l.Try(ctx, "k")
		acquired <- result{lease, err}
	}()
	untilWaiting(t, admin, "SessionToken")
	time.Sleep(2 * ttl)
	require.NoError(t, tx.Commit())

	got := <-acquired
	if got.lease != nil {
		_ = got.lease.Release(ctx)
	}
	require.ErrorIs(t, got.err, runtime.ErrNotAcquired)
	require.Eventually(t, func() bool {
		lease, err = l.Try(ctx, "k")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the lock is free again once the abandoned statement's session is gone: %v", err)
	var stored int64
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT token FROM lockgen_locks WHERE name = ? AND lock_key = 'k'", l.Config().Name).Scan(&stored))
	assert.GreaterOrEqual(t, stored, lease.Token(), "the row's token is the new holding's, or the bound of the reservation it armed")
	assert.Greater(t, lease.Token(), before)
	require.NoError(t, lease.Release(ctx))
}

// TestPruneReadsPastHeldSessionMarks: more old marks than one prune batch
// whose session locks are held are kept, and Prune returns (it read the
// same batch of held marks again and again, for good, before it paged by
// key) having deleted the free marks after them.
func TestPruneReadsPastHeldSessionMarks(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	n := sessionNode(t, tdb.Open(t))
	name := "held-" + tdb.Name[len(tdb.Name)-6:] // lock names are server-wide
	l := n.lock(t, runtime.LockConfig{Name: name, Keyed: true, Strategy: runtime.StrategySession, TTL: time.Second})
	ctx := context.Background()
	holder, err := admin.Conn(ctx) // one session may hold many named locks
	require.NoError(t, err)
	defer holder.Close()
	old := time.Now().Add(-time.Hour).UnixMicro()
	var keys []string
	for i := 0; i <= runtime.PruneBatch; i++ {
		keys = append(keys, fmt.Sprintf("a%05d", i))
	}
	for _, k := range keys {
		var got int
		require.NoError(t, holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", runtime.ServerLockName("lockgen_", name, k, false)).Scan(&got))
		require.Equal(t, 1, got)
	}
	defer func() {
		for _, k := range keys {
			_, _ = holder.ExecContext(ctx, "DO RELEASE_LOCK(?)", runtime.ServerLockName("lockgen_", name, k, false))
		}
	}()
	for _, k := range append(slices.Clone(keys), "z1", "z2") {
		_, err := admin.ExecContext(ctx, "INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at) VALUES (?, ?, 'gone', ?, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, '9999-12-31 23:59:59')", name, k, old)
		require.NoError(t, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pruned, err := l.Prune(pctx, time.Second)
	require.NoError(t, err)
	assert.Equal(t, int64(2), pruned, "the two free marks after the held ones")
	var rows int
	require.NoError(t, admin.QueryRow("SELECT COUNT(*) FROM lockgen_locks WHERE name = ?", name).Scan(&rows))
	assert.Equal(t, len(keys), rows, "every held mark kept")
}

// TestPruneWaitsOnNoRowOfAnotherLock: a row of another lock that a
// transaction holds (a row-strategy holding, say) stops neither Prune's
// DELETE of free rows nor of session marks: both failed with 1205 (MySQL
// for the marks, both servers for the free rows), their DELETE planned as
// a scan of the small table, before they deleted by primary key.
func TestPruneWaitsOnNoRowOfAnotherLock(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	n := sessionNode(t, tdb.Open(t))
	free := n.lock(t, runtime.LockConfig{Name: "free", Keyed: true, TTL: time.Second})
	// Session lock names are server-wide: a name no other test uses.
	marks := n.lock(t, runtime.LockConfig{Name: "marks-" + tdb.Name[len(tdb.Name)-6:], Keyed: true, Strategy: runtime.StrategySession, TTL: time.Second})
	ctx := context.Background()
	old := time.Now().Add(-time.Hour).UnixMicro()
	for i := 0; i < 50; i++ {
		_, err := admin.ExecContext(ctx, "INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at) VALUES ('free', ?, '', 1, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)", fmt.Sprintf("k%02d", i))
		require.NoError(t, err)
		_, err = admin.ExecContext(ctx, "INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at) VALUES (?, ?, 'gone', ?, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, '9999-12-31 23:59:59')", marks.Config().Name, fmt.Sprintf("k%02d", i), old)
		require.NoError(t, err)
	}
	_, err := admin.ExecContext(ctx, "INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at) VALUES ('other', 'k', 'x', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	require.NoError(t, err)
	other, err := admin.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.ExecContext(ctx, "SELECT token FROM lockgen_locks WHERE name = 'other' AND lock_key = 'k' FOR UPDATE")
	require.NoError(t, err)
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, l := range []*runtime.Lock{free, marks} {
		pruned, err := l.Prune(pctx, time.Second)
		require.NoError(t, err, l.Config().Name)
		assert.Equal(t, int64(50), pruned, l.Config().Name)
	}
}
