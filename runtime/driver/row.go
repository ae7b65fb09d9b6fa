package driver

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"time"
)

// restoreTimeout bounds the statement that gives a row holding's connection
// its autocommit back, and the COMMIT or ROLLBACK that ends the holding.
const restoreTimeout = 30 * time.Second

// RowIdleBound is the default of how long the server keeps a row
// holding's session when nothing arrives on it (a lock's IdleTimeout): the
// holding's connection has this wait_timeout (restored when the holding
// ends). A holder cut off by a partition (its
// client gave up, the server never learned) so frees the row lock this
// long after its last statement, not after the server's own wait_timeout
// (8 hours by default) or TCP keepalive. The other side of the bound: a
// live holding whose fn leaves its transaction idle this long is ended by
// the server too; fn's writes in it roll back and the release reports
// ErrLeaseLost, as for any holding whose connection broke under fn (a
// row holding learns of a loss at its release).
const RowIdleBound = 20 * time.Second

// RowConn is the connection and transaction of one row-strategy holding.
// Stores embed it in their RowTx; it runs the statements that are the same
// for every table prefix.
type RowConn struct {
	conn     *sql.Conn
	tx       *sql.Tx
	restored bool
}

// rowSessionSet is run before the holding's transaction begins: it saves
// and sets the lock wait, and turns autocommit off for the holding, so that
// statements fn runs after the server rolled the transaction back (a
// deadlock) open a new transaction that the release rolls back, instead of
// committing one by one without the lock.
// It also bounds the session's idle time on the server (RowIdleBound).
const rowSessionSet = "SET @lockgen_lock_wait = @@SESSION.innodb_lock_wait_timeout, @lockgen_autocommit = @@SESSION.autocommit, " +
	"@lockgen_wait_timeout = @@SESSION.wait_timeout, " +
	"SESSION innodb_lock_wait_timeout = ?, SESSION autocommit = 0, SESSION wait_timeout = ?"

// rowSessionRestore gives the connection back what rowSessionSet changed
// (the lock wait is restored before fn runs, by RestoreLockWait). Setting
// autocommit to 1 first commits the holding's transaction, if one is open.
const rowSessionRestore = "SET SESSION autocommit = 1, SESSION autocommit = @lockgen_autocommit, SESSION wait_timeout = @lockgen_wait_timeout"

// BeginRow pins a connection of db, sets its innodb_lock_wait_timeout to
// lockWait (whole seconds, rounded up, at least 1; the previous value is
// kept in the session variable @lockgen_lock_wait) and its wait_timeout to
// idle (the same way; RowIdleBound when zero), turns autocommit off for
// the holding and begins a READ COMMITTED transaction on it. The
// transaction does not end with ctx: only Commit or Rollback end it. On
// failure the connection is discarded.
func BeginRow(ctx context.Context, db *sql.DB, lockWait, idle time.Duration) (*RowConn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if idle <= 0 {
		idle = RowIdleBound
	}
	if _, err := conn.ExecContext(ctx, rowSessionSet, wholeSeconds(lockWait), wholeSeconds(idle)); err != nil {
		discardConn(conn)
		return nil, err
	}
	// Not ctx: database/sql rolls a transaction back when the context it
	// began with ends, which would free the lock under a running fn.
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		discardConn(conn)
		return nil, err
	}
	return &RowConn{conn: conn, tx: tx}, nil
}

// Tx returns the holding's transaction.
func (c *RowConn) Tx() *sql.Tx { return c.tx }

// RestoreLockWait sets the connection's innodb_lock_wait_timeout back to
// what it was before BeginRow.
func (c *RowConn) RestoreLockWait(ctx context.Context) error {
	if _, err := c.tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = @lockgen_lock_wait"); err != nil {
		return err
	}
	c.restored = true
	return nil
}

// Commit commits the transaction, restores autocommit and the session's
// wait_timeout, and returns the connection to the pool (or discards it when
// any of that failed or its lock wait was not restored). The commit is one
// statement bounded by restoreTimeout: database/sql's Tx.Commit takes no
// context, and on a half-open connection it would wait for its answer for
// good, pinning the connection (and a slot of the pool) while the server
// keeps the row locked until RowIdleBound.
func (c *RowConn) Commit() error {
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	_, err := c.tx.ExecContext(ctx, rowSessionRestore)
	// The Tx must still be ended for database/sql. After a failed
	// statement the driver has closed the connection (a timeout closes it),
	// so this returns at once; after a committed one it is a no-op ROLLBACK.
	rerr := c.tx.Rollback()
	if err != nil {
		discardConn(c.conn)
		return err
	}
	if rerr != nil || !c.restored {
		// Committed: the holding ended as asked; the connection is not
		// pooled (its lock wait may not be back).
		discardConn(c.conn)
		return nil
	}
	_ = c.conn.Close()
	return nil
}

// Rollback rolls the transaction back and returns the connection to the
// pool (or discards it, as Commit does). Its statements are bounded like
// Commit's.
func (c *RowConn) Rollback() error {
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	_, err := c.tx.ExecContext(ctx, "ROLLBACK")
	if rerr := c.tx.Rollback(); err == nil {
		err = rerr
	}
	if err != nil || !c.restored {
		discardConn(c.conn)
		return err
	}
	if _, rerr := c.conn.ExecContext(ctx, rowSessionRestore); rerr != nil {
		discardConn(c.conn)
		return nil // the transaction itself ended as asked
	}
	_ = c.conn.Close()
	return nil
}

// discardConn closes conn itself instead of returning it to the pool.
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn }) // marks it bad: not pooled
	_ = conn.Close()
}

// PeekRow runs read inside a READ UNCOMMITTED read-only transaction on db,
// so a live row-strategy holding, not committed until its release, is seen.
// Stores call it from RowPeek.
func PeekRow(ctx context.Context, db *sql.DB, read func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return read(tx)
}

// wholeSeconds is d in whole seconds, rounded up, at least 1: what the
// server's timeout variables take.
func wholeSeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}
