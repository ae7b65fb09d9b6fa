package jobs_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// Failing at startup, not later: what a new user gets wrong (a DSN without
// parseTime, a missing migration, a nil transaction, a run in the wrong
// queue) must fail at once and say so, at every entry point.

// testHandlers implements the generated genstore.JobHandlers.
type testHandlers struct{}

func (testHandlers) Test(context.Context, *jobs.Run, genstore.TestArgs) error { return nil }

// noParseTime opens the test database without parseTime=true.
func noParseTime(t *testing.T, tdb *testdb.DB) *sql.DB {
	t.Helper()
	cfg := tdb.Config.Clone()
	cfg.ParseTime = false
	db := sql.OpenDB(testkit.Connector(t, cfg))
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestRunJobsFailsAtOnceWhenItCannotStart: the generated RunJobs used to
// wait for the pruner until ctx ended when its workers' start check failed
// (a service without CheckServer stayed "healthy" and ran nothing). It
// must return the start error at once.
func TestRunJobsFailsAtOnceWhenItCannotStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		open  func(t *testing.T, tdb *testdb.DB) *sql.DB
		error string
	}{
		{"no parseTime", noParseTime, "parseTime=true"},
		{"no runs table", func(t *testing.T, tdb *testdb.DB) *sql.DB {
			tdb.Exec(t, "DROP TABLE lockgen_runs")
			return tdb.Open(t)
		}, "table lockgen_runs does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tdb := testdb.New(t)
			l, err := genstore.New(tc.open(t, tdb))
			require.NoError(t, err)
			// Generous: the probe takes a few statements on a loaded
			// machine; the bug waited for the whole of ctx.
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			err = l.RunJobs(ctx, testHandlers{})
			require.ErrorIs(t, err, runtime.ErrInvalid)
			assert.ErrorContains(t, err, tc.error)
			assert.NoError(t, ctx.Err(), "RunJobs returned before its context ended, not when it ended")
		})
	}
}

// TestEveryEntryPointRefusesAConnectionWithoutParseTime: without
// parseTime=true leader election and Prune used to work, Holder
// (<Name>Leader, <Name>LockHolder), Get (JobRun) returned a raw Scan
// error, and Cancel, Retry and Prune of runs worked. Every entry point
// must fail with the same ErrInvalid message, each from a fresh client
// (so each probes by itself).
func TestEveryEntryPointRefusesAConnectionWithoutParseTime(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	// A run and a held lock row, written through a good connection, so
	// that the reads have something to scan.
	good := jobsNode(t, tdb.Open(t), "good")
	id, err := good.Enqueue(ctx, nil, newRun("x"))
	require.NoError(t, err)
	gc, err := runtime.NewClient(lockgendb.NewStore(tdb.Open(t)))
	require.NoError(t, err)
	gl, err := gc.Lock(runtime.LockConfig{Name: "leader", TTL: time.Minute})
	require.NoError(t, err)
	held, err := gl.Try(ctx, "")
	require.NoError(t, err)
	defer func() { _ = held.Release(ctx) }()

	bad := noParseTime(t, tdb)
	fresh := func(t *testing.T) (*runtime.Client, *jobs.Client) {
		store := lockgendb.NewStore(bad)
		c, err := runtime.NewClient(store)
		require.NoError(t, err)
		j, err := jobs.NewClient(c, store)
		require.NoError(t, err)
		return c, j
	}
	lock := func(t *testing.T, c *runtime.Client, keyed bool) *runtime.Lock {
		l, err := c.Lock(runtime.LockConfig{Name: "leader", TTL: time.Minute, Keyed: keyed})
		require.NoError(t, err)
		return l
	}
	c, _ := fresh(t)
	want := c.CheckServer(ctx)
	require.ErrorIs(t, want, runtime.ErrInvalid)
	require.ErrorContains(t, want, "parseTime=true")

	bounded := func(t *testing.T, run func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		err := run(ctx)
		assert.NoError(t, ctx.Err(), "returned at once, not when its context ended")
		return err
	}
	handlers := map[string]jobs.JobHandler{"x": {Handle: func(context.Context, *jobs.Run) error { return nil }}}
	every, err := jobs.ParseSchedule("@every 1s", "")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func(t *testing.T) error
	}{
		{"Lock.Try", func(t *testing.T) error { c, _ := fresh(t); _, err := lock(t, c, false).Try(ctx, ""); return err }},
		{"Lock.Acquire", func(t *testing.T) error { c, _ := fresh(t); _, err := lock(t, c, false).Acquire(ctx, ""); return err }},
		{"Lock.With", func(t *testing.T) error {
			c, _ := fresh(t)
			return lock(t, c, false).With(ctx, "", func(context.Context, *runtime.Lease) error { return nil })
		}},
		{"Lock.Holder", func(t *testing.T) error { c, _ := fresh(t); _, err := lock(t, c, false).Holder(ctx, ""); return err }},
		{"Lock.Prune", func(t *testing.T) error {
			c, _ := fresh(t)
			_, err := lock(t, c, true).Prune(ctx, time.Hour)
			return err
		}},
		{"Lock.RunAsLeader", func(t *testing.T) error {
			c, _ := fresh(t)
			return bounded(t, func(ctx context.Context) error {
				return lock(t, c, false).RunAsLeader(ctx, func(context.Context, *runtime.Lease) error { return nil })
			})
		}},
		{"Enqueue", func(t *testing.T) error { _, j := fresh(t); _, err := j.Enqueue(ctx, nil, newRun("x")); return err }},
		{"Enqueue in a transaction", func(t *testing.T) error {
			_, j := fresh(t)
			tx, err := bad.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			_, err = j.Enqueue(ctx, tx, newRun("x"))
			return err
		}},
		{"EnqueueMany", func(t *testing.T) error { _, j := fresh(t); return j.EnqueueMany(ctx, nil, []jobs.NewRun{newRun("x")}) }},
		{"Get", func(t *testing.T) error { _, j := fresh(t); _, err := j.Get(ctx, id); return err }},
		{"Cancel", func(t *testing.T) error { _, j := fresh(t); _, err := j.Cancel(ctx, id); return err }},
		{"Retry", func(t *testing.T) error { _, j := fresh(t); _, err := j.Retry(ctx, id); return err }},
		{"Prune", func(t *testing.T) error { _, j := fresh(t); _, err := j.Prune(ctx, "x", time.Hour, 10); return err }},
		{"Worker.Run", func(t *testing.T) error {
			_, j := fresh(t)
			w, err := j.NewWorker(jobs.WorkerConfig{Handlers: handlers})
			require.NoError(t, err)
			return bounded(t, w.Run)
		}},
		{"Scheduler.Run", func(t *testing.T) error {
			_, j := fresh(t)
			s, err := j.NewScheduler([]jobs.ScheduledJob{{Name: "x", Schedule: every, MaxAttempts: 1, Timeout: time.Second}})
			require.NoError(t, err)
			return bounded(t, s.Run)
		}},
		{"RunNode", func(t *testing.T) error {
			_, j := fresh(t)
			return bounded(t, func(ctx context.Context) error {
				return j.RunNode(ctx, jobs.NodeConfig{
					Queues:    []jobs.QueueConfig{{Name: jobs.DefaultQueue}},
					Handlers:  map[string]jobs.QueuedHandler{"x": {Queue: jobs.DefaultQueue, JobHandler: handlers["x"]}},
					Retention: []jobs.Retention{{Job: "x", Keep: time.Hour}},
				})
			})
		}},
		{"generated JobRun", func(t *testing.T) error {
			l, err := genstore.New(bad)
			require.NoError(t, err)
			_, err = l.JobRun(ctx, id)
			return err
		}},
		{"generated TestLockHolder", func(t *testing.T) error {
			l, err := genstore.New(bad)
			require.NoError(t, err)
			_, err = l.TestLockHolder(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(t)
			require.ErrorIs(t, err, runtime.ErrInvalid)
			assert.Equal(t, want.Error(), err.Error(), "the same message as CheckServer's")
		})
	}
}

// TestEnqueueTxRefusesANilTransaction: Enqueue<Job>Tx(ctx, nil, …) used to
// enqueue outside any transaction, so the run existed even when the
// caller's transaction rolled back.
func TestEnqueueTxRefusesANilTransaction(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	db := tdb.Open(t)
	l, err := genstore.New(db)
	require.NoError(t, err)
	_, err = l.EnqueueTestTx(ctx, nil, genstore.TestArgs{N: 1})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "EnqueueTestTx needs a transaction")
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockgen_runs").Scan(&n))
	assert.Zero(t, n, "no run was enqueued")

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = l.EnqueueTestTx(ctx, tx, genstore.TestArgs{N: 1})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockgen_runs").Scan(&n))
	assert.Zero(t, n, "the run went with the transaction")
}

// TestEnqueueRefusesAnOptionThatMovesTheRun: a job's queue is declared in
// the spec; an EnqueueOption that puts the run in another queue would
// leave it to workers without its handler, or to none.
func TestEnqueueRefusesAnOptionThatMovesTheRun(t *testing.T) {
	ctx := context.Background()
	l, err := genstore.New(testdb.New(t).Open(t))
	require.NoError(t, err)
	_, err = l.EnqueueTest(ctx, genstore.TestArgs{N: 1}, func(r *jobs.NewRun) { r.Queue = "elsewhere" })
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, `job "test" is declared in queue "default"`)
}

// TestRunInTheWrongQueueSaysWhereItsJobIs: a run of job a enqueued in
// queue qb, whose worker has no handler for a, used to fail with "no
// handler for job" although the node handles a, in queue qa. The attempt's
// error names the job's queue.
func TestRunInTheWrongQueueSaysWhereItsJobIs(t *testing.T) {
	ctx := context.Background()
	j := jobsNode(t, testdb.New(t).Open(t), "wrongq")
	r := newRun("a")
	r.Queue, r.MaxAttempts = "qb", 1
	id, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	ok := func(context.Context, *jobs.Run) error { return nil }
	stopNode(t, j, jobs.NodeConfig{
		Queues: []jobs.QueueConfig{{Name: "qa"}, {Name: "qb"}},
		Handlers: map[string]jobs.QueuedHandler{
			"a": {Queue: "qa", JobHandler: jobs.JobHandler{Handle: ok}},
			"b": {Queue: "qb", JobHandler: jobs.JobHandler{Handle: ok}},
		},
	})
	info := waitState(t, j, id, jobs.RunDiscarded)
	assert.Contains(t, info.LastError, `run `)
	assert.Contains(t, info.LastError, `is in queue "qb", but job "a" is declared in queue "qa"`)
}

// TestRunNodeWarnsOfRunsInAQueueNoWorkerWorks: a due run in a queue no
// worker works used to sit there in silence for ever. RunNode warns of it
// as it starts (and every PruneEvery), naming the queue and the job; a
// queue declared external is left to its HTTP consumers in silence.
func TestRunNodeWarnsOfRunsInAQueueNoWorkerWorks(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t).Open(t)
	warnings := make(chan slog.Record, 16)
	store := lockgendb.NewStore(db)
	c, err := runtime.NewClient(store, runtime.WithLogger(slog.New(recordHandler{warnings})))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	r := newRun("a")
	r.Queue = "nowhere"
	_, err = j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	// A queue worked over HTTP (lockgen.yaml's external: true) is neither
	// claimed nor warned of.
	ext := newRun("e")
	ext.Queue = "by_http"
	extID, err := j.Enqueue(ctx, nil, ext)
	require.NoError(t, err)
	stopNode(t, j, jobs.NodeConfig{
		Queues:   []jobs.QueueConfig{{Name: "qa"}},
		Handlers: map[string]jobs.QueuedHandler{"a": {Queue: "qa", JobHandler: jobs.JobHandler{Handle: func(context.Context, *jobs.Run) error { return nil }}}},
		External: []string{"by_http"},
	})
	deadline := time.After(90 * time.Second) // a record comes at start; generous for a loaded machine
	for {
		select {
		case rec := <-warnings:
			attrs := map[string]string{}
			rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			assert.NotEqual(t, "by_http", attrs["queue"], "an external queue is warned of: %s", rec.Message)
			if rec.Level == slog.LevelWarn && attrs["queue"] == "nowhere" {
				assert.Equal(t, "a", attrs["job"])
				assert.Equal(t, "1", attrs["due_runs"])
				assert.True(t, strings.Contains(rec.Message, "no worker"), rec.Message)
				info, err := j.Get(ctx, extID)
				require.NoError(t, err)
				assert.Equal(t, jobs.RunAvailable, info.State, "no worker claims a run of an external queue")
				err = j.RunNode(ctx, jobs.NodeConfig{Queues: []jobs.QueueConfig{{Name: "qa"}}, External: []string{"qa"}})
				assert.ErrorIs(t, err, runtime.ErrInvalid, "a queue both worked and external")
				return
			}
		case <-deadline:
			t.Fatal("no warning about the run in queue nowhere")
		}
	}
}

// stopNode runs RunNode until the test ends and checks it returned nil.
func stopNode(t *testing.T, j *jobs.Client, cfg jobs.NodeConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.RunNode(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
}

// recordHandler sends WARN and ERROR records to a channel, dropping them
// when it is full.
type recordHandler struct{ ch chan<- slog.Record }

func (h recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Clone():
	default:
	}
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// TestServerNamesWhatATableLacks: a table that lacks a column or an index
// of its migration (dropped by hand, or created by another version of the
// migrations) used to pass CheckServer; the enqueue worked and the workers
// then logged "Unknown column" at WARN for ever. Every entry point refuses
// it with ErrInvalid naming the table, what it lacks and the migration;
// once the table matches again the same client works.
func TestServerNamesWhatATableLacks(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	tdb.Exec(t, "ALTER TABLE lockgen_runs DROP COLUMN claim_ref, DROP INDEX lockgen_runs_claim")
	tdb.Exec(t, "ALTER TABLE lockgen_runs DROP INDEX lockgen_runs_dedupe, ADD KEY lockgen_runs_dedupe (job, dedupe)")
	l, err := genstore.New(tdb.Open(t))
	require.NoError(t, err)
	migration := "migration " + lockgendb.Store{}.Server().RunsMigration

	err = l.CheckServer(ctx)
	require.ErrorIs(t, err, runtime.ErrInvalid)
	for _, part := range []string{"table lockgen_runs", "does not match " + migration, "column claim_ref",
		"index KEY lockgen_runs_claim (queue, state, priority, run_at)",
		"index UNIQUE KEY lockgen_runs_dedupe (job, dedupe) (it has KEY lockgen_runs_dedupe (job, dedupe))"} {
		assert.ErrorContains(t, err, part)
	}
	_, err = l.EnqueueTest(ctx, genstore.TestArgs{N: 1})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "column claim_ref")
	runCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err = l.RunJobs(runCtx, testHandlers{})
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "column claim_ref")
	assert.NoError(t, runCtx.Err(), "RunJobs returned at once")

	tdb.Exec(t, "ALTER TABLE lockgen_runs ADD COLUMN claim_ref VARCHAR(41) NULL, ADD KEY lockgen_runs_claim (queue, state, priority DESC, run_at), "+
		"DROP INDEX lockgen_runs_dedupe, ADD UNIQUE KEY lockgen_runs_dedupe (job, dedupe)")
	_, err = l.EnqueueTest(ctx, genstore.TestArgs{N: 1})
	require.NoError(t, err, "the table matches again: the refusal was not kept")

	// The lock table too, with its own migration.
	tdb2 := testdb.New(t)
	tdb2.Exec(t, "ALTER TABLE lockgen_locks DROP COLUMN holding")
	l2, err := genstore.New(tdb2.Open(t))
	require.NoError(t, err)
	_, err = l2.TryTestLock(ctx)
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "table lockgen_locks")
	assert.ErrorContains(t, err, "does not match migration "+lockgendb.Store{}.Server().LocksMigration+": it lacks column holding")
}
