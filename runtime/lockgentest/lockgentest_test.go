package lockgentest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/lockgentest"
)

func TestMain(m *testing.M) { testkit.Main(m, nil) }

type receipt struct {
	OrderID int64         `json:"order_id"`
	Email   string        `json:"email"`
	Wait    time.Duration `json:"wait"`
}

func TestWorkRunsAHandlerInline(t *testing.T) {
	var got receipt
	var run *jobs.Run
	err := lockgentest.Work(context.Background(), func(ctx context.Context, r *jobs.Run, a receipt) error {
		got, run = a, r
		_, ok := ctx.Deadline()
		assert.True(t, ok, "the context ends at the run's timeout")
		return nil
	}, receipt{OrderID: 7, Email: "a@example.com", Wait: time.Second}, jobs.Run{Attempt: 2, MaxAttempts: 3})
	require.NoError(t, err)
	assert.Equal(t, receipt{OrderID: 7, Email: "a@example.com", Wait: time.Second}, got, "through JSON and back")
	assert.Equal(t, 2, run.Attempt)
	assert.Equal(t, 3, run.MaxAttempts)
	assert.Equal(t, int64(1), run.ID)

	err = lockgentest.Work(context.Background(), func(context.Context, *jobs.Run, receipt) error { panic("boom") }, receipt{}, jobs.Run{})
	assert.ErrorContains(t, err, "boom")
	want := errors.New("smtp down")
	err = lockgentest.Work(context.Background(), func(context.Context, *jobs.Run, receipt) error { return want }, receipt{}, jobs.Run{})
	assert.ErrorIs(t, err, want)
}

// fatalTB records a failure and ends the goroutine, as testing.T does;
// the rest (Cleanup) is the real test's.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	goruntime.Goexit()
}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	goruntime.Goexit()
}

// fails runs fn with a fatalTB over t and returns its failure message.
func fails(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func adminDSN() string {
	if dsn := os.Getenv("LOCKGEN_TEST_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// TestNewDatabaseAppliesEitherFormat: golang-migrate's files (the runs
// tables of the runtime's store) and goose's (one file with Up and Down).
func TestNewDatabaseAppliesEitherFormat(t *testing.T) {
	db, err := sql.Open("mysql", lockgentest.NewDatabase(t, adminDSN(), "../../generator/testdata/golden/every/want/db/migrations"))
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM app_locks").Scan(&n), "goose's Up applied")
	assert.Zero(t, n)
	msg := fails(t, func(tb testing.TB) { lockgentest.NewDatabase(tb, adminDSN(), t.TempDir()) })
	assert.Contains(t, msg, "no migrations in")
}

func TestRequireEnqueuedSeesTheTransaction(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("mysql", lockgentest.NewDatabase(t, adminDSN(), "../internal/genstore/migrations"))
	require.NoError(t, err)
	defer db.Close()
	store := lockgendb.NewStore(db)
	c, err := runtime.NewClient(store)
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	base := jobs.NewRun{Job: "send_receipt", Queue: "mail", MaxAttempts: 3, Timeout: time.Minute}
	// What the generated package declares as SendReceiptKind.
	kind := jobs.Kind[receipt]{Name: "send_receipt", Queue: "mail", TablePrefix: "lockgen_"}
	loose := jobs.Kind[map[string]any]{Name: "send_receipt"} // the default prefix

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	id, err := jobs.EnqueueArgs(ctx, j, tx, base, receipt{OrderID: 42, Email: "b@example.com"})
	require.NoError(t, err)
	run := lockgentest.RequireEnqueued(t, tx, loose, map[string]any{"email": "b@example.com", "order_id": 42, "wait": 0})
	assert.Equal(t, id, run.ID)
	assert.Equal(t, "mail", run.Queue)
	assert.Equal(t, "available", run.State)
	lockgentest.RequireNotEnqueued(t, db, kind) // not committed yet

	msg := fails(t, func(tb testing.TB) { lockgentest.RequireEnqueued(tb, tx, kind, receipt{OrderID: 43}) })
	assert.Contains(t, msg, `no run of send_receipt with args {"order_id":43`)
	assert.Regexp(t, `newest first: \{"order_id": ?42`, msg, "it shows the runs it saw")
	msg = fails(t, func(tb testing.TB) { lockgentest.RequireNotEnqueued(tb, tx, kind) })
	assert.Contains(t, msg, "1 runs of send_receipt, want none")
	msg = fails(t, func(tb testing.TB) {
		lockgentest.RequireNotEnqueued(tb, tx, jobs.Kind[receipt]{Name: "send_receipt", TablePrefix: "x; DROP TABLE y"})
	})
	assert.Contains(t, msg, "must be letters, digits and underscores")

	require.NoError(t, tx.Commit())
	lockgentest.RequireEnqueued(t, db, kind, receipt{OrderID: 42, Email: "b@example.com"})
}
