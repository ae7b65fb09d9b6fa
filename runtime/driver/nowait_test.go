package driver

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestNoWaitOnTheServer: on MariaDB the no-wait form of an UPDATE fails at
// once (1205) on a row another transaction holds, writes nothing, falls
// back, and is tried again next time; on MySQL the server refuses the form
// (1064), and the NoWait remembers that, so it is never tried again.
func TestNoWaitOnTheServer(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var version string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version))
	mariadb := strings.Contains(version, "MariaDB")
	_, err := db.ExecContext(ctx, "INSERT INTO lockgen_locks (name, owner, token, acquired_at, expires_at) VALUES ('nowait', 'before', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	require.NoError(t, err)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SELECT token FROM lockgen_locks WHERE name = 'nowait' FOR UPDATE")
	require.NoError(t, err)

	var n NoWait
	require.True(t, n.Try(), "a new NoWait tries the form")
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	_, err = NoWaitConn{conn}.ExecContext(ctx, "-- a query of sqlc's, its name first\nUPDATE lockgen_locks SET owner = 'after' WHERE name = ?", "nowait")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second, "no wait for the held row")
	assert.True(t, n.Fallback(err), "%v: fall back", err)
	if mariadb {
		assert.Contains(t, err.Error(), "1205")
		assert.True(t, n.Try(), "a held row on MariaDB: the form is tried again next time")
	} else {
		assert.Contains(t, err.Error(), "1064")
		assert.False(t, n.Try(), "MySQL refuses the form: never tried again")
	}
	require.NoError(t, tx.Rollback())
	var owner string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT owner FROM lockgen_locks WHERE name = 'nowait'").Scan(&owner))
	assert.Equal(t, "before", owner, "nothing was written")

	if mariadb {
		res, err := NoWaitConn{conn}.ExecContext(ctx, "UPDATE lockgen_locks SET owner = 'after' WHERE name = ?", "nowait")
		require.NoError(t, err, "a free row is updated in the no-wait form")
		rows, err := res.RowsAffected()
		require.NoError(t, err)
		assert.EqualValues(t, 1, rows)
	}
	assert.False(t, n.Fallback(context.DeadlineExceeded), "an error of another kind is the statement's own")
	assert.False(t, (*NoWait)(nil).Try(), "a nil NoWait never tries")
}

// TestReadCommittedAfterAFailedNoWait: within ReadCommitted, a no-wait
// statement that fails on a held row (MariaDB's 1205) uses the one-shot
// READ COMMITTED up, so the statement after it would run in the session's
// REPEATABLE READ (keeping locks on rows it reads and does not change);
// ReadCommittedNext makes it READ COMMITTED again. On MySQL the no-wait
// form is a syntax error, which leaves the setting in force.
func TestReadCommittedAfterAFailedNoWait(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, "INSERT INTO lockgen_locks (name, owner, token, acquired_at, expires_at) VALUES ('iso', 'before', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO lockgen_locks (name, owner, token, acquired_at, expires_at) VALUES ('seen', 'x', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	require.NoError(t, err)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SELECT token FROM lockgen_locks WHERE name = 'iso' FOR UPDATE")
	require.NoError(t, err)

	// isolation starts the connection's next transaction and tells its
	// isolation level by what it reads: a row another session changes
	// meanwhile is read anew in READ COMMITTED, from the snapshot in
	// REPEATABLE READ.
	isolation := func(conn *sql.Conn) string {
		_, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
		require.NoError(t, err)
		var before, after int64
		require.NoError(t, conn.QueryRowContext(ctx, "SELECT token FROM lockgen_locks WHERE name = 'seen'").Scan(&before))
		_, err = db.ExecContext(ctx, "UPDATE lockgen_locks SET token = token + 1 WHERE name = 'seen'")
		require.NoError(t, err)
		require.NoError(t, conn.QueryRowContext(ctx, "SELECT token FROM lockgen_locks WHERE name = 'seen'").Scan(&after))
		_, err = conn.ExecContext(ctx, "ROLLBACK")
		require.NoError(t, err)
		if after != before {
			return "READ COMMITTED"
		}
		return "REPEATABLE READ"
	}
	for _, again := range []bool{false, true} {
		var level string
		require.NoError(t, ReadCommitted(ctx, db, func(conn *sql.Conn) error {
			_, err := NoWaitConn{conn}.ExecContext(ctx, "UPDATE lockgen_locks SET owner = 'after' WHERE name = 'iso'")
			require.Error(t, err)
			if again {
				require.NoError(t, ReadCommittedNext(ctx, conn))
			}
			level = isolation(conn)
			return nil
		}))
		var version string
		require.NoError(t, db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version))
		switch {
		case again:
			assert.Equal(t, "READ COMMITTED", level, "ReadCommittedNext after the failed statement")
		case strings.Contains(version, "MariaDB"):
			assert.Equal(t, "REPEATABLE READ", level, "the 1205 used the one-shot setting up")
		default:
			assert.Equal(t, "READ COMMITTED", level, "MySQL's syntax error left it in force")
		}
	}
}
