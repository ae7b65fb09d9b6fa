package probe

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestSchemasMatchTheMigrations: what the probe expects of each table is
// exactly what the migrations create (queries/schema.sql, rendered from the
// same templates): every column and every index, by name, so a column
// added to a template without the probe knowing fails here; and a table
// created by the schema on the real server lacks nothing.
func TestSchemasMatchTheMigrations(t *testing.T) {
	schema := testdb.Schema(t)
	for _, want := range []TableSchema{LocksSchema("lockgen_locks"), RunsSchema("lockgen_runs"), QueuesSchema("lockgen_queues")} {
		create := regexp.MustCompile(`(?s)CREATE TABLE IF NOT EXISTS ` + want.Table + ` \((.*?)\n\) ENGINE`).FindStringSubmatch(schema)
		require.NotNil(t, create, want.Table)
		var columns, indexes []string
		for _, line := range strings.Split(create[1], "\n") {
			line = strings.TrimSpace(line)
			if m := regexp.MustCompile(`^(?:UNIQUE )?KEY (\w+) \(`).FindStringSubmatch(line); m != nil {
				indexes = append(indexes, m[1])
			} else if strings.HasPrefix(line, "PRIMARY KEY") {
				indexes = append(indexes, "PRIMARY")
			} else if m := regexp.MustCompile(`^(\w+)\s+[A-Z]`).FindStringSubmatch(line); m != nil {
				columns = append(columns, m[1])
			}
		}
		wantColumns := want.Columns
		if want.Table == "lockgen_runs" {
			// The schema's CREATE TABLE has the columns migrations 0004
			// and 0005 add (RunsHistorySchema, RunsHeadersSchema), after
			// claim_ref.
			i := slices.Index(wantColumns, "claim_ref") + 1
			wantColumns = slices.Concat(wantColumns[:i], RunsHistorySchema(want.Table).Columns, RunsHeadersSchema(want.Table).Columns, wantColumns[i:])
		}
		if want.Table == "lockgen_locks" {
			// And the columns migration 0006 adds (LocksSessionSchema),
			// after holding, as its ALTER TABLE adds them.
			wantColumns = slices.Concat(wantColumns, LocksSessionSchema(want.Table).Columns)
		}
		assert.Equal(t, wantColumns, columns, want.Table)
		var names []string
		for _, i := range want.Indexes {
			names = append(names, i.Name)
		}
		assert.Equal(t, indexes, names, want.Table)
	}

	tdb := testdb.New(t)
	r, err := Run(context.Background(), tdb.Open(t), "lockgen_locks", "lockgen_runs", "lockgen_queues")
	require.NoError(t, err)
	assert.Empty(t, r.Lacks(LocksSchema("lockgen_locks")))
	assert.Empty(t, r.Lacks(RunsSchema("lockgen_runs")))
	assert.Empty(t, r.Lacks(RunsHistorySchema("lockgen_runs")))
	assert.Empty(t, r.Lacks(LocksSessionSchema("lockgen_locks")))
	assert.Empty(t, r.Lacks(QueuesSchema("lockgen_queues")))
	assert.True(t, r.Tables["lockgen_queues"])
	assert.True(t, slices.Contains(r.Columns["lockgen_runs"], "claim_ref"))
}
