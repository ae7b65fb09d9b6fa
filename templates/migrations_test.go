package templates

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/internal/sqltest"
)

// testDB is an empty database on the test server, on one session so that
// SHOW WARNINGS sees each statement.
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db := sqltest.Open(t, sqltest.New(t, "lockgen_m_").Config)
	db.SetMaxOpenConns(1)
	return db
}

// statementEnd splits a migration into statements: a ";" that ends a line.
var statementEnd = regexp.MustCompile(`;[ \t]*\n`)

// apply runs each statement of a migration file and fails on an error or a
// warning.
func apply(t *testing.T, db *sql.DB, what, sqlText string) {
	t.Helper()
	for _, stmt := range statementEnd.Split(sqlText+"\n", -1) {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		_, err := db.Exec(stmt)
		require.NoError(t, err, "%s: %s", what, stmt)
		rows, err := db.Query("SHOW WARNINGS")
		require.NoError(t, err)
		for rows.Next() {
			var level, msg string
			var code int
			require.NoError(t, rows.Scan(&level, &code, &msg))
			t.Errorf("%s: %s %d: %s", what, level, code, msg)
		}
		require.NoError(t, rows.Close())
	}
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// gooseSection returns the Up or Down part of a goose migration.
func gooseSection(t *testing.T, file []byte, section string) string {
	t.Helper()
	s := string(file)
	up, down := strings.Index(s, "-- +goose Up"), strings.Index(s, "-- +goose Down")
	require.True(t, up >= 0 && down > up, "goose markers")
	if section == "Up" {
		return s[up:down]
	}
	return s[down:]
}

func tables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME")
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	return names
}

// TestMigrationsApplyRollBackAndReapply: the generated migrations of both
// formats (golang-migrate pairs and goose files) apply, roll back and apply
// again on the test server, without an error or a warning, and leave
// exactly the lock, runs and queues tables.
func TestMigrationsApplyRollBackAndReapply(t *testing.T) {
	render := acmeRenderer(t)
	type migration struct{ name, up, down string }
	formats := map[string][]migration{
		"golang-migrate": {
			{"0001 locks", string(render(LocksUp)), string(render(LocksDown))},
			{"0002 runs", string(render(RunsUp)), string(render(RunsDown))},
			{"0003 queues", string(render(QueuesUp)), string(render(QueuesDown))},
			{"0004 runs history", string(render(HistoryUp)), string(render(HistoryDown))},
		},
		"goose": {
			{"0001 locks", gooseSection(t, render(GooseLocks), "Up"), gooseSection(t, render(GooseLocks), "Down")},
			{"0002 runs", gooseSection(t, render(GooseRuns), "Up"), gooseSection(t, render(GooseRuns), "Down")},
			{"0003 queues", gooseSection(t, render(GooseQueues), "Up"), gooseSection(t, render(GooseQueues), "Down")},
			{"0004 runs history", gooseSection(t, render(GooseHistory), "Up"), gooseSection(t, render(GooseHistory), "Down")},
		},
	}
	for format, ms := range formats {
		t.Run(format, func(t *testing.T) {
			db := testDB(t)
			ctx := context.Background()
			for round := 1; round <= 2; round++ {
				for _, m := range ms {
					apply(t, db, m.name+" up", m.up)
				}
				assert.Equal(t, []string{"acme_locks", "acme_queues", "acme_runs"}, tables(t, db), "round %d: after up", round)
				// The tables take a lock and a run.
				_, err := db.ExecContext(ctx, "INSERT INTO acme_locks (name, acquired_at, expires_at) VALUES ('x', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
				require.NoError(t, err)
				_, err = db.ExecContext(ctx, "INSERT INTO acme_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES ('j', 'q', 'available', UTC_TIMESTAMP(6), '{}', 1, 1, UTC_TIMESTAMP(6))")
				require.NoError(t, err)
				_, err = db.ExecContext(ctx, "INSERT INTO acme_queues (queue, paused, paused_at, updated_at) VALUES ('q', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
				require.NoError(t, err)
				_, err = db.ExecContext(ctx, "UPDATE acme_runs SET history = JSON_ARRAY(JSON_OBJECT('event', 'started'))")
				require.NoError(t, err)
				for i := len(ms) - 1; i >= 0; i-- {
					apply(t, db, ms[i].name+" down", ms[i].down)
				}
				assert.Empty(t, tables(t, db), "round %d: after down", round)
			}
		})
	}
}

// TestQueuesMigrationUpgradesAnOldDatabase: a database made by the
// migrations of before queue pauses (0001 locks, 0002 runs), holding a run,
// takes migration 0003 in place, in both formats: the queues table appears
// beside the untouched runs; 0003's down removes only the queues table.
func TestQueuesMigrationUpgradesAnOldDatabase(t *testing.T) {
	render := acmeRenderer(t)
	type step struct{ old, up, down string }
	formats := map[string]step{
		"golang-migrate": {string(render(LocksUp)) + string(render(RunsUp)), string(render(QueuesUp)), string(render(QueuesDown))},
		"goose": {gooseSection(t, render(GooseLocks), "Up") + gooseSection(t, render(GooseRuns), "Up"),
			gooseSection(t, render(GooseQueues), "Up"), gooseSection(t, render(GooseQueues), "Down")},
	}
	for format, s := range formats {
		t.Run(format, func(t *testing.T) {
			db := testDB(t)
			apply(t, db, "0001 and 0002 up", s.old)
			require.Equal(t, []string{"acme_locks", "acme_runs"}, tables(t, db))
			_, err := db.Exec("INSERT INTO acme_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES ('j', 'q', 'available', UTC_TIMESTAMP(6), '{}', 1, 1, UTC_TIMESTAMP(6))")
			require.NoError(t, err)

			apply(t, db, "0003 up", s.up)
			assert.Equal(t, []string{"acme_locks", "acme_queues", "acme_runs"}, tables(t, db))
			var runs int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM acme_runs").Scan(&runs))
			assert.Equal(t, 1, runs, "the runs are untouched")
			_, err = db.Exec("INSERT INTO acme_queues (queue, paused, paused_at, updated_at) VALUES ('q', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
			require.NoError(t, err)

			apply(t, db, "0003 down", s.down)
			assert.Equal(t, []string{"acme_locks", "acme_runs"}, tables(t, db))
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM acme_runs").Scan(&runs))
			assert.Equal(t, 1, runs)
		})
	}
}

// TestHistoryMigrationUpgradesAnOldDatabase: a database made by migrations
// 0001 to 0003, holding a run, takes migration 0004 in place, in both
// formats: the runs table gains the history column (NULL for the old run,
// which a history append then starts), and 0004's down removes only it.
func TestHistoryMigrationUpgradesAnOldDatabase(t *testing.T) {
	render := acmeRenderer(t)
	type step struct{ old, up, down string }
	formats := map[string]step{
		"golang-migrate": {string(render(LocksUp)) + string(render(RunsUp)) + string(render(QueuesUp)), string(render(HistoryUp)), string(render(HistoryDown))},
		"goose": {gooseSection(t, render(GooseLocks), "Up") + gooseSection(t, render(GooseRuns), "Up") + gooseSection(t, render(GooseQueues), "Up"),
			gooseSection(t, render(GooseHistory), "Up"), gooseSection(t, render(GooseHistory), "Down")},
	}
	for format, s := range formats {
		t.Run(format, func(t *testing.T) {
			db := testDB(t)
			apply(t, db, "0001 to 0003 up", s.old)
			_, err := db.Exec("INSERT INTO acme_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES ('j', 'q', 'available', UTC_TIMESTAMP(6), '{}', 1, 1, UTC_TIMESTAMP(6))")
			require.NoError(t, err)

			apply(t, db, "0004 up", s.up)
			assert.Equal(t, []string{"acme_locks", "acme_queues", "acme_runs"}, tables(t, db))
			assert.Equal(t, []string{"history"}, columns(t, db, "acme_runs", "history"))
			_, err = db.Exec("UPDATE acme_runs SET history = JSON_ARRAY_APPEND(IFNULL(history, JSON_ARRAY()), '$', JSON_OBJECT('event', 'started'))")
			require.NoError(t, err)
			var history string
			require.NoError(t, db.QueryRow("SELECT history FROM acme_runs").Scan(&history))
			assert.JSONEq(t, `[{"event": "started"}]`, history, "the old run keeps a history from now on")

			apply(t, db, "0004 down", s.down)
			assert.Empty(t, columns(t, db, "acme_runs", "history"))
			var runs int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM acme_runs").Scan(&runs))
			assert.Equal(t, 1, runs, "the run is kept")
		})
	}
}

// columns returns which of names the table has, in the order given.
func columns(t *testing.T, db *sql.DB, table string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		var found int
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?", table, n).Scan(&found))
		if found > 0 {
			out = append(out, n)
		}
	}
	return out
}

// acmeRenderer renders templates for the prefix "acme_", failing t on an
// error.
func acmeRenderer(t *testing.T) func(name string) []byte {
	return func(name string) []byte {
		t.Helper()
		b, err := Render(name, Data{Header: Header, Prefix: "acme_"})
		require.NoError(t, err)
		return b
	}
}
