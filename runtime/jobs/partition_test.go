package jobs_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// TestClaimPartitionedBeforeCommitFreesItsRuns: a claim whose connection is
// partitioned after it locked and marked its runs, before its COMMIT (the
// client gives up by its deadline and closes, the server never learns)
// strands nothing for long: the server ends the silent session IdleBound
// after its last statement, rolls the claim back, and another worker runs
// every run. With the server's own wait_timeout (8 hours) the runs stayed
// locked and 'available', skipped by every other claim and invisible to
// the rescuer (issue 21, item 3: 5 of 5 runs unrun after 30 s).
func TestClaimPartitionedBeforeCommitFreesItsRuns(t *testing.T) {
	tdb := testdb.New(t)
	direct := tdb.Open(t)
	proxy, viaProxy := testkit.OpenViaProxy(t, tdb)
	j := jobsNode(t, direct, "survivor")
	bg := context.Background()
	ids := make([]int64, 5)
	for i := range ids {
		id, err := j.Enqueue(bg, nil, newRun("stranded"))
		require.NoError(t, err)
		ids[i] = id
	}

	// The claim, as the generated RunsClaim makes it, partitioned before
	// its COMMIT.
	const lease = 2 * time.Second
	ctx, cancel := context.WithTimeout(bg, lease)
	err := driver.InTx(ctx, viaProxy, func(conn *sql.Conn) error {
		q := lockgendb.New(conn)
		priority, runAt, after := driver.CursorArgs(nil)
		rows, err := q.RunsClaimable(ctx, lockgendb.RunsClaimableParams{Queue: jobs.DefaultQueue,
			AfterPriority: priority, AfterRunAt: runAt, AfterID: after, Limit: int32(len(ids))})
		if err != nil {
			return err
		}
		require.Len(t, rows, len(ids))
		n, err := q.RunsMarkRunning(ctx, lockgendb.RunsMarkRunningParams{Worker: "partitioned", LeaseUs: lease.Microseconds(), Ids: ids})
		if err != nil {
			return err
		}
		require.EqualValues(t, len(ids), n)
		proxy.Partition()
		return nil
	})
	cancel()
	require.Error(t, err, "the COMMIT never reached the server")
	require.Eventually(t, func() bool { return proxy.Stranded() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the client closed its connection and the server's side stayed open, as in a real partition")

	var mu sync.Mutex
	ran := map[int64]int{}
	startWorker(t, j, jobs.WorkerConfig{Lease: lease, RescueEvery: 100 * time.Millisecond, PollMin: 10 * time.Millisecond, PollMax: 100 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"stranded": {Handle: func(_ context.Context, run *jobs.Run) error {
			mu.Lock()
			defer mu.Unlock()
			ran[run.ID]++
			return nil
		}}}})
	// The bound is IdleBound(lease) = 3 s after the claim's last statement;
	// waitState allows 20 s (load), against the server's 8 hours.
	for _, id := range ids {
		info := waitState(t, j, id, jobs.RunCompleted)
		assert.Equal(t, 1, info.Attempt, "the partitioned claim was rolled back: it used no attempt")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		assert.Equal(t, 1, ran[id], "run %d ran once", id)
	}
	assert.Eventually(t, func() bool { return proxy.Stranded() == 0 }, 10*time.Second, 10*time.Millisecond, "the server closed the silent session")
}
