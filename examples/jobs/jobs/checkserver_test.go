package jobs_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/examples/internal/demodb"
	"github.com/lockgen/lockgen/examples/internal/exampletest"
	"github.com/lockgen/lockgen/examples/jobs/jobs"
)

// TestCheckServerNamesTheMissingRunsTable: CheckServer checks every feature
// the package uses, jobs included: with only the lock table migrated it
// fails with ErrInvalid naming the runs table (a check of the lock feature
// alone passed); with the runs table too (a database made by the
// migrations of before queue pauses), it names the queues table and its
// migration 0003; then the runs' history column and its migration 0004,
// then their headers column and its migration 0005; it passes once those
// are applied.
func TestCheckServerNamesTheMissingRunsTable(t *testing.T) {
	ctx := context.Background()
	cfg, err := demodb.Config(exampletest.FreshDSN(t))
	require.NoError(t, err)
	db, err := demodb.Open(cfg)
	require.NoError(t, err)
	defer db.Close()
	locks, err := os.ReadFile("../migrations/0001_jobsdemo_locks.up.sql")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, string(locks))
	require.NoError(t, err)

	l, err := jobs.New(db)
	require.NoError(t, err)
	err = l.CheckServer(ctx)
	require.True(t, errors.Is(err, jobs.ErrInvalid), "want ErrInvalid, got %v", err)
	assert.Contains(t, err.Error(), "jobsdemo_runs")

	runs, err := os.ReadFile("../migrations/0002_jobsdemo_runs.up.sql")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, string(runs))
	require.NoError(t, err)
	l, err = jobs.New(db) // a new Client probes again
	require.NoError(t, err)
	err = l.CheckServer(ctx)
	require.True(t, errors.Is(err, jobs.ErrInvalid), "want ErrInvalid, got %v", err)
	assert.Contains(t, err.Error(), "table jobsdemo_queues does not exist")
	assert.Contains(t, err.Error(), "apply migration migrations/0003_jobsdemo_queues.up.sql (relative to lockgen.yaml)")

	queues, err := os.ReadFile("../migrations/0003_jobsdemo_queues.up.sql")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, string(queues))
	require.NoError(t, err)
	l, err = jobs.New(db)
	require.NoError(t, err)
	err = l.CheckServer(ctx)
	require.True(t, errors.Is(err, jobs.ErrInvalid), "want ErrInvalid, got %v", err)
	assert.Contains(t, err.Error(), "table jobsdemo_runs in database")
	assert.Contains(t, err.Error(), "lacks column history, which migration migrations/0004_jobsdemo_runs_history.up.sql (relative to lockgen.yaml) adds")

	history, err := os.ReadFile("../migrations/0004_jobsdemo_runs_history.up.sql")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, string(history))
	require.NoError(t, err)
	l, err = jobs.New(db)
	require.NoError(t, err)
	err = l.CheckServer(ctx)
	require.True(t, errors.Is(err, jobs.ErrInvalid), "want ErrInvalid, got %v", err)
	assert.Contains(t, err.Error(), "lacks column headers, which migration migrations/0005_jobsdemo_runs_headers.up.sql (relative to lockgen.yaml) adds")

	headers, err := os.ReadFile("../migrations/0005_jobsdemo_runs_headers.up.sql")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, string(headers))
	require.NoError(t, err)
	l, err = jobs.New(db)
	require.NoError(t, err)
	require.NoError(t, l.CheckServer(ctx))
}
