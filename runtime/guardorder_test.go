package runtime_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestSessionGuardChecksTheConnectionAfterLockingTheRow: the session
// Guard's statement (queries/queries.sql, SessionGuard) must test the
// holding's connection after it has read and share-locked the row, so that
// no acquisition can complete between the test and the lock. A test that
// names no column of the row, in WHERE, is one both servers evaluate while
// planning, before the row is read: their plan then says "Impossible
// WHERE" for a session lock nobody holds (it did, on MariaDB and MySQL,
// before the test became a column of the read).
func TestSessionGuardChecksTheConnectionAfterLockingTheRow(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	_, err := admin.Exec("INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at) VALUES ('g', '', 'o', 7, UTC_TIMESTAMP(6), '9999-12-31 23:59:59')")
	require.NoError(t, err)
	stmt := namedQuery(t, "SessionGuard")
	args := map[string]string{"name": "'g'", "lock_key": "''", "owner": "'o'", "lock_name": "'lockgen-test-nobody-holds-this'",
		"conn_id": "5", "witness": "'lockgen-witness:nobody'"}
	stmt = regexp.MustCompile(`sqlc\.arg\((\w+)\)`).ReplaceAllStringFunc(stmt, func(m string) string {
		v, ok := args[m[len("sqlc.arg("):len(m)-1]]
		require.True(t, ok, m)
		return v
	})
	plan := explain(t, admin, stmt)
	assert.NotContains(t, plan, "Impossible WHERE", "the connection test runs before the row is locked")
	var held, witnessed int64
	var token int64
	require.NoError(t, admin.QueryRow(stmt).Scan(&token, &held, &witnessed))
	assert.Equal(t, []int64{7, 0, 0}, []int64{token, held, witnessed}, "the row is read and locked; the holding is not current")
}

// namedQuery is the statement named name in queries/queries.sql, without
// its comments.
func namedQuery(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	var b []byte
	for {
		if b, err = os.ReadFile(filepath.Join(dir, "queries", "queries.sql")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "queries/queries.sql not found")
		dir = parent
	}
	_, rest, ok := strings.Cut(string(b), "-- name: "+name+" ")
	require.True(t, ok, name)
	var lines []string
	for _, l := range strings.Split(rest, "\n")[1:] {
		if strings.HasPrefix(l, "--") {
			continue
		}
		if stmt, end := strings.CutSuffix(l, ";"); end {
			return strings.Join(append(lines, stmt), "\n")
		}
		lines = append(lines, l)
	}
	t.Fatalf("statement %s has no end", name)
	return ""
}

// explain returns every cell of EXPLAIN's answer for stmt, joined.
func explain(t *testing.T, db *sql.DB, stmt string) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN " + stmt)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		cells := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range cells {
			ptrs[i] = &cells[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		for i, c := range cells {
			out = append(out, fmt.Sprintf("%s=%s", cols[i], c.String))
		}
	}
	require.NoError(t, rows.Err())
	return strings.Join(out, " ")
}
