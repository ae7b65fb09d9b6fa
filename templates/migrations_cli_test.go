package templates

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/internal/sqltest"
)

// The migration tools users apply lockgen's migrations with, pinned. The
// tests build each once (go install through the module proxy, only the
// MySQL driver) into the user cache directory and reuse it.
const (
	migrateTool = "github.com/golang-migrate/migrate/v4/cmd/migrate@v4.18.3"
	migrateTags = "mysql file"
	gooseTool   = "github.com/pressly/goose/v3/cmd/goose@v3.26.0"
	gooseTags   = "no_postgres no_clickhouse no_mssql no_vertica no_ydb no_libsql no_sqlite3 no_turso no_starrocks no_duckdb"
)

// tool returns the path of the CLI built from pkg (module@version) with
// tags, building it the first time.
func tool(t *testing.T, name, pkg, tags string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	version := pkg[strings.LastIndex(pkg, "@")+1:]
	dir := filepath.Join(cache, "lockgen-tools", name+"-"+version)
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	goExe, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the migration tools")
	tmp, err := os.MkdirTemp(filepath.Dir(dir), name+"-build-")
	if os.IsNotExist(err) {
		require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
		tmp, err = os.MkdirTemp(filepath.Dir(dir), name+"-build-")
	}
	require.NoError(t, err)
	defer os.RemoveAll(tmp)
	cmd := exec.Command(goExe, "install", "-tags", tags, pkg)
	cmd.Dir = tmp // outside any module: pkg@version is built on its own
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go install %s:\n%s", pkg, out)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// Renamed into place, so a concurrent test never runs half a binary.
	require.NoError(t, os.Rename(filepath.Join(tmp, name), bin))
	return bin
}

// runTool runs a migration CLI and fails the test on a non-zero exit.
func runTool(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), out)
	return string(out)
}

// cliDB is an empty database for a migration CLI: its pool and the DSN
// the CLIs connect with.
func cliDB(t *testing.T) (*sql.DB, *mysql.Config) {
	t.Helper()
	db := sqltest.New(t, "lockgen_mc_")
	return sqltest.Open(t, db.Config), db.Config
}

// writeMigrations writes the named files, rendered from their templates,
// into dir.
func writeMigrations(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for file, name := range files {
		b, err := Render(name, Data{Header: Header, Prefix: "acme_"})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), b, 0o644))
	}
}

// TestMigrationsWithTheRealCLIs: golang-migrate's and goose's own CLIs
// apply lockgen's migrations on the test server, and upgrade in place a
// database made by the migrations of before queue pauses (0001 and 0002,
// holding a run): migration 0003 adds the queues table and leaves the run
// alone; one step down removes only the queues table; up again, then all
// the way down, leaves none of lockgen's tables. Then 0004 upgrades a
// database made by 0001 to 0003 holding a run: the history column comes,
// the run stays, one step down takes only the column away; then 0005 adds
// the headers column the same way.
func TestMigrationsWithTheRealCLIs(t *testing.T) {
	old := map[string]map[string]string{
		"golang-migrate": {
			"0001_acme_locks.up.sql": LocksUp, "0001_acme_locks.down.sql": LocksDown,
			"0002_acme_runs.up.sql": RunsUp, "0002_acme_runs.down.sql": RunsDown,
		},
		"goose": {"00001_acme_locks.sql": GooseLocks, "00002_acme_runs.sql": GooseRuns},
	}
	queues := map[string]map[string]string{
		"golang-migrate": {"0003_acme_queues.up.sql": QueuesUp, "0003_acme_queues.down.sql": QueuesDown},
		"goose":          {"00003_acme_queues.sql": GooseQueues},
	}
	history := map[string]map[string]string{
		"golang-migrate": {"0004_acme_runs_history.up.sql": HistoryUp, "0004_acme_runs_history.down.sql": HistoryDown},
		"goose":          {"00004_acme_runs_history.sql": GooseHistory},
	}
	headers := map[string]map[string]string{
		"golang-migrate": {"0005_acme_runs_headers.up.sql": HeadersUp, "0005_acme_runs_headers.down.sql": HeadersDown},
		"goose":          {"00005_acme_runs_headers.sql": GooseHeaders},
	}
	for _, format := range []string{"golang-migrate", "goose"} {
		t.Run(format, func(t *testing.T) {
			db, cfg := cliDB(t)
			dir := t.TempDir()
			var cli func(args ...string) string
			if format == "goose" {
				bin := tool(t, "goose", gooseTool, gooseTags)
				cli = func(args ...string) string {
					return runTool(t, bin, append([]string{"-dir", dir, "mysql"}, append([]string{cfg.FormatDSN()}, args...)...)...)
				}
			} else {
				bin := tool(t, "migrate", migrateTool, migrateTags)
				cli = func(args ...string) string {
					return runTool(t, bin, append([]string{"-path", dir, "-database", "mysql://" + cfg.FormatDSN()}, args...)...)
				}
			}
			lockgenTables := func() []string {
				var out []string
				for _, n := range tables(t, db) {
					if strings.HasPrefix(n, "acme_") {
						out = append(out, n)
					}
				}
				return out
			}
			up := []string{"up"}
			down1, downAll := []string{"down", "1"}, []string{"down", "-all"}
			if format == "goose" {
				down1, downAll = []string{"down"}, []string{"reset"}
			}

			writeMigrations(t, dir, old[format])
			cli(up...)
			require.Equal(t, []string{"acme_locks", "acme_runs"}, lockgenTables())
			_, err := db.Exec("INSERT INTO acme_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES ('j', 'q', 'available', UTC_TIMESTAMP(6), '{}', 1, 1, UTC_TIMESTAMP(6))")
			require.NoError(t, err)

			// The upgrade: the same directory with lockgen's new migration.
			writeMigrations(t, dir, queues[format])
			cli(up...)
			assert.Equal(t, []string{"acme_locks", "acme_queues", "acme_runs"}, lockgenTables())
			var runs int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM acme_runs").Scan(&runs))
			assert.Equal(t, 1, runs, "the upgrade leaves the runs alone")
			_, err = db.Exec("INSERT INTO acme_queues (queue, paused, paused_at, updated_at) VALUES ('q', TRUE, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
			require.NoError(t, err)

			cli(down1...)
			assert.Equal(t, []string{"acme_locks", "acme_runs"}, lockgenTables(), "one step down undoes 0003 only")
			cli(up...)
			assert.Equal(t, []string{"acme_locks", "acme_queues", "acme_runs"}, lockgenTables())
			cli(downAll...)
			assert.Empty(t, lockgenTables())

			// 0004 on a database made by 0001 to 0003, holding a run.
			cli(up...)
			_, err = db.Exec("INSERT INTO acme_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES ('j', 'q', 'available', UTC_TIMESTAMP(6), '{}', 1, 1, UTC_TIMESTAMP(6))")
			require.NoError(t, err)
			writeMigrations(t, dir, history[format])
			cli(up...)
			assert.Equal(t, []string{"claim_ref", "history"}, columns(t, db, "acme_runs", "claim_ref", "history"))
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM acme_runs WHERE history IS NULL").Scan(&runs))
			assert.Equal(t, 1, runs, "the run is kept, with no history yet")
			cli(down1...)
			assert.Equal(t, []string{"claim_ref"}, columns(t, db, "acme_runs", "claim_ref", "history"), "one step down undoes 0004 only")
			assert.Equal(t, []string{"acme_locks", "acme_queues", "acme_runs"}, lockgenTables())

			// 0005 on top: the headers column comes, the run keeps none.
			cli(up...)
			writeMigrations(t, dir, headers[format])
			cli(up...)
			assert.Equal(t, []string{"claim_ref", "history", "headers"}, columns(t, db, "acme_runs", "claim_ref", "history", "headers"))
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM acme_runs WHERE headers IS NULL").Scan(&runs))
			assert.Equal(t, 1, runs, "the run is kept, with no headers")
			cli(down1...)
			assert.Equal(t, []string{"claim_ref", "history"}, columns(t, db, "acme_runs", "claim_ref", "history", "headers"), "one step down undoes 0005 only")
			cli(downAll...)
			assert.Empty(t, lockgenTables())
		})
	}
}
