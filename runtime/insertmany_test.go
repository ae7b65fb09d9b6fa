package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestInsertStmts: batches of many sizes (more than are kept prepared),
// alone and in transactions, insert exactly their runs; a server that
// refuses to prepare gets the statement as text from then on.
func TestInsertStmts(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t).Open(t)
	s := NewInsertStmts(db, "lockgen_runs")
	batch := func(n int) []NewRun {
		runs := make([]NewRun, n)
		for i := range runs {
			runs[i] = NewRun{Job: "noop", Queue: DefaultQueue, Args: []byte("{}"), MaxAttempts: 1, Timeout: time.Second}
		}
		return runs
	}
	count := func() (n int) {
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs").Scan(&n))
		return n
	}
	want := 0
	for round := 0; round < 2; round++ {
		for n := 1; n <= 6; n++ {
			require.NoError(t, s.Exec(ctx, nil, batch(n)))
			want += n
			assert.Equal(t, want, count())
			assert.LessOrEqual(t, len(s.used), maxPreparedSizes)
			assert.Len(t, s.stmts, len(s.used))
		}
	}

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Exec(ctx, tx, batch(6)))
	require.NoError(t, tx.Rollback())
	assert.Equal(t, want, count(), "rolled back")
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Exec(ctx, tx, batch(6)))
	require.NoError(t, tx.Commit())
	assert.Equal(t, want+6, count(), "committed")

	missing := NewInsertStmts(db, "no_such_runs")
	err = missing.Exec(ctx, nil, batch(2))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1146", "the text statement's own error")
	assert.True(t, missing.refused, "no more prepares after the server refused one")
	assert.Error(t, missing.Exec(ctx, nil, batch(2)))
}
