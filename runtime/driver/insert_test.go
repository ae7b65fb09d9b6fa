package driver

import (
	"context"
	"sync"
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
			runs[i] = NewRun{Job: "noop", Queue: "default", Args: []byte("{}"), MaxAttempts: 1, Timeout: time.Second}
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

	// A statement evicted while an insert uses it is closed by that
	// insert, not under it.
	held := s.acquire(ctx, 7, true)
	require.NotNil(t, held)
	for n := 8; n <= 8+maxPreparedSizes; n++ {
		require.NoError(t, s.Exec(ctx, nil, batch(n)))
		want += n
	}
	assert.True(t, held.evicted)
	_, err = held.stmt.ExecContext(ctx, InsertRunsArgs(batch(7))...)
	require.NoError(t, err, "still open for its user")
	want += 7
	s.release(held)
	_, err = held.stmt.ExecContext(ctx, InsertRunsArgs(batch(7))...)
	assert.Error(t, err, "closed by its last user")
	assert.Equal(t, want+6, count())
	assert.LessOrEqual(t, len(s.used), maxPreparedSizes)

	// Many inserts at once, of more sizes than are kept: none fails on a
	// statement evicted under it.
	var wg sync.WaitGroup
	errs := make(chan error, 8*40)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				errs <- s.Exec(ctx, nil, batch(1+(g+i)%9))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// In a transaction on a pool of one connection: no second connection
	// is taken to prepare.
	tdb2 := testdb.New(t)
	one := tdb2.Open(t)
	one.SetMaxOpenConns(1)
	s1 := NewInsertStmts(one, "lockgen_runs")
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err = one.BeginTx(tctx, nil)
	require.NoError(t, err)
	require.NoError(t, s1.Exec(tctx, tx, batch(3)))
	require.NoError(t, tx.Commit())
	require.NoError(t, s1.Exec(tctx, nil, batch(3)), "prepared outside the transaction")
	tx, err = one.BeginTx(tctx, nil)
	require.NoError(t, err)
	require.NoError(t, s1.Exec(tctx, tx, batch(3)), "and used inside one")
	require.NoError(t, tx.Commit())
	var n int
	require.NoError(t, one.QueryRowContext(tctx, "SELECT COUNT(*) FROM lockgen_runs").Scan(&n))
	assert.Equal(t, 9, n)

	// A failed prepare sends text, and the next inserts too.
	missing := NewInsertStmts(db, "no_such_runs")
	err = missing.Exec(ctx, nil, batch(2))
	require.Error(t, err)
	// The application's user has no privilege on the table, so the server
	// refuses it with 1142 whether it exists or not (1146 is for users who
	// may know).
	assert.Contains(t, err.Error(), "1142", "the text statement's own error")
	assert.Contains(t, err.Error(), "no_such_runs")
	assert.Equal(t, prepareBackoff, missing.text.left)
	assert.Error(t, missing.Exec(ctx, nil, batch(2)))
	assert.Equal(t, prepareBackoff-1, missing.text.left, "sent as text without a prepare")
}
