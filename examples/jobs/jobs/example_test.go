package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockgen/lockgen/examples/internal/exampletest"
	"github.com/lockgen/lockgen/examples/jobs/jobs"
)

// db is the application's pool. The examples run on a database of their
// own, with the jobs example's migrations applied, as a user with
// privileges on lockgen's three tables only (see TestMain).
var db *sql.DB

func TestMain(m *testing.M) {
	var migrations []string
	for _, name := range []string{"0001_jobsdemo_locks.up.sql", "0002_jobsdemo_runs.up.sql", "0003_jobsdemo_queues.up.sql", "0004_jobsdemo_runs_history.up.sql", "0005_jobsdemo_runs_headers.up.sql", "0006_jobsdemo_locks_session.up.sql"} {
		b, err := os.ReadFile("../migrations/" + name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		migrations = append(migrations, string(b))
	}
	os.Exit(exampletest.Main(m, &db, []string{"jobsdemo_locks", "jobsdemo_runs", "jobsdemo_queues"}, migrations...))
}

// handlers implements the JobHandlers that lockgen generated from the
// spec's jobs: one method per job, so a missing handler does not compile.
type handlers struct {
	// sent hears of each receipt sent.
	sent chan<- jobs.SendReceiptArgs
}

// Tick handles the scheduled tick job (every second, one run per tick
// across all nodes).
func (handlers) Tick(ctx context.Context, run *jobs.Run) error { return nil }

// SendReceipt handles an enqueued send_receipt run. Returning an error
// retries it with backoff; delivery is at least once, so a real handler
// is idempotent by run.ID.
func (h handlers) SendReceipt(ctx context.Context, run *jobs.Run, args jobs.SendReceiptArgs) error {
	h.sent <- args
	return nil
}

// A job from enqueue to completion: enqueue a typed run, work it with
// RunJobs, stop the workers by ending their context, and read the run's
// state. RunJobs records every finished run's outcome before it returns,
// so a program should let it return (cancel its context and wait) before
// it exits.
func ExampleLocks_RunJobs() {
	ctx := context.Background()
	l, err := jobs.New(db)
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := l.EnqueueSendReceipt(ctx, jobs.SendReceiptArgs{OrderID: 42, Email: "ada@example.com"})
	if err != nil {
		fmt.Println(err)
		return
	}

	workCtx, stop := context.WithCancel(ctx)
	sent := make(chan jobs.SendReceiptArgs, 1)
	done := make(chan error, 1)
	go func() { done <- l.RunJobs(workCtx, handlers{sent: sent}) }()

	args := <-sent
	fmt.Printf("receipt for order %d sent to %s\n", args.OrderID, args.Email)
	stop()                          // shut down: stop claiming, let handlers finish
	fmt.Println("RunJobs:", <-done) // nil after a clean shutdown
	info, err := l.JobRun(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("run state:", info.State)
	// Output:
	// receipt for order 42 sent to ada@example.com
	// RunJobs: <nil>
	// run state: completed
}

// Cancelling a run that has not started: a delayed run is cancelled before
// it is due, and reading a run that does not exist is ErrRunNotFound.
func ExampleLocks_CancelRun() {
	ctx := context.Background()
	l, err := jobs.New(db)
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := l.EnqueueSendReceipt(ctx, jobs.SendReceiptArgs{OrderID: 7, Email: "grace@example.com"}, jobs.Delay(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	cancelled, err := l.CancelRun(ctx, id)
	fmt.Println("cancelled:", cancelled, err)
	info, err := l.JobRun(ctx, id)
	fmt.Println("run state:", info.State, err)
	_, err = l.JobRun(ctx, id+1000)
	fmt.Println("no such run:", errors.Is(err, jobs.ErrRunNotFound))
	// Output:
	// cancelled: true <nil>
	// run state: cancelled <nil>
	// no such run: true
}
