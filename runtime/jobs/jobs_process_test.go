package jobs_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// The worker child process: see TestKilledWorkerProcessRunIsRescued.
const workerChildEnv = "LOCKGEN_TEST_WORKER_CHILD"

// childLease is the worker child's lease: short, so the test is quick.
const childLease = time.Second

func runWorkerChild() int {
	client, store, err := testkit.ChildClient(workerChildEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	j, err := jobs.NewClient(client, store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := j.NewWorker(jobs.WorkerConfig{Lease: childLease, RescueEvery: -1, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"long": {Handle: func(ctx context.Context, run *jobs.Run) error {
			fmt.Printf("running %d attempt %d\n", run.ID, run.Attempt)
			<-ctx.Done() // until killed
			return ctx.Err()
		}}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_ = w.Run(context.Background())
	return 0
}

// TestKilledWorkerProcessRunIsRescued: a worker in another OS process
// claims a run and is killed with SIGKILL mid-run; a worker here rescues the
// run once its lease passes and runs it as attempt 2.
func TestKilledWorkerProcessRunIsRescued(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "parent")
	id, err := j.Enqueue(ctx, nil, newRun("long"))
	require.NoError(t, err)

	child, out := testkit.StartChild(t, workerChildEnv, tdb.Config.FormatDSN())
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("running %d attempt 1", id), strings.TrimSpace(line))
	info, err := j.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "child", info.Worker)
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	killed := time.Now()

	attempts := make(chan int, 1)
	startWorker(t, j, jobs.WorkerConfig{RescueEvery: 100 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"long": {Handle: func(ctx context.Context, run *jobs.Run) error {
			attempts <- run.Attempt
			return nil
		}}}})
	select {
	case a := <-attempts:
		assert.Equal(t, 2, a)
		t.Logf("rescued and run again %v after SIGKILL (lease %v)", time.Since(killed), childLease)
	case <-time.After(30 * time.Second):
		t.Fatal("the killed worker's run was not rescued")
	}
	info = waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, "parent", info.Worker)
	assert.Contains(t, info.LastError, "rescued: worker child")
}
