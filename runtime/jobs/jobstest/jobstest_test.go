package jobstest_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/jobs/jobstest"
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
	err := jobstest.Work(context.Background(), func(ctx context.Context, r *jobs.Run, a receipt) error {
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

	err = jobstest.Work(context.Background(), func(context.Context, *jobs.Run, receipt) error { panic("boom") }, receipt{}, jobs.Run{})
	assert.ErrorContains(t, err, "boom")
	want := errors.New("smtp down")
	err = jobstest.Work(context.Background(), func(context.Context, *jobs.Run, receipt) error { return want }, receipt{}, jobs.Run{})
	assert.ErrorIs(t, err, want)
}

// fatalTB records a failure and ends the goroutine, as testing.T does.
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

// fails runs fn with a fatalTB and returns its failure message.
func fails(fn func(tb testing.TB)) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestRequireEnqueuedSeesTheTransaction(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t).Open(t)
	store := lockgendb.NewStore(db)
	c, err := runtime.NewClient(store)
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	base := jobs.NewRun{Job: "send_receipt", Queue: "mail", MaxAttempts: 3, Timeout: time.Minute}

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	id, err := jobs.EnqueueArgs(ctx, j, tx, base, receipt{OrderID: 42, Email: "b@example.com"})
	require.NoError(t, err)
	run := jobstest.RequireEnqueued(t, tx, "", "send_receipt", map[string]any{"email": "b@example.com", "order_id": 42, "wait": 0})
	assert.Equal(t, id, run.ID)
	assert.Equal(t, "mail", run.Queue)
	assert.Equal(t, "available", run.State)
	jobstest.RequireNotEnqueued(t, db, "", "send_receipt") // not committed yet

	msg := fails(func(tb testing.TB) { jobstest.RequireEnqueued(tb, tx, "", "send_receipt", receipt{OrderID: 43}) })
	assert.Contains(t, msg, `no run of send_receipt with args {"order_id":43`)
	assert.Regexp(t, `newest first: \{"order_id": ?42`, msg, "it shows the runs it saw")
	msg = fails(func(tb testing.TB) { jobstest.RequireNotEnqueued(tb, tx, "", "send_receipt") })
	assert.Contains(t, msg, "1 runs of send_receipt, want none")
	msg = fails(func(tb testing.TB) { jobstest.RequireNotEnqueued(tb, tx, "x; DROP TABLE y", "send_receipt") })
	assert.Contains(t, msg, "must be letters, digits and underscores")

	require.NoError(t, tx.Commit())
	jobstest.RequireEnqueued(t, db, "lockgen_", "send_receipt", receipt{OrderID: 42, Email: "b@example.com"})
}
