package ops_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/ops"
)

// TestEveryReadUsesAnIndex: the server plans every read statement of the
// layer through an index (the primary key or a secondary one), never a
// full scan of a table, on tables with a few thousand rows (so that the
// plans are those of a real deployment, not of an empty table). The
// statements' LIMITs bound what each reads from there.
func TestEveryReadUsesAnIndex(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	ctx := context.Background()
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	// numbers is 1 to 3000, as i.
	numbers := "(SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d AS i FROM " + digits + " a, " + digits + " b, " + digits + " c, " + digits + " e WHERE e.d < 3) n"
	for _, stmt := range []string{
		`INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at)
		 SELECT IF(i % 3 = 0, 'orders', IF(i % 3 = 1, 'carts', 'users')), CONCAT('k', LPAD(i, 4, '0')), IF(i % 2 = 0, 'node-a', ''), i, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM ` + numbers,
		`INSERT INTO lockgen_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at, scheduled_at)
		 SELECT IF(i % 2 = 0, 'test', 'tick'), IF(i % 4 = 0, 'mail', 'default'), ELT(1 + i % 5, 'available', 'running', 'completed', 'discarded', 'orphaned'),
		        UTC_TIMESTAMP(6), '{}', 3, 1000000, UTC_TIMESTAMP(6), IF(i % 2 = 1, UTC_TIMESTAMP(6) - INTERVAL i MINUTE, NULL) FROM ` + numbers,
		`INSERT INTO lockgen_queues (queue, paused, updated_at) VALUES ('default', 0, UTC_TIMESTAMP(6)), ('mail', 1, UTC_TIMESTAMP(6))`,
		`ANALYZE TABLE lockgen_locks, lockgen_runs, lockgen_queues`,
	} {
		rows, err := admin.QueryContext(ctx, stmt)
		require.NoError(t, err)
		require.NoError(t, rows.Close())
	}
	o, err := ops.New(tdb.Open(t), ops.Config{})
	require.NoError(t, err)
	explain := "EXPLAIN FORMAT=TRADITIONAL "
	if _, err := admin.ExecContext(ctx, explain+"SELECT 1"); err != nil {
		explain = "EXPLAIN " // MariaDB: the traditional table is its only text form
	}
	for name, st := range o.Statements() {
		rows, err := admin.QueryContext(ctx, explain+st[0].(string), st[1:]...)
		require.NoError(t, err, name)
		cols, err := rows.Columns()
		require.NoError(t, err)
		plans := 0
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			row := map[string]string{}
			for i, c := range cols {
				if b, ok := vals[i].([]byte); ok {
					row[c] = string(b)
				}
			}
			if row["table"] == "" || strings.HasPrefix(row["table"], "<") {
				continue // a derived table or a UNION's result: bounded by the LIMIT inside
			}
			plans++
			assert.NotEqual(t, "ALL", row["type"], "%s reads %s by a full scan: %v", name, row["table"], row)
			assert.NotEmpty(t, row["key"], "%s reads %s without an index: %v", name, row["table"], row)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		assert.Positive(t, plans, "%s: no table in its plan", name)
	}
}
