package main

import (
	"bytes"
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/examples/internal/demodb"
	"github.com/lockgen/lockgen/examples/jobs/jobs"
	"github.com/lockgen/lockgen/runtime/lockgentest"
)

// TestSendReceiptHandler tests the handler as an application tests its
// own, with lockgentest: inline, with typed arguments, on each attempt.
func TestSendReceiptHandler(t *testing.T) {
	log := &runLog{out: &bytes.Buffer{}, ticks: map[time.Time]int{}, receipts: map[int64]int{}}
	h := handlers{node: "test", log: log}
	args := jobs.SendReceiptArgs{OrderID: 42, Email: "a@example.com"}
	err := lockgentest.Work(context.Background(), h.SendReceipt, args, jobs.Run{Attempt: 1, MaxAttempts: 3})
	assert.ErrorContains(t, err, "mail server busy", "the first attempt fails, to show the retry")
	require.NoError(t, lockgentest.Work(context.Background(), h.SendReceipt, args, jobs.Run{Attempt: 2, MaxAttempts: 3}))
	assert.Equal(t, 1, log.receipts[42])
}

// TestEnqueueInTheOrdersTransaction: a receipt enqueued in a transaction
// exists with it, and not without it, on a test database with the
// example's migrations (lockgentest.NewDatabase).
func TestEnqueueInTheOrdersTransaction(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("mysql", lockgentest.NewDatabase(t, demodb.DSN("LOCKGEN_TEST_DSN"), "migrations"))
	require.NoError(t, err)
	defer db.Close()
	l, err := jobs.New(db)
	require.NoError(t, err)
	args := jobs.SendReceiptArgs{OrderID: 7, Email: "b@example.com"}

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = l.EnqueueSendReceiptTx(ctx, tx, args)
	require.NoError(t, err)
	lockgentest.RequireEnqueued(t, tx, jobs.SendReceiptKind, args)
	lockgentest.RequireNotEnqueued(t, db, jobs.SendReceiptKind) // not committed
	require.NoError(t, tx.Rollback())
	lockgentest.RequireNotEnqueued(t, db, jobs.SendReceiptKind)

	_, err = l.EnqueueSendReceipt(ctx, args)
	require.NoError(t, err)
	run := lockgentest.RequireEnqueued(t, db, jobs.SendReceiptKind, args)
	assert.Equal(t, "default", run.Queue)
}
