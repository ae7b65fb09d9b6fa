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

// InTx runs fn in a READ COMMITTED transaction of db and commits it when fn
// returns nil; otherwise (or when fn panics) it rolls it back. The generated
// job store claims runs with it.
func InTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	return tx.Commit()
}
