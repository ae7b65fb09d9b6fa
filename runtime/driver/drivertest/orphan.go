package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

// orphan inserts n runs of job on their last attempt (timeout 100 ms),
// claims them with a 100 ms lease, never heartbeats them, and rescues them
// once the deadline and the timeout have passed: they are orphaned.
func orphan(t *testing.T, js driver.JobStore, job string, n int) []driver.Run {
	t.Helper()
	ctx := context.Background()
	for range n {
		r := newRun(job)
		r.MaxAttempts, r.Timeout = 1, 100*time.Millisecond
		_, err := js.RunInsert(ctx, nil, r)
		require.NoError(t, err)
	}
	runs, err := js.RunsClaim(ctx, job, "cut-off", n, 100*time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, runs, n)
	time.Sleep(300 * time.Millisecond) // past the deadline and the timeout
	for _, r := range runs {
		require.Eventually(t, func() bool {
			_, err := js.RunsRescue(ctx, 100)
			require.NoError(t, err)
			info, _, err := js.RunGet(ctx, r.ID)
			require.NoError(t, err)
			return info.State != driver.RunRunning
		}, 5*time.Second, 50*time.Millisecond, "a last attempt past its deadline and timeout is rescued")
		info, _, err := js.RunGet(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, driver.RunOrphaned, info.State, "a last attempt whose worker stopped heartbeating is orphaned, not discarded")
		assert.Contains(t, info.LastError, "worker cut-off stopped heartbeating during its last attempt")
		assert.False(t, info.FinishedAt.IsZero(), "an orphaned run has finished, for pruning")
		assert.True(t, info.Deadline.IsZero(), "an orphaned run has no deadline")
		assert.Equal(t, 1, info.Attempt)
	}
	return runs
}

func claimOf(r driver.Run) driver.Claim { return driver.Claim{ID: r.ID, Claim: r.Claim} }

func state(t *testing.T, js driver.JobStore, id int64) driver.RunInfo {
	t.Helper()
	info, found, err := js.RunGet(context.Background(), id)
	require.NoError(t, err)
	require.True(t, found)
	return info
}

// testJobsOrphaned checks the orphaned state: the rescue of a last attempt
// past its deadline and timeout orphans the run; nothing claims,
// heartbeats or gives it back; a late completion or failure of the same
// claim is recorded; a retry makes it available and the old claim's late
// outcome then matches nothing; it is pruned like a finished run.
func testJobsOrphaned(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("orphan")
	runs := orphan(t, js, job, 3)
	done, failed, retried := runs[0], runs[1], runs[2]

	again, err := js.RunsClaim(ctx, job, "w", 10, time.Minute, nil)
	require.NoError(t, err)
	assert.Empty(t, again, "an orphaned run is not claimed again")
	hb, err := js.RunsHeartbeat(ctx, []driver.Claim{claimOf(done)}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, driver.Heartbeat{Gone: []driver.Claim{claimOf(done)}}, hb, "an orphaned run is not heartbeated back to running")
	ok, err := js.RunSnooze(ctx, claimOf(done), 0)
	require.NoError(t, err)
	assert.False(t, ok, "an orphaned run is not given back")
	assert.Equal(t, driver.RunOrphaned, state(t, js, done.ID).State)

	stale := driver.Claim{ID: done.ID, Claim: done.Claim + 1}
	completion, err := js.RunsComplete(ctx, []driver.Claim{stale})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{}, completion, "a claim the orphaned run never had completes nothing")
	completion, err = js.RunsComplete(ctx, []driver.Claim{claimOf(done)})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{Completed: 1}, completion, "the late success of the orphaned attempt is recorded")
	info := state(t, js, done.ID)
	assert.Equal(t, driver.RunCompleted, info.State)
	assert.False(t, info.FinishedAt.IsZero())

	ok, err = js.RunFail(ctx, claimOf(failed), "late failure", time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "the late failure of the orphaned attempt is recorded")
	info = state(t, js, failed.ID)
	assert.Equal(t, driver.RunDiscarded, info.State, "out of attempts")
	assert.Equal(t, "late failure", info.LastError)

	ok, err = js.RunRetry(ctx, retried.ID)
	require.NoError(t, err)
	assert.True(t, ok, "an orphaned run is retried")
	info = state(t, js, retried.ID)
	assert.Equal(t, driver.RunAvailable, info.State)
	assert.Zero(t, info.Attempt)
	assert.True(t, info.FinishedAt.IsZero())
	completion, err = js.RunsComplete(ctx, []driver.Claim{claimOf(retried)})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{}, completion, "once retried, the old attempt's late success matches nothing")
	ok, err = js.RunFail(ctx, claimOf(retried), "late failure", 0)
	require.NoError(t, err)
	assert.False(t, ok, "once retried, the old attempt's late failure matches nothing")
	next, err := js.RunsClaim(ctx, job, "w", 10, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, next, 1, "the retried run is claimed")
	assert.Equal(t, retried.ID, next[0].ID)
	assert.Equal(t, 1, next[0].Attempt)
	assert.Equal(t, retried.Claim+1, next[0].Claim)

	pruneJob := uniqueName("orphan-prune")
	pruned := orphan(t, js, pruneJob, 1)[0]
	n, err := js.RunsPrune(ctx, pruneJob, time.Time{}, time.Millisecond, 10)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "an orphaned run is pruned after the retention")
	_, found, err := js.RunGet(ctx, pruned.ID)
	require.NoError(t, err)
	assert.False(t, found)
}
