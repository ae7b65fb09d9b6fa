package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// TestHostileWorkerOwners: a worker whose owner is a hostile value (one
// that WithOwner accepts) records itself as the worker of the runs it
// claims, byte for byte.
func TestHostileWorkerOwners(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	for _, tc := range testkit.Hostile {
		if testkit.LimitedRefusal(tc.V) != "" {
			continue // refused by WithOwner: see the runtime's TestHostileOwners
		}
		c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner(tc.V))
		require.NoError(t, err, tc.Label)

		j, err := jobs.NewClient(c, lockgendb.NewStore(db))
		require.NoError(t, err)
		done := make(chan struct{}, 1)
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "owned", MaxAttempts: 1, Timeout: 10 * time.Second})
		require.NoError(t, err)
		stop := startWorker(t, j, jobs.WorkerConfig{PollMin: 5 * time.Millisecond, Handlers: map[string]jobs.JobHandler{
			"owned": {Handle: func(context.Context, *jobs.Run) error { done <- struct{}{}; return nil }},
		}})
		info := waitState(t, j, id, jobs.RunCompleted)
		stop()
		<-done
		assert.Equal(t, tc.V, info.Worker, "%s: the run records its worker as itself", tc.Label)
	}
}

// stringArgs is a job's arguments with one string (as generated for
// `args: {s: string}`).
type stringArgs struct {
	S string `json:"s"`
}

// TestHostileJobArguments: a string argument holding any hostile value
// reaches its handler byte for byte, enqueued alone or in a batch, or is
// refused with ErrInvalid before any statement (JSON cannot carry bytes
// that are not UTF-8: encoding/json would replace them with U+FFFD).
// Hostile unique keys are stored as themselves or refused, and unique keys
// that differ only in case or a NUL byte are two runs, never one.
func TestHostileJobArguments(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db, counter := testkit.OpenInjection(t, tdb, func(*mysql.Config) {})
	j := jobsNode(t, db, "args-node")
	var mu sync.Mutex
	got := map[int64]string{}
	// The worker has a pool of its own: only the enqueues are counted.
	worker := jobsNode(t, tdb.Open(t), "worker")
	stop := startWorker(t, worker, jobs.WorkerConfig{PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond, Handlers: map[string]jobs.JobHandler{
		"echo": {Handle: jobs.HandleArgs(func(_ context.Context, run *jobs.Run, a stringArgs) error {
			mu.Lock()
			defer mu.Unlock()
			got[run.ID] = a.S
			return nil
		})},
	}})
	defer stop()
	base := jobs.NewRun{Job: "echo", MaxAttempts: 1, Timeout: 10 * time.Second}
	// The first enqueue checks the server.
	_, err := jobs.EnqueueArgs(ctx, j, nil, base, stringArgs{"warm-up"})
	require.NoError(t, err)

	want := map[int64]string{}
	var batch []stringArgs
	for _, tc := range testkit.Hostile {
		if !utf8.ValidString(tc.V) {
			before := counter.Count()
			_, err := jobs.EnqueueArgs(ctx, j, nil, base, stringArgs{tc.V})
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			assert.Contains(t, err.Error(), "UTF-8", tc.Label)
			err = jobs.EnqueueArgsMany(ctx, j, nil, base, []stringArgs{{"fine"}, {tc.V}})
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			assert.Equal(t, before, counter.Count(), "%s: refused before any statement", tc.Label)
			continue
		}
		id, err := jobs.EnqueueArgs(ctx, j, nil, base, stringArgs{tc.V})
		require.NoError(t, err, tc.Label)
		want[id] = tc.V
		batch = append(batch, stringArgs{tc.V})
	}
	require.NoError(t, jobs.EnqueueArgsMany(ctx, j, nil, base, batch))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1+2*len(want)
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	for id, v := range want {
		assert.Equal(t, []byte(v), []byte(got[id]), "run %d: the handler gets the argument byte for byte", id)
	}
	var fromBatch []string
	for id, v := range got {
		if _, single := want[id]; !single && v != "warm-up" {
			fromBatch = append(fromBatch, v)
		}
	}
	mu.Unlock()
	var wantBatch []string
	for _, a := range batch {
		wantBatch = append(wantBatch, a.S)
	}
	assert.ElementsMatch(t, wantBatch, fromBatch, "EnqueueArgsMany delivers every argument byte for byte")

	// Unique keys: stored as themselves while the run is unfinished, or
	// refused before any statement.
	delayed := base
	delayed.Delay = time.Hour // not claimed while the test looks
	ids := map[int64]string{}
	accepted := 0
	for _, tc := range testkit.Hostile {
		if why := testkit.LimitedRefusal(tc.V); why != "" {
			before := counter.Count()
			_, err := j.Enqueue(ctx, nil, withUniqueKey(delayed, tc.V))
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			assert.Contains(t, err.Error(), why, tc.Label)
			assert.Equal(t, before, counter.Count(), "%s: refused before any statement", tc.Label)
			continue
		}
		accepted++
		id, err := j.Enqueue(ctx, nil, withUniqueKey(delayed, tc.V))
		require.NoError(t, err, tc.Label)
		again, err := j.Enqueue(ctx, nil, withUniqueKey(delayed, tc.V))
		require.NoError(t, err, tc.Label)
		assert.Equal(t, id, again, "%s: the same unique key is the same run", tc.Label)
		ids[id] = tc.V
		info, err := j.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []byte(tc.V), []byte(info.UniqueKey), tc.Label)
	}
	assert.Len(t, ids, accepted, "every accepted unique key is a run of its own")
	pairs := delayed
	pairs.Job = "pairs"
	for _, p := range testkit.Distinct {
		a, err := j.Enqueue(ctx, nil, withUniqueKey(pairs, p[0]))
		require.NoError(t, err)
		b, err := j.Enqueue(ctx, nil, withUniqueKey(pairs, p[1]))
		require.NoError(t, err)
		assert.NotEqual(t, a, b, "unique keys %q and %q are two runs", p[0], p[1])
	}
}

func withUniqueKey(r jobs.NewRun, key string) jobs.NewRun {
	r.UniqueKey = key
	return r
}
