package locks_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockgen/lockgen/examples/internal/exampletest"
	"github.com/lockgen/lockgen/examples/quickstart/locks"
)

// db is the application's pool. The examples run on a database of their
// own, with the quickstart's migration applied, as a user with privileges
// on the lock and account tables only (see TestMain).
var db *sql.DB

func TestMain(m *testing.M) {
	migration, err := os.ReadFile("../migrations/0001_quickstart_locks.up.sql")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	session, err := os.ReadFile("../migrations/0006_quickstart_locks_session.up.sql")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(exampletest.Main(m, &db, []string{"quickstart_locks", "quickstart_accounts"}, string(migration), string(session),
		"CREATE TABLE quickstart_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)"))
}

// A keyed lock: one holder per order at a time, across every process that
// uses the same table. The lease is renewed while fn runs; its token is
// greater than that of every earlier holding of the same key, so writes
// that carry it can refuse a stale holder.
func ExampleLocks_WithOrderLock() {
	ctx := context.Background()
	l, err := locks.New(db)
	if err != nil {
		fmt.Println(err)
		return
	}
	var first int64
	for range 2 {
		err := l.WithOrderLock(ctx, 42, func(ctx context.Context, lease *locks.Lease) error {
			// Work on order 42 here, passing lease.Token() with the writes.
			if first == 0 {
				first = lease.Token()
				fmt.Println("holding order 42")
				return nil
			}
			fmt.Println("holding order 42 again, with a greater token:", lease.Token() > first)
			return nil
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// holding order 42
	// holding order 42 again, with a greater token: true
}

// Leader election: of all the nodes running RunAsMaster, one at a time runs
// fn; its ctx ends as soon as leadership may be lost, before any other
// node can take over. Here one node leads once and then stops campaigning.
func ExampleLocks_RunAsMaster() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	l, err := locks.New(db)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = l.RunAsMaster(ctx, func(ctx context.Context, lease *locks.Lease) error {
		fmt.Println("elected; leading:", l.IsMasterLeader())
		// Do the leader's work until ctx ends; here, step down at once by
		// ending the campaign.
		stop()
		return nil
	})
	fmt.Printf("campaign over: %v; leading: %v\n", err, l.IsMasterLeader())
	// Output:
	// elected; leading: true
	// campaign over: <nil>; leading: false
}

// A row lock: the lock is a locked row in a transaction that fn is given,
// so fn's own writes commit exactly when the lock is released.
func ExampleLocks_WithAccountLockTx() {
	ctx := context.Background()
	l, err := locks.New(db)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO quickstart_accounts (id, balance) VALUES (7, 100) ON DUPLICATE KEY UPDATE balance = 100"); err != nil {
		fmt.Println(err)
		return
	}
	err = l.WithAccountLockTx(ctx, 7, func(ctx context.Context, tx *sql.Tx, lease *locks.Lease) error {
		_, err := tx.ExecContext(ctx, "UPDATE quickstart_accounts SET balance = balance - 30 WHERE id = 7")
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var balance int64
	if err := db.QueryRowContext(ctx, "SELECT balance FROM quickstart_accounts WHERE id = 7").Scan(&balance); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("balance:", balance)
	// Output:
	// balance: 70
}
