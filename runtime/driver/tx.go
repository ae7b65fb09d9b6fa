package driver

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CheckClaimed is the generated job store's check that its claim
// statement marked running every run it had locked (n of want): anything
// else is an error, so the claim rolls back and no run is handled under a
// claim that was not made.
func CheckClaimed(n int64, want int) error {
	if n != int64(want) {
		return fmt.Errorf("lockgen: claim marked %d of %d locked runs running", n, want)
	}
	return nil
}

// txBegin opens InTx's transaction: it keeps the session's autocommit,
// wait_timeout and innodb_lock_wait_timeout in session variables, turns
// autocommit off (the next statement begins the transaction, READ
// COMMITTED by the SET TRANSACTION sent before) and, with %s, bounds how
// long the server waits for the next statement and on a row lock.
const txBegin = "SET @lockgen_tx_autocommit = @@SESSION.autocommit, @lockgen_tx_wait_timeout = @@SESSION.wait_timeout, " +
	"@lockgen_tx_lock_wait_timeout = @@SESSION.innodb_lock_wait_timeout, SESSION autocommit = 0%s"

// txBound is txBegin's %s: the session's wait_timeout and
// innodb_lock_wait_timeout for the transaction, both idle seconds.
const txBound = ", SESSION wait_timeout = %[1]d, SESSION innodb_lock_wait_timeout = %[1]d"

// txSettings gives the session back its autocommit, wait_timeout and
// innodb_lock_wait_timeout.
const txSettings = "SESSION autocommit = @lockgen_tx_autocommit, SESSION wait_timeout = @lockgen_tx_wait_timeout, " +
	"SESSION innodb_lock_wait_timeout = @lockgen_tx_lock_wait_timeout"

// txRestore gives the session back its settings after the COMMIT or the
// ROLLBACK that ends InTx's transaction. The transaction ends with a
// statement of its own, not by turning autocommit on in this one: a
// transaction that ends that way leaves the one-shot isolation of SET
// TRANSACTION (READ COMMITTED) in force for the connection's next
// transaction, on both servers, so an application transaction that got
// the connection from the pool next ran READ COMMITTED instead of its own
// isolation (TestInTxLeavesTheConnectionsIsolationAlone).
const txRestore = "SET " + txSettings

// IdleBound is the wait_timeout, in whole seconds, that keeps a pinned
// connection's session alive on the server for at least d without a
// statement: d rounded up, plus one second for the reply that may still be
// on its way when the client starts counting.
func IdleBound(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1) + 1
}

// InTx runs fn in a READ COMMITTED transaction on a connection of db and
// commits it when fn returns nil. Every statement, COMMIT included, is
// bounded by ctx, which is why it does not use database/sql's Tx: Tx.Commit
// takes no context, and a COMMIT sent on a half-open connection waits for
// its answer for good while the server, which never got it, keeps the
// transaction's row locks (claimed runs that no other worker can claim
// either; the chaos harness found it).
//
// The server is bounded too: when ctx has a deadline, the session's
// wait_timeout is IdleBound of the time left for the transaction, so a
// server that stops hearing from the client (a partition: the client gave
// up and closed, but the server never learned) ends the session, rolling
// the transaction back and freeing its row locks, at most that long after
// the last statement it received, instead of after the server's
// wait_timeout (8 hours by default) or TCP keepalive (about 2 hours). The
// session's innodb_lock_wait_timeout is the same bound, so a statement of
// the transaction that waits on a row lock fails on the server (1205)
// about when its client gives up, instead of waiting on there, holding the
// rows it locked before, for the server's 50 s default. The connection's
// autocommit, wait_timeout and innodb_lock_wait_timeout are restored after
// the COMMIT: SET TRANSACTION, SET (the bounds, autocommit off), fn's
// statements, COMMIT, SET (the saved values back).
//
// When fn fails or panics the transaction is rolled back with a ROLLBACK
// bounded by ctx; when that, the restore or the commit does not succeed,
// the connection is discarded and the server rolls the transaction back as
// the connection closes. The generated job store claims runs with it.
func InTx(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) (err error) {
	var idle int64
	if dl, ok := ctx.Deadline(); ok {
		idle = IdleBound(time.Until(dl))
	}
	return InTxIdle(ctx, db, idle, fn)
}

// InTxIdle is InTx with the session's bounds given: idle whole seconds
// (none when 0) for wait_timeout and innodb_lock_wait_timeout, however
// long ctx leaves. A transaction of a few
// short statements whose rows others must not miss for long takes 1: the
// generated job store's heartbeat, which holds the rows of a batch of
// running runs locked between its SELECT and its COMMIT, so that a
// heartbeat stranded by a partition keeps them from the next heartbeats
// for about a second, not for the statement bound rounded up plus one.
// The least the server honours is one second; a statement slower than
// that between two of the transaction's (a starved client) loses the
// session, and the transaction fails without committing.
func InTxIdle(ctx context.Context, db *sql.DB, idle int64, fn func(conn *sql.Conn) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	restored := false // the transaction ended and the session has its settings back
	defer func() {
		if !restored {
			discardConn(conn)
			return
		}
		_ = conn.Close()
	}()
	bound := ""
	if idle > 0 {
		bound = fmt.Sprintf(txBound, idle)
	}
	for _, stmt := range []string{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", fmt.Sprintf(txBegin, bound)} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	if err := fn(conn); err != nil {
		if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr == nil {
			_, rerr = conn.ExecContext(ctx, txRestore)
			restored = rerr == nil
		}
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	// Committed: a failed restore only costs the connection.
	_, rerr := conn.ExecContext(ctx, txRestore)
	restored = rerr == nil
	return nil
}

// ReadCommittedNext makes the next transaction on conn, an autocommit
// statement included, READ COMMITTED (a one-shot SET TRANSACTION). Within
// ReadCommitted, a statement that failed on the server used the one-shot
// setting up (MariaDB: a 1205 of the no-wait form; a syntax error does
// not): the statement after it needs this again.
func ReadCommittedNext(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
	return err
}

// ReadCommitted runs fn, one autocommit statement on a connection of db,
// in READ COMMITTED whatever the session's isolation. A statement that
// changes rows listed by id, some of which may have changed meanwhile
// (another worker's claim of a run whose stale outcome is being recorded),
// then locks only the rows it changes: in REPEATABLE READ, the server's
// default, an UPDATE keeps the rows it read and did not change locked
// until it ends, and one that waits on a row an operator holds kept
// another worker's run from its heartbeats for as long (the chaos harness
// found it: two healthy handlers cancelled). In READ COMMITTED it
// releases them at once, and passes a row another transaction holds
// without waiting when the row's last committed version does not match.
//
// It costs one round trip (SET TRANSACTION, whose one-shot isolation the
// autocommit statement uses and ends). When fn fails, the connection is
// discarded, not pooled: a statement that never reached the server would
// leave the one-shot isolation to the next transaction on it.
func ReadCommitted(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	if err := ReadCommittedNext(ctx, conn); err != nil {
		discardConn(conn)
		return err
	}
	if err := fn(conn); err != nil {
		discardConn(conn)
		return err
	}
	return conn.Close()
}
