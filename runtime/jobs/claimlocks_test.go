package jobs_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// TestClaimLocksOnlyTheRunsItTakes: while a claim of a batch is open, every
// other due run can still be claimed (locked with NOWAIT) by another
// transaction. MySQL 9.7 read the claim through the state index and sorted,
// which locked every available run it read, so one claim blocked every
// other claim until it committed (and deadlocked with them under load).
func TestClaimLocksOnlyTheRunsItTakes(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	j := jobsNode(t, db, "claimer")
	bg := context.Background()
	const n, claim = 900, 50
	runs := make([]jobs.NewRun, n)
	for i := range runs {
		runs[i] = newRun("many")
	}
	require.NoError(t, j.EnqueueMany(bg, nil, runs))
	// A busy queue: a third of its runs running (far from their deadline),
	// and statistics like a table that has seen traffic, so that the
	// optimizer chooses as it would in production.
	tdb.Exec(t, "UPDATE lockgen_runs SET run_at = run_at - INTERVAL id SECOND")
	tdb.Exec(t, "UPDATE lockgen_runs SET state = 'running', claim = 1, claim_ref = CONCAT(id, ':1'), deadline = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE id % 3 = 0")
	tdb.Exec(t, "ANALYZE TABLE lockgen_runs")
	var ids []int64
	rows, err := db.QueryContext(bg, "SELECT id FROM lockgen_runs WHERE state = 'available'")
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, n-n/3)

	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	err = driver.InTx(ctx, db, func(conn *sql.Conn) error {
		rows, err := lockgendb.New(conn).RunsClaimable(ctx, lockgendb.RunsClaimableParams{Queue: jobs.DefaultQueue, Limit: claim})
		if err != nil {
			return err
		}
		require.Len(t, rows, claim)
		taken := map[int64]bool{}
		for _, r := range rows {
			taken[r.ID] = true
		}
		other, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = other.Rollback() }()
		locked := 0
		for _, id := range ids {
			if taken[id] {
				continue
			}
			var got int64
			if err := other.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE NOWAIT", id).Scan(&got); err != nil {
				locked++
			}
		}
		require.Zero(t, locked, "a claim of %d runs locked %d other due runs", claim, locked)
		return nil
	})
	require.NoError(t, err)
}
