package driver

import (
	"context"
	"database/sql"
	"fmt"
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

// InTx runs fn in a READ COMMITTED transaction on a connection of db and
// commits it when fn returns nil. Every statement, COMMIT included, is
// bounded by ctx, which is why it does not use database/sql's Tx: Tx.Commit
// takes no context, and a COMMIT sent on a half-open connection waits for
// its answer for good while the server, which never got it, keeps the
// transaction's row locks (claimed runs that no other worker can claim
// either; the chaos harness found it). When fn fails or panics the
// transaction is rolled back with a ROLLBACK bounded by ctx; when that (or
// COMMIT) does not succeed, the connection is discarded and the server
// rolls the transaction back as the connection closes. The generated job
// store claims runs with it.
func InTx(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	ended := false // committed or rolled back: the connection can be reused
	defer func() {
		if !ended {
			discardConn(conn)
			return
		}
		_ = conn.Close()
	}()
	for _, stmt := range []string{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "START TRANSACTION"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	if err := fn(conn); err != nil {
		if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr == nil {
			ended = true
		}
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	ended = true
	return nil
}
