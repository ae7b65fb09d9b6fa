package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/ops"
)

// TestRetryRunsByFilter: a bulk retry makes every finished run the filter
// selects due again, and only those; a run whose unique key an unfinished
// run of its job took meanwhile is skipped and counted, and a bad filter
// names its field.
func TestRetryRunsByFilter(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	finish := func(id int64, state string, ago time.Duration) {
		t.Helper()
		_, err := f.db.Exec("UPDATE lockgen_runs SET state = ?, attempt = 3, finished_at = UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND WHERE id = ?", state, ago.Microseconds(), id)
		require.NoError(t, err)
	}
	var testDiscarded, mailDiscarded []int64
	for i := 0; i < 4; i++ {
		id := f.enqueue(t, jobs.NewRun{Job: "test"})
		finish(id, "discarded", time.Duration(i+1)*time.Hour)
		testDiscarded = append(testDiscarded, id)
		id = f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
		finish(id, "discarded", time.Duration(i+1)*time.Hour)
		mailDiscarded = append(mailDiscarded, id)
	}
	cancelled := f.enqueue(t, jobs.NewRun{Job: "test"})
	finish(cancelled, "cancelled", time.Hour)
	taken := f.enqueue(t, jobs.NewRun{Job: "test", UniqueKey: "u1"})
	finish(taken, "discarded", 30*time.Minute)
	f.enqueue(t, jobs.NewRun{Job: "test", UniqueKey: "u1"}) // holds u1 now

	state := func(id int64) string {
		t.Helper()
		r, err := f.ops.Run(ctx, id)
		require.NoError(t, err)
		return r.State
	}
	// The two oldest discarded runs of test: finished 3 and 4 hours ago.
	before := time.Now().Add(-150 * time.Minute)
	got, err := f.ops.RetryRuns(ctx, ops.RetryFilter{Job: "test", State: "discarded", FinishedBefore: &before})
	require.NoError(t, err)
	assert.Equal(t, ops.Retried{Retried: 2}, got)
	assert.Equal(t, []string{"discarded", "discarded", "available", "available"},
		[]string{state(testDiscarded[0]), state(testDiscarded[1]), state(testDiscarded[2]), state(testDiscarded[3])})

	got, err = f.ops.RetryRuns(ctx, ops.RetryFilter{Queue: "mail", State: "discarded"})
	require.NoError(t, err)
	assert.Equal(t, ops.Retried{Retried: 4}, got)
	for _, id := range mailDiscarded {
		assert.Equal(t, "available", state(id))
	}
	r, err := f.ops.Run(ctx, mailDiscarded[0])
	require.NoError(t, err)
	assert.Zero(t, r.Attempt, "attempts count from zero again")
	assert.Nil(t, r.FinishedAt)

	got, err = f.ops.RetryRuns(ctx, ops.RetryFilter{State: "discarded"})
	require.NoError(t, err)
	assert.Equal(t, ops.Retried{Retried: 2, Skipped: 1}, got, "the two newer discarded test runs; the one whose unique key is taken is left")
	assert.Equal(t, "discarded", state(taken))
	assert.Equal(t, "cancelled", state(cancelled), "another state is not touched")

	for _, c := range []struct {
		filter ops.RetryFilter
		field  string
	}{
		{ops.RetryFilter{}, "state"},
		{ops.RetryFilter{State: "available"}, "state"},
		{ops.RetryFilter{State: "discarded", Job: "nope"}, "job"},
		{ops.RetryFilter{State: "discarded", Queue: "nope"}, "queue"},
		{ops.RetryFilter{State: "discarded", FinishedAfter: &before, FinishedBefore: &before}, "finished_before"},
	} {
		_, err := f.ops.RetryRuns(ctx, c.filter)
		requireCode(t, err, ops.CodeInvalid, c.field)
	}
}
