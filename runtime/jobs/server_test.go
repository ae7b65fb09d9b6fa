package jobs_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// TestServerRefusesConnectionWithoutParseTime: without parseTime=true the
// workers could never scan a run (they used to log a Scan error every 2 s
// for ever while RunJobs returned nil), so every lock and job call, and
// Worker.Run at once, fail with ErrInvalid saying what to set.
func TestServerRefusesConnectionWithoutParseTime(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	cfg := tdb.Config.Clone()
	cfg.ParseTime = false
	db := sql.OpenDB(testkit.Connector(t, cfg))
	t.Cleanup(func() { _ = db.Close() })
	j := jobsNode(t, db, "noparse")

	_, err := j.Enqueue(ctx, nil, newRun("x"))
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "parseTime=true")

	w, err := j.NewWorker(jobs.WorkerConfig{Handlers: map[string]jobs.JobHandler{"x": {Handle: func(context.Context, *jobs.Run) error { return nil }}}})
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = w.Run(runCtx)
	require.ErrorIs(t, err, runtime.ErrInvalid, "Run must fail at once, not claim for ever")
	assert.NoError(t, runCtx.Err(), "Run returned before its context ended")

	c, err := runtime.NewClient(lockgendb.NewStore(db))
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "noparse", TTL: time.Second})
	require.NoError(t, err)
	_, err = l.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorIs(t, c.CheckServer(ctx), runtime.ErrInvalid)
}

// TestServerNamesMissingTables: a missing runs table is refused with the
// table and the migrations to apply, not a raw error 1146; locks, whose
// table exists, go on working; once the table is created the same Client
// works (a probe that found tables missing is not kept).
func TestServerNamesMissingTables(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	tdb.Exec(t, "DROP TABLE lockgen_runs")
	db := tdb.Open(t)
	j := jobsNode(t, db, "missing")

	_, err := j.Enqueue(ctx, nil, newRun("x"))
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "table lockgen_runs does not exist")
	assert.ErrorContains(t, err, "apply migration "+lockgendb.Store{}.Server().RunsMigration, "the error names the migration that creates the table")

	c, err := runtime.NewClient(lockgendb.NewStore(db))
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "present", TTL: time.Second})
	require.NoError(t, err)
	lease, err := l.Try(ctx, "")
	require.NoError(t, err, "the lock table exists")
	require.NoError(t, lease.Release(ctx))

	tdb.ApplySchema(t)
	_, err = j.Enqueue(ctx, nil, newRun("x"))
	require.NoError(t, err)
}

// TestServerNamesTablesTheUserMayNotUse: the application's user does not
// see a table it has no privilege on (information_schema hides it, and the
// server answers 1142 whether it exists or not), so the refusal names both
// causes; once the admin grants it, the same Client works.
func TestServerNamesTablesTheUserMayNotUse(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	tdb.Exec(t, "REVOKE "+testdb.Privileges+" ON lockgen_runs FROM '"+tdb.User+"'@'%'")
	j := jobsNode(t, tdb.Open(t), "ungranted")
	_, err := j.Enqueue(ctx, nil, newRun("x"))
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "table lockgen_runs does not exist in database \""+tdb.Name+"\", or user "+tdb.User+"@% has no privilege on it")
	tdb.Grant(t, "lockgen_runs")
	_, err = j.Enqueue(ctx, nil, newRun("x"))
	require.NoError(t, err)
}

// TestServerProbeRunsOnce: the probe costs a few statements at a Client's
// first call, and nothing after: the second acquire is one statement.
func TestServerProbeRunsOnce(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	c, err := runtime.NewClient(lockgendb.NewStore(db))
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "probed", TTL: time.Minute})
	require.NoError(t, err)

	before := counter.Count()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	first := counter.Count() - before
	require.NoError(t, lease.Release(ctx))
	assert.Greater(t, first, int64(1), "the first acquire probes the server")

	before = counter.Count()
	lease, err = l.Try(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, int64(1), counter.Count()-before, "later acquires do not probe again")
	require.NoError(t, lease.Release(ctx))
}

// TestServerRefusesLocOtherThanUTC: the driver writes and reads DATETIME
// values in the DSN's loc, so two nodes whose loc differed stored one tick
// as two scheduled_at values and ran it twice. A node whose loc is not UTC
// is refused (ErrInvalid, naming loc=UTC) before it writes anything, while
// a UTC node beside it works.
func TestServerRefusesLocOtherThanUTC(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	utc := jobsNode(t, tdb.Open(t), "utc")
	_, err := utc.Enqueue(ctx, nil, newRun("x"))
	require.NoError(t, err)

	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	cfg := tdb.Config.Clone()
	cfg.Loc = shanghai
	db := sql.OpenDB(testkit.Connector(t, cfg))
	t.Cleanup(func() { _ = db.Close() })
	other := jobsNode(t, db, "shanghai")
	_, err = other.Enqueue(ctx, nil, newRun("x"))
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "loc=UTC")

	w, err := other.NewWorker(jobs.WorkerConfig{Handlers: map[string]jobs.JobHandler{"x": {Handle: func(context.Context, *jobs.Run) error { return nil }}}})
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.ErrorIs(t, w.Run(runCtx), runtime.ErrInvalid)
	assert.NoError(t, runCtx.Err(), "Run returned at once")

	c, err := runtime.NewClient(lockgendb.NewStore(db))
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "loc", TTL: time.Second})
	require.NoError(t, err)
	_, err = l.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrInvalid)
}

// TestServerProbeNeverWaitsForAConnectionUnderATransaction: a first
// Enqueue inside the caller's transaction on a pool of one connection must
// not probe the server through the pool (the probe would wait for a second
// connection that the transaction holds): it probes through the
// transaction.
func TestServerProbeNeverWaitsForAConnectionUnderATransaction(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	db.SetMaxOpenConns(1)
	j := jobsNode(t, db, "one-conn")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = j.Enqueue(ctx, tx, newRun("x"))
	require.NoError(t, err, "the enqueue ran in the transaction without waiting for the pool")
	require.NoError(t, tx.Commit())
	_, err = j.Enqueue(ctx, nil, newRun("x"))
	require.NoError(t, err, "outside a transaction it probes")
}
