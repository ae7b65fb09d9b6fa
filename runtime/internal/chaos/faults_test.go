package chaos

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// A lockrows fault whose locking read waits for a row another transaction
// holds has locked the rows before it already: its span must say so from
// then on, or the checker blames their workers for heartbeats the fault
// held up (a CI run saw this: two runs locked while the read waited for a
// third were exempt only from when the read returned, after their
// handlers had been told their leases were lost).
func TestLockRowsIsInForceWhileItsReadWaits(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	ctx := context.Background()
	tdb.Exec(t, "CREATE TABLE runs (id BIGINT PRIMARY KEY, worker VARCHAR(64) NOT NULL, state VARCHAR(16) NOT NULL, deadline DATETIME(6) NOT NULL)")
	tdb.Exec(t, "INSERT INTO runs VALUES (1, 'p2.1', 'running', '2026-01-01 00:00:01'), (2, 'p2.1', 'running', '2026-01-01 00:00:02'), (3, 'p4.1', 'running', '2026-01-01 00:00:03'), (4, 'p4.1', 'completed', '2026-01-01 00:00:00')")

	// Another transaction holds run 3's row, the last the read reaches.
	blocker, err := admin.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	var id int64
	require.NoError(t, blocker.QueryRowContext(ctx, "SELECT id FROM runs WHERE id = 3 FOR UPDATE").Scan(&id))

	var sp Span
	done := make(chan error, 1)
	go func() { done <- lockRunRows(ctx, admin, tdb.Name+".runs", 3, 0, &sp) }()

	// Wait until the waiting read holds run 1's row.
	var locked int64
	for deadline := time.Now().Add(10 * time.Second); ; {
		require.True(t, time.Now().Before(deadline), "run 1's row was never locked by the fault's read")
		if heldElsewhere(t, admin, 1) {
			locked = Mono()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the fault's read returned while run 3's row was held: %v", err)
	default:
	}
	require.NoError(t, blocker.Commit())
	require.NoError(t, <-done)

	require.ElementsMatch(t, []int64{1, 2, 3}, sp.Runs)
	require.ElementsMatch(t, []int{2, 2, 4}, sp.Owners)
	require.LessOrEqual(t, sp.From, locked, "the span began after run 1's row was already locked")
}

// heldElsewhere reports whether another transaction holds run id's row:
// locking it without waiting fails with a lock conflict.
func heldElsewhere(t *testing.T, db *sql.DB, id int64) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var got int64
	err = tx.QueryRowContext(ctx, "SELECT id FROM runs WHERE id = ? FOR UPDATE NOWAIT", id).Scan(&got)
	if err == nil {
		return false
	}
	// MySQL: ER_LOCK_NOWAIT; MariaDB: ER_LOCK_WAIT_TIMEOUT.
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me) && (me.Number == 3572 || me.Number == 1205), "not a lock conflict: %v", err)
	return true
}
