package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

func newRun(job string) driver.NewRun {
	return driver.NewRun{Job: job, Queue: job, Args: []byte(`{}`), MaxAttempts: 2, Timeout: time.Minute}
}

func testJobs(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("job")
	id, err := js.RunInsert(ctx, nil, newRun(job))
	require.NoError(t, err)
	require.Positive(t, id)
	info, found, err := js.RunGet(ctx, id)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, driver.RunAvailable, info.State)
	assert.Equal(t, job, info.Job)

	unique := newRun(job)
	unique.UniqueKey = "u"
	u1, err := js.RunInsert(ctx, nil, unique)
	require.NoError(t, err)
	u2, err := js.RunInsert(ctx, nil, unique)
	require.NoError(t, err)
	assert.Equal(t, u1, u2, "an active unique key returns the existing run")

	runs, err := js.RunsClaim(ctx, job, "w", 10, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	for _, r := range runs {
		assert.Equal(t, 1, r.Attempt)
		assert.EqualValues(t, 1, r.Claim)
	}
	again, err := js.RunsClaim(ctx, job, "w2", 10, time.Minute, nil)
	require.NoError(t, err)
	assert.Empty(t, again, "claimed runs are not claimed twice")

	claims := []driver.Claim{{ID: runs[0].ID, Claim: runs[0].Claim}, {ID: runs[1].ID, Claim: runs[1].Claim}}
	hb, err := js.RunsHeartbeat(ctx, claims, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, driver.Heartbeat{Extended: claims}, hb)
	stale := driver.Claim{ID: runs[0].ID, Claim: runs[0].Claim + 1}
	done, err := js.RunsComplete(ctx, []driver.Claim{stale})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{}, done, "a claim the run no longer holds completes nothing")
	done, err = js.RunsComplete(ctx, claims[:1])
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{Completed: 1}, done)
	info, _, err = js.RunGet(ctx, runs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunCompleted, info.State)

	ok, err := js.RunFail(ctx, claims[1], "boom", 0)
	require.NoError(t, err)
	assert.True(t, ok)
	info, _, err = js.RunGet(ctx, runs[1].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunAvailable, info.State, "a failed attempt with attempts left is due again")
	assert.Equal(t, "boom", info.LastError)
	second, err := js.RunsClaim(ctx, job, "w", 10, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, second, 1)
	assert.Equal(t, 2, second[0].Attempt)
	ok, err = js.RunFail(ctx, driver.Claim{ID: second[0].ID, Claim: second[0].Claim}, "boom again", 0)
	require.NoError(t, err)
	assert.True(t, ok)
	info, _, err = js.RunGet(ctx, second[0].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunDiscarded, info.State, "the last attempt's failure discards the run")

	ok, err = js.RunRetry(ctx, second[0].ID)
	require.NoError(t, err)
	assert.True(t, ok, "a discarded run is restored")
	ok, err = js.RunCancel(ctx, second[0].ID)
	require.NoError(t, err)
	assert.True(t, ok, "a run that has not started is cancelled")
	info, _, err = js.RunGet(ctx, second[0].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunCancelled, info.State)

	tick := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	_, found, err = js.RunLastTick(ctx, job)
	require.NoError(t, err)
	assert.False(t, found)
	ticked := newRun(job)
	ticked.ScheduledAt = tick
	t1, err := js.RunInsert(ctx, nil, ticked)
	require.NoError(t, err)
	t2, err := js.RunInsert(ctx, nil, ticked)
	require.NoError(t, err)
	assert.Equal(t, t1, t2, "one run per tick")
	require.NoError(t, js.RunInsertSkipped(ctx, job, job, tick.Add(time.Hour), "test"))
	last, found, err := js.RunLastTick(ctx, job)
	require.NoError(t, err)
	require.True(t, found)
	assert.True(t, last.Equal(tick.Add(time.Hour)), "the newest tick, skipped or not: %v", last)

	// A job store runs on the pool of the lock store it comes with (the
	// generated Store is both), and the caller's transaction is on it too.
	s, ok := js.(driver.Store)
	require.True(t, ok, "the job store is also a driver.Store, whose pool the caller's transaction is on")
	tx, err := s.Server().DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, js.RunInsertMany(ctx, tx, []driver.NewRun{newRun(job + "-many"), newRun(job + "-many")}))
	require.NoError(t, tx.Rollback())
	none, err := js.RunsClaim(ctx, job+"-many", "w", 10, time.Minute, nil)
	require.NoError(t, err)
	assert.Empty(t, none, "runs inserted in a rolled back transaction do not exist")
	require.NoError(t, js.RunInsertMany(ctx, nil, []driver.NewRun{newRun(job + "-many"), newRun(job + "-many")}))
	many, err := js.RunsClaim(ctx, job+"-many", "w", 10, time.Minute, nil)
	require.NoError(t, err)
	assert.Len(t, many, 2)
}

func testJobsRescue(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("rescue")
	id, err := js.RunInsert(ctx, nil, newRun(job))
	require.NoError(t, err)
	runs, err := js.RunsClaim(ctx, job, "w", 1, 100*time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	time.Sleep(300 * time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := js.RunsRescue(ctx, 100)
		require.NoError(t, err)
		info, _, err := js.RunGet(ctx, id)
		require.NoError(t, err)
		return info.State == driver.RunAvailable
	}, 5*time.Second, 50*time.Millisecond, "a run past its deadline is due again")
	done, err := js.RunsComplete(ctx, []driver.Claim{{ID: id, Claim: runs[0].Claim}})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{}, done, "the rescued attempt's late completion is refused")
	next, err := js.RunsClaim(ctx, job, "w", 1, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, next, 1)
	assert.Equal(t, runs[0].Claim+1, next[0].Claim, "the next claim is a new claim")

	pruneJob := uniqueName("prune")
	pid, err := js.RunInsert(ctx, nil, newRun(pruneJob))
	require.NoError(t, err)
	ok, err := js.RunCancel(ctx, pid)
	require.NoError(t, err)
	require.True(t, ok)
	time.Sleep(200 * time.Millisecond)
	n, err := js.RunsPrune(ctx, pruneJob, time.Time{}, 100*time.Millisecond, 10)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "a finished run older than the age is pruned")
	_, found, err := js.RunGet(ctx, pid)
	require.NoError(t, err)
	assert.False(t, found)
}

// testJobsClaimOrder: a claim takes due runs highest priority first, then
// oldest run_at, then lowest id, and returns them in that order; given a
// place (driver.RunCursor), only the runs after it, however many due runs
// come before it (of a higher priority, of an earlier run_at though of a
// higher id).
func testJobsClaimOrder(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("order")
	run := func(priority int, delay time.Duration) driver.NewRun {
		r := newRun(job)
		r.Priority, r.Delay = priority, delay
		return r
	}
	// One statement: A, B, C, D and E share run_at, so the ids order A, B
	// and D. Y comes later (a higher id) but is due an hour earlier.
	require.NoError(t, js.RunInsertMany(ctx, nil, []driver.NewRun{run(0, 0), run(0, 0), run(5, 0), run(0, 0), run(-1, 0)}))
	y, err := js.RunInsert(ctx, nil, run(0, -time.Hour))
	require.NoError(t, err)
	s, ok := js.(driver.Store)
	require.True(t, ok)
	target := s.Server()
	rows, err := target.DB.QueryContext(ctx, "SELECT id, priority, run_at FROM "+target.RunsTable+" WHERE job = ? ORDER BY id", job)
	require.NoError(t, err)
	var places []driver.RunCursor
	for rows.Next() {
		var c driver.RunCursor
		require.NoError(t, rows.Scan(&c.ID, &c.Priority, &c.RunAt))
		places = append(places, c)
	}
	require.NoError(t, rows.Err())
	require.Len(t, places, 6)
	a, b, c, d, e := places[0], places[1].ID, places[2].ID, places[3].ID, places[4].ID
	require.Equal(t, y, places[5].ID)
	ids := func(runs []driver.Run) []int64 {
		out := []int64{}
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}

	next, err := js.RunsClaim(ctx, job, "w", 2, time.Minute, &a)
	require.NoError(t, err)
	assert.Equal(t, []int64{b, d}, ids(next), "after A: B and D (the same priority and run_at, higher ids); not C (a higher priority) nor Y (an earlier run_at)")
	late, err := js.RunInsert(ctx, nil, run(9, 0))
	require.NoError(t, err)
	place := next[1].Place()
	rest, err := js.RunsClaim(ctx, job, "w", 10, time.Minute, &place)
	require.NoError(t, err)
	assert.Equal(t, []int64{e}, ids(rest), "after D: the lower priority; not the later run of priority 9")
	place = rest[0].Place()
	none, err := js.RunsClaim(ctx, job, "w", 10, time.Minute, &place)
	require.NoError(t, err)
	assert.Empty(t, none, "nothing after the last")
	first, err := js.RunsClaim(ctx, job, "w", 10, time.Minute, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{late, c, y, a.ID}, ids(first), "from the first: every run before the places, in claim order")
}
