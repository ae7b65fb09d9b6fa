package driver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestPreparedDB: the statements given run prepared (the server counts one
// prepare and an execute per call on the pool's one connection), with the
// results of the text statement; other statements go as text; a statement
// the server will not prepare goes as text, and the next ones too, even
// those prepared before.
func TestPreparedDB(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t).Open(t)
	db.SetMaxOpenConns(1) // so that SHOW SESSION STATUS reads the connection that ran them
	status := func(name string) (n int) {
		var v string
		require.NoError(t, db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE ?", name).Scan(&v, &n))
		return n
	}
	const insert = "INSERT INTO lockgen_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES (?, 'default', 'available', UTC_TIMESTAMP(6), '{}', 1, 1, UTC_TIMESTAMP(6))"
	const update = "UPDATE lockgen_runs SET priority = ? WHERE id = ?"
	p := NewPreparedDB(db, insert)

	prepares, executes := status("Com_stmt_prepare"), status("Com_stmt_execute")
	var ids []int64
	for i := 0; i < 3; i++ {
		res, err := p.ExecContext(ctx, insert, "job")
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		ids = append(ids, id)
	}
	assert.Equal(t, []int64{ids[0], ids[0] + 1, ids[0] + 2}, ids, "each insert's own id")
	assert.Equal(t, prepares+1, status("Com_stmt_prepare"), "prepared once")
	assert.Equal(t, executes+3, status("Com_stmt_execute"), "and executed three times")

	res, err := p.ExecContext(ctx, update, 7, ids[1])
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, prepares+1, status("Com_stmt_prepare"), "a statement not given goes as text")
	assert.Equal(t, executes+3, status("Com_stmt_execute"))
	var priority int
	require.NoError(t, p.QueryRowContext(ctx, "SELECT priority FROM lockgen_runs WHERE id = ?", ids[1]).Scan(&priority))
	assert.Equal(t, 7, priority)

	// A statement the server refuses to prepare goes as text, and so do
	// the next ones, without a prepare.
	const missing = "INSERT INTO no_such_runs (job) VALUES (?)"
	refused := NewPreparedDB(db, missing)
	_, err = refused.ExecContext(ctx, missing, "job")
	require.Error(t, err)
	// The application's user has no privilege on the table, so the server
	// refuses it with 1142 whether it exists or not.
	assert.Contains(t, err.Error(), "1142", "the text statement's own error")
	assert.Equal(t, prepareBackoff, refused.text.left)
	prepares = status("Com_stmt_prepare")
	assert.Error(t, func() error { _, err := refused.ExecContext(ctx, missing, "job"); return err }())
	assert.Equal(t, prepareBackoff-1, refused.text.left, "sent as text")
	assert.Equal(t, prepares, status("Com_stmt_prepare"), "without a prepare")

	// After a refused prepare, a statement prepared before goes as text too
	// (another connection would have to prepare it again).
	both := NewPreparedDB(db, insert, missing)
	_, err = both.ExecContext(ctx, insert, "job")
	require.NoError(t, err)
	_, err = both.ExecContext(ctx, missing, "job")
	require.Error(t, err)
	executes = status("Com_stmt_execute")
	_, err = both.ExecContext(ctx, insert, "job")
	require.NoError(t, err)
	assert.Equal(t, executes, status("Com_stmt_execute"), "sent as text")
	assert.Equal(t, prepareBackoff-1, both.text.left)
}
