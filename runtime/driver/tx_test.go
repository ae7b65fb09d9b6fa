package driver

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestInTxCommitOnAHalfOpenConnection: a transaction whose COMMIT goes into
// a half-open connection (a blackholing proxy: accepted, never answered)
// returns by its context's deadline instead of waiting for good, and the
// server, which never got the COMMIT, rolls the transaction back, so its
// row locks do not outlive it. database/sql's Tx.Commit takes no context:
// with it InTx never returned here, and the row stayed locked, which left
// claimed runs that no worker could claim (the chaos harness found it).
func TestInTxCommitOnAHalfOpenConnection(t *testing.T) {
	tdb := testdb.New(t)
	direct := tdb.Open(t)
	proxy, err := tcpproxy.Start(tdb.Config.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := tdb.Config.Clone()
	cfg.Addr = proxy.Addr()
	connector, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	viaProxy := sql.OpenDB(connector)
	t.Cleanup(func() { _ = viaProxy.Close() })

	ctx := context.Background()
	_, err = direct.ExecContext(ctx, "INSERT INTO lockgen_locks (name, owner, token, acquired_at, expires_at) VALUES ('intx', 'before', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		done <- InTx(tctx, viaProxy, func(conn *sql.Conn) error {
			if _, err := conn.ExecContext(tctx, "UPDATE lockgen_locks SET owner = 'inside' WHERE name = 'intx'"); err != nil {
				return err
			}
			proxy.Blackhole() // the COMMIT goes nowhere, and nothing comes back
			return nil
		})
	}()
	select {
	case err := <-done:
		require.Error(t, err, "the COMMIT never reached the server")
	case <-time.After(20 * time.Second):
		t.Fatal("InTx waited for a COMMIT on a half-open connection past its context's deadline")
	}

	// The server rolled back: the row is not locked and keeps its value.
	var owner string
	require.Eventually(t, func() bool {
		tx, err := direct.BeginTx(ctx, nil)
		if err != nil {
			return false
		}
		defer func() { _ = tx.Rollback() }()
		_, _ = tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
		return tx.QueryRowContext(ctx, "SELECT owner FROM lockgen_locks WHERE name = 'intx' FOR UPDATE").Scan(&owner) == nil
	}, 20*time.Second, 100*time.Millisecond, "the transaction's row lock was released")
	assert.Equal(t, "before", owner, "the transaction was rolled back")
	proxy.Restore()
}

// TestInTxIdleBoundsAPartitionedTransaction: a transaction whose client a
// partition cut off after it locked a row (the server side of the
// connection stays open, so the server never learns) keeps the row for
// the given idle bound, one second here, not for the ctx deadline rounded
// up plus one (InTx's bound, six seconds here) nor for the server's
// wait_timeout. The generated heartbeat relies on it.
func TestInTxIdleBoundsAPartitionedTransaction(t *testing.T) {
	tdb := testdb.New(t)
	direct := tdb.Open(t)
	proxy, err := tcpproxy.Start(tdb.Config.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := tdb.Config.Clone()
	cfg.Addr = proxy.Addr()
	connector, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	viaProxy := sql.OpenDB(connector)
	t.Cleanup(func() { _ = viaProxy.Close() })

	ctx := context.Background()
	_, err = direct.ExecContext(ctx, "INSERT INTO lockgen_locks (name, owner, token, acquired_at, expires_at) VALUES ('intxidle', 'before', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	require.NoError(t, err)

	var cut time.Time
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = InTxIdle(tctx, viaProxy, 1, func(conn *sql.Conn) error {
		var owner string
		if err := conn.QueryRowContext(tctx, "SELECT owner FROM lockgen_locks WHERE name = 'intxidle' FOR UPDATE").Scan(&owner); err != nil {
			return err
		}
		proxy.Partition() // nothing gets through, and the server side stays open
		cut = time.Now()
		return nil
	})
	require.Error(t, err, "the COMMIT never reached the server")

	// The row is free about a second after the partition: well before the
	// six seconds InTx would have given the session.
	var freed time.Duration
	require.Eventually(t, func() bool {
		tx, err := direct.BeginTx(ctx, nil)
		if err != nil {
			return false
		}
		defer func() { _ = tx.Rollback() }()
		_, _ = tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
		var owner string
		if tx.QueryRowContext(ctx, "SELECT owner FROM lockgen_locks WHERE name = 'intxidle' FOR UPDATE").Scan(&owner) != nil {
			return false
		}
		freed = time.Since(cut)
		return true
	}, 20*time.Second, 50*time.Millisecond, "the transaction's row lock was released")
	assert.Less(t, freed, 4*time.Second, "the server ended the stranded session within its idle bound")
	proxy.Restore()
}

// TestInTxIdleBoundsTheServersLockWaits: a statement of InTxIdle's
// transaction that waits on a row another transaction holds gives up on
// the server after the idle bound (error 1205), not after the server's
// innodb_lock_wait_timeout (50 s by default): a client that gave up on it
// (its statement bound passed, or a partition) no longer leaves it waiting
// there, holding the rows it had locked before, for most of a minute. The
// session gets its own lock wait timeout back afterwards.
func TestInTxIdleBoundsTheServersLockWaits(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	db.SetMaxOpenConns(1) // the transaction's session is the one read after it
	_, err := db.ExecContext(ctx, "INSERT INTO lockgen_locks (name, owner, token, acquired_at, expires_at) VALUES ('lockwait', 'before', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
	require.NoError(t, err)
	var before int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&before))
	require.Greater(t, before, int64(2))

	holder, err := tdb.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	_, err = holder.ExecContext(ctx, "UPDATE lockgen_locks SET owner = 'holder' WHERE name = 'lockwait'")
	require.NoError(t, err)

	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	err = InTxIdle(tctx, db, 1, func(conn *sql.Conn) error {
		_, err := conn.ExecContext(tctx, "UPDATE lockgen_locks SET owner = 'waiter' WHERE name = 'lockwait'")
		return err
	})
	waited := time.Since(start)
	var merr *mysql.MySQLError
	require.ErrorAs(t, err, &merr, "the server gave up the wait, not the client")
	assert.Equal(t, uint16(1205), merr.Number)
	assert.Less(t, waited, 5*time.Second, "the server waited about the idle bound")

	var after int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&after))
	assert.Equal(t, before, after, "the session's own lock wait timeout is back")
}

// TestInTxLeavesTheConnectionsIsolationAlone: InTx's transaction and a
// row-strategy holding's are READ COMMITTED, and the pooled connection they
// ran on keeps the isolation the application gave its sessions (the
// server's REPEATABLE READ here) for what runs on it next: an application
// transaction reads the same row twice alike although another session
// changed it in between. InTx used to end by turning autocommit on, which
// left its one-shot READ COMMITTED to the next transaction on both servers.
func TestInTxLeavesTheConnectionsIsolationAlone(t *testing.T) {
	for name, use := range map[string]func(ctx context.Context, t *testing.T, db *sql.DB){
		"InTx": func(ctx context.Context, t *testing.T, db *sql.DB) {
			require.NoError(t, InTx(ctx, db, func(conn *sql.Conn) error {
				_, err := conn.ExecContext(ctx, "SELECT v FROM iso WHERE id = 1 FOR UPDATE")
				return err
			}))
		},
		"row committed": func(ctx context.Context, t *testing.T, db *sql.DB) {
			rc, err := BeginRow(ctx, db, time.Second, 0)
			require.NoError(t, err)
			require.NoError(t, rc.RestoreLockWait(ctx))
			require.NoError(t, rc.Commit())
		},
		"row rolled back": func(ctx context.Context, t *testing.T, db *sql.DB) {
			rc, err := BeginRow(ctx, db, time.Second, 0)
			require.NoError(t, err)
			require.NoError(t, rc.RestoreLockWait(ctx))
			require.NoError(t, rc.Rollback())
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tdb := testdb.New(t)
			tdb.Exec(t, "CREATE TABLE iso (id INT PRIMARY KEY, v INT)")
			tdb.Exec(t, "INSERT INTO iso VALUES (1, 1)")
			tdb.Grant(t, "iso")
			db := tdb.Open(t)
			db.SetMaxOpenConns(1)
			other := tdb.Open(t)
			use(ctx, t, db)

			// The one connection of db, after use.
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			var before, after int
			require.NoError(t, tx.QueryRowContext(ctx, "SELECT v FROM iso WHERE id = 1").Scan(&before))
			_, err = other.ExecContext(ctx, "UPDATE iso SET v = v + 1 WHERE id = 1")
			require.NoError(t, err)
			require.NoError(t, tx.QueryRowContext(ctx, "SELECT v FROM iso WHERE id = 1").Scan(&after))
			assert.Equal(t, before, after, "a REPEATABLE READ transaction on the same connection reads its snapshot")
		})
	}
}
