package drivertest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

// testQueues: a pause is a row of the queues table that QueuesPaused and
// QueuesList show; pausing again keeps the time the pause began; a resume
// lifts it and a second resume changes nothing; RunsQueues lists the
// queues that have runs. The tables may be shared with other checks, so
// only this check's queues are looked at.
func testQueues(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	target := js.Server()
	assert.NotEmpty(t, target.QueuesTable, "a job store names its queues table")
	assert.NotEmpty(t, target.QueuesMigration, "and the migration that creates it")
	q, other := uniqueName("q"), uniqueName("other")
	state := func(queue string) (driver.QueueState, bool) {
		t.Helper()
		list, err := js.QueuesList(ctx, 1000)
		require.NoError(t, err)
		i := slices.IndexFunc(list, func(s driver.QueueState) bool { return s.Queue == queue })
		if i < 0 {
			return driver.QueueState{}, false
		}
		return list[i], true
	}
	paused := func() []string {
		t.Helper()
		names, err := js.QueuesPaused(ctx)
		require.NoError(t, err)
		return names
	}

	_, found := state(q)
	assert.False(t, found, "a queue never paused has no row")
	require.NoError(t, js.QueueResume(ctx, q), "resuming a queue never paused is no error")
	_, found = state(q)
	assert.False(t, found, "and writes no row")

	require.NoError(t, js.QueuePause(ctx, q))
	assert.Contains(t, paused(), q)
	assert.NotContains(t, paused(), other)
	first, found := state(q)
	require.True(t, found)
	assert.True(t, first.Paused)
	assert.False(t, first.PausedAt.IsZero())
	assert.Equal(t, first.PausedAt, first.UpdatedAt)
	assert.WithinDuration(t, time.Now(), first.PausedAt, time.Minute, "by the database clock, UTC")

	time.Sleep(5 * time.Millisecond)
	require.NoError(t, js.QueuePause(ctx, q))
	again, _ := state(q)
	assert.Equal(t, first, again, "pausing a paused queue changes nothing")

	require.NoError(t, js.QueueResume(ctx, q))
	assert.NotContains(t, paused(), q)
	resumed, found := state(q)
	require.True(t, found)
	assert.False(t, resumed.Paused)
	assert.True(t, resumed.PausedAt.IsZero())
	assert.True(t, resumed.UpdatedAt.After(first.UpdatedAt), "the resume's time is kept")
	require.NoError(t, js.QueueResume(ctx, q))
	still, _ := state(q)
	assert.Equal(t, resumed, still, "resuming a queue that is not paused changes nothing")

	require.NoError(t, js.QueuePause(ctx, q))
	repaused, _ := state(q)
	assert.True(t, repaused.Paused)
	assert.True(t, repaused.PausedAt.After(first.PausedAt), "a new pause has its own start")

	r := newRun(uniqueName("job"))
	r.Queue = other
	_, err := js.RunInsert(ctx, nil, r)
	require.NoError(t, err)
	queues, err := js.RunsQueues(ctx, 1000)
	require.NoError(t, err)
	assert.Contains(t, queues, other)
	assert.True(t, slices.IsSorted(queues))
	one, err := js.RunsQueues(ctx, 1)
	require.NoError(t, err)
	assert.Len(t, one, 1, "limit")
}
