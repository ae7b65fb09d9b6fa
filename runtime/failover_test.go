package runtime_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// connectorAt returns a connector for the test's database at addr, as the
// test's application user.
func connectorAt(t *testing.T, tdb *testdb.DB, addr string) driver.Connector {
	t.Helper()
	cfg := tdb.Config.Clone()
	cfg.Addr = addr
	cfg.Timeout = time.Second
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	return c
}

// TestFailoverPassesOverAMemberThatIsDown: with the first member down,
// every connection goes to the second (the test's server, which takes
// writes: the check passes on a server of its own, MariaDB's wsrep_on off
// or MySQL's outside any group, as the application user), locks work
// through it, and a pool whose members are all down fails with
// ErrNoWritableMember naming each member's reason.
func TestFailoverPassesOverAMemberThatIsDown(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	down := closedAddr(t)
	db := sql.OpenDB(runtime.Failover(connectorAt(t, tdb, down), connectorAt(t, tdb, tdb.Config.Addr)))
	t.Cleanup(func() { _ = db.Close() })
	for range 3 {
		var one int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT 1").Scan(&one))
	}
	c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner("failover"))
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "failover", TTL: 5 * time.Second})
	require.NoError(t, err)
	lease, err := l.Try(ctx, "")
	require.NoError(t, err, "a lease through the member that takes writes")
	require.NoError(t, lease.Release(ctx))

	dead := sql.OpenDB(runtime.Failover(connectorAt(t, tdb, down), connectorAt(t, tdb, closedAddr(t))))
	t.Cleanup(func() { _ = dead.Close() })
	err = dead.PingContext(ctx)
	require.ErrorIs(t, err, runtime.ErrNoWritableMember)
	assert.Contains(t, err.Error(), "member 1: ")
	assert.Contains(t, err.Error(), "member 2: ")
}

// TestFailoverDropsAConnectionThatFoundItsServerReadOnly: a statement that
// the server refuses as read-only (here a write in a READ ONLY
// transaction, 1792, which a demoted primary's super_read_only answers
// with 1290) returns the server's error, and its connection is not used
// again: the next statement runs on a new connection. A connection whose
// statement failed for another reason (a duplicate key) stays in the pool.
func TestFailoverDropsAConnectionThatFoundItsServerReadOnly(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	tdb.Exec(t, "CREATE TABLE "+tdb.Name+".failover_probe (id INT PRIMARY KEY)")
	tdb.Grant(t, "failover_probe")
	db := sql.OpenDB(runtime.Failover(connectorAt(t, tdb, tdb.Config.Addr)))
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	connID := func() int64 {
		var id int64
		require.NoError(t, db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
		return id
	}
	first := connID()
	_, err := db.ExecContext(ctx, "INSERT INTO failover_probe VALUES (1)")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO failover_probe VALUES (1)")
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "%v", err)
	assert.Equal(t, uint16(1062), me.Number)
	assert.Equal(t, first, connID(), "a duplicate key says nothing about the server: the connection stays")

	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO failover_probe VALUES (2)")
	require.True(t, errors.As(err, &me), "%v", err)
	assert.Equal(t, uint16(1792), me.Number, "the server's refusal reaches the caller")
	require.NoError(t, tx.Rollback())
	assert.NotEqual(t, first, connID(), "the connection that found its server read-only was closed, not reused")
}
