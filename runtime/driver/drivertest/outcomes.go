package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

// claimOne inserts a run of job with max attempts and claims it for lease.
func claimOne(t *testing.T, js driver.JobStore, job string, attempts int, lease time.Duration) driver.Claim {
	t.Helper()
	ctx := context.Background()
	r := newRun(job)
	r.MaxAttempts = attempts
	_, err := js.RunInsert(ctx, nil, r)
	require.NoError(t, err)
	runs, err := js.RunsClaim(ctx, job, "worker", 1, lease, nil)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	return driver.Claim{ID: runs[0].ID, Claim: runs[0].Claim}
}

// claimRuns inserts n runs of job and claims them for a minute.
func claimRuns(t *testing.T, js driver.JobStore, job string, n int) []driver.Claim {
	t.Helper()
	ctx := context.Background()
	for range n {
		_, err := js.RunInsert(ctx, nil, newRun(job))
		require.NoError(t, err)
	}
	runs, err := js.RunsClaim(ctx, job, "worker", n, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, runs, n)
	claims := make([]driver.Claim, n)
	for i, r := range runs {
		claims[i] = driver.Claim{ID: r.ID, Claim: r.Claim}
	}
	return claims
}

// testJobsDiscard: RunDiscard discards a run with attempts left at once,
// keeping the error, and only with the run's current claim.
func testJobsDiscard(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("discard")
	c := claimOne(t, js, job, 5, time.Minute)
	ok, err := js.RunDiscard(ctx, driver.Claim{ID: c.ID, Claim: c.Claim + 1}, "not mine")
	require.NoError(t, err)
	assert.False(t, ok, "another claim discards nothing")
	ok, err = js.RunDiscard(ctx, c, "bad input: for good")
	require.NoError(t, err)
	assert.True(t, ok)
	info, _, err := js.RunGet(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunDiscarded, info.State, "discarded on attempt 1 of 5")
	assert.Equal(t, "bad input: for good", info.LastError)
	assert.False(t, info.FinishedAt.IsZero())
	ok, err = js.RunDiscard(ctx, c, "twice")
	require.NoError(t, err)
	assert.False(t, ok, "a finished run is not discarded again")
}

// testJobsCancelRunning: a run cancelled while running keeps its claim;
// the next heartbeat reports it cancelled (not extended, not gone); a late
// outcome of the claim changes nothing; it is neither rescued nor retried
// until its deadline (its finished_at) has passed, and then it is retried.
func testJobsCancelRunning(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("cancel")
	const lease = 2 * time.Second
	c := claimOne(t, js, job, 3, lease)
	ok, err := js.RunCancel(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, ok, "a running run is cancelled")
	info, _, err := js.RunGet(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunCancelled, info.State)
	assert.True(t, info.Deadline.IsZero())

	hb, err := js.RunsHeartbeat(ctx, []driver.Claim{c}, lease)
	require.NoError(t, err)
	assert.Equal(t, driver.Heartbeat{Cancelled: []driver.Claim{c}}, hb, "the heartbeat tells the worker")

	done, err := js.RunsComplete(ctx, []driver.Claim{c})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{}, done, "a late success of the claim changes nothing")
	ok, err = js.RunFail(ctx, c, "late", 0)
	require.NoError(t, err)
	assert.False(t, ok, "nor does a late failure")
	ok, err = js.RunRetry(ctx, c.ID)
	require.NoError(t, err)
	assert.False(t, ok, "not retried while its handler may not have been told")

	time.Sleep(lease + 200*time.Millisecond) // past the attempt's deadline
	_, err = js.RunsRescue(ctx, 100)
	require.NoError(t, err)
	info, _, err = js.RunGet(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunCancelled, info.State, "a cancelled run is never rescued")
	ok, err = js.RunRetry(ctx, c.ID)
	require.NoError(t, err)
	assert.True(t, ok, "retried once its deadline has passed")
	runs, err := js.RunsClaim(ctx, job, "worker", 1, lease, nil)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Greater(t, runs[0].Claim, c.Claim, "a new claim")
}

// testJobsCompleteSkipsHeldRows: RunsComplete waits on no row another
// transaction holds. Of a batch of three running runs, one locked by an
// operator's transaction, it completes the other two at once and reports
// the held one busy; once the row is free, the held one completes.
func testJobsCompleteSkipsHeldRows(t *testing.T, js driver.JobStore) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	claims := claimRuns(t, js, uniqueName("complete-held"), 3)
	held := claims[1]
	target := js.Server()
	tx, err := target.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SELECT id FROM "+target.RunsTable+" WHERE id = ? FOR UPDATE", held.ID)
	require.NoError(t, err)

	bounded, stop := context.WithTimeout(ctx, 5*time.Second)
	done, err := js.RunsComplete(bounded, claims)
	stop()
	require.NoError(t, err, "the completion does not wait for the operator")
	assert.Equal(t, driver.Completion{Completed: 2, Busy: []driver.Claim{held}}, done)
	assert.Equal(t, driver.RunCompleted, state(t, js, claims[0].ID).State)
	assert.Equal(t, driver.RunCompleted, state(t, js, claims[2].ID).State)

	require.NoError(t, tx.Rollback())
	done, err = js.RunsComplete(ctx, claims)
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{Completed: 1}, done, "the held run completes once free; the others match nothing")
	assert.Equal(t, driver.RunCompleted, state(t, js, held.ID).State)
}

// testJobsOutcomesSkipHeldRows: RunFail, RunDiscard and RunSnooze wait on
// no row another transaction holds: each returns driver.ErrRunBusy at once
// and writes nothing while an operator's transaction holds its run's row,
// and records the outcome once the row is free.
func testJobsOutcomesSkipHeldRows(t *testing.T, js driver.JobStore) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runs := claimRuns(t, js, uniqueName("outcome-held"), 3)
	outcomes := map[string]func(context.Context, driver.Claim) (bool, error){
		"fail": func(ctx context.Context, c driver.Claim) (bool, error) {
			return js.RunFail(ctx, c, "failed", time.Hour)
		},
		"discard": func(ctx context.Context, c driver.Claim) (bool, error) { return js.RunDiscard(ctx, c, "for good") },
		"snooze":  func(ctx context.Context, c driver.Claim) (bool, error) { return js.RunSnooze(ctx, c, time.Hour) },
	}
	want := map[string]driver.RunState{"fail": driver.RunAvailable, "discard": driver.RunDiscarded, "snooze": driver.RunAvailable}
	claims := map[string]driver.Claim{}
	i := 0
	target := js.Server()
	tx, err := target.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	for name := range outcomes {
		claims[name] = runs[i]
		i++
		_, err = tx.ExecContext(ctx, "SELECT id FROM "+target.RunsTable+" WHERE id = ? FOR UPDATE", claims[name].ID)
		require.NoError(t, err)
	}
	for name, record := range outcomes {
		bounded, stop := context.WithTimeout(ctx, 5*time.Second)
		ok, err := record(bounded, claims[name])
		stop()
		require.ErrorIs(t, err, driver.ErrRunBusy, "%s does not wait for the operator", name)
		assert.False(t, ok, name)
		assert.Equal(t, driver.RunRunning, state(t, js, claims[name].ID).State, "%s wrote nothing", name)
	}
	require.NoError(t, tx.Rollback())
	for name, record := range outcomes {
		ok, err := record(ctx, claims[name])
		require.NoError(t, err, name)
		assert.True(t, ok, "%s is recorded once the row is free", name)
		assert.Equal(t, want[name], state(t, js, claims[name].ID).State, name)
		ok, err = record(ctx, claims[name])
		require.NoError(t, err, "%s again: the run is gone, not busy", name)
		assert.False(t, ok, name)
	}
}
