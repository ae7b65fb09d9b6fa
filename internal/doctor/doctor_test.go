package doctor

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/internal/sqltest"
	"github.com/lockgen/lockgen/templates"
)

// server is a fresh database on the test server.
type server struct {
	admin *sql.DB
	cfg   *mysql.Config // connects to the fresh database as the admin
	// lastUser is the user the last call of user created, quoted.
	lastUser string
}

func newServer(t *testing.T) *server {
	t.Helper()
	db := sqltest.New(t, "lockgen_d_")
	return &server{admin: db.Admin, cfg: db.Config}
}

// migrate creates the tables of prefix with the generated schema.
func (s *server) migrate(t *testing.T, prefix string) {
	t.Helper()
	schema, err := templates.Render(templates.Schema, templates.Data{Header: templates.Header, Prefix: prefix, Jobs: true})
	require.NoError(t, err)
	cfg := s.cfg.Clone()
	cfg.MultiStatements = true
	_, err = sqltest.Open(t, cfg).Exec(string(schema))
	require.NoError(t, err)
}

// user creates a user with the given grants on the fresh database's
// tables and returns a DSN for it.
func (s *server) user(t *testing.T, password string, grants ...string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "lgdoc_" + hex.EncodeToString(b[:])
	_, err := s.admin.Exec("CREATE USER '" + name + "'@'%' IDENTIFIED BY '" + password + "'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = s.admin.Exec("DROP USER IF EXISTS '" + name + "'@'%'") })
	for _, g := range grants {
		_, err := s.admin.Exec(strings.ReplaceAll(g, "USER", "'"+name+"'@'%'"))
		require.NoError(t, err, g)
	}
	s.lastUser = "'" + name + "'@'%'"
	cfg := s.cfg.Clone()
	cfg.User, cfg.Passwd = name, password
	return cfg.FormatDSN()
}

const specYAML = `version: 1
package: locks
migrations: { dir: db/migrations }
table_prefix: app_
locks:
  - name: master
    ttl: 3s
    leader: true
  - name: account
    strategy: row
    key: { name: account_id, type: int64 }
    wait: 5s
  - name: report
    strategy: session
    ttl: 10s
jobs:
  - name: nightly
    schedule: "@every 1m"
`

func loadSpec(t *testing.T) *spec.Spec {
	t.Helper()
	s, err := spec.Load("lockgen.yaml", []byte(specYAML))
	require.NoError(t, err)
	return s
}

func failures(r *Result) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Severity == Fail {
			out = append(out, c.Topic+": "+c.Message)
		}
	}
	return out
}

// TestDoctorEverythingWorks: a migrated database, a least-privilege user
// with a password, parseTime: every lock and the jobs work, no check fails,
// the grants are exactly what lockgen needs, and neither the text nor the
// JSON shows the password.
func TestDoctorEverythingWorks(t *testing.T) {
	s := newServer(t)
	s.migrate(t, "app_")
	db := s.cfg.DBName
	const password = "Sekr3t-pw_9"
	dsn := s.user(t, password,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_locks TO USER",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_runs TO USER",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_queues TO USER")
	r, err := Run(context.Background(), Options{DSN: dsn, Spec: loadSpec(t)})
	require.NoError(t, err)
	assert.Empty(t, failures(r))
	assert.True(t, r.OK())
	require.Len(t, r.Uses, 4)
	for _, u := range r.Uses {
		assert.True(t, u.Works, "%s: %s", u.Name, u.Why)
	}
	var text, js bytes.Buffer
	r.WriteText(&text)
	require.NoError(t, r.WriteJSON(&js))
	assert.Contains(t, text.String(), "has exactly SELECT, INSERT, UPDATE, DELETE on "+db+".app_locks")
	assert.Contains(t, text.String(), "result: everything lockgen.yaml declares can run here")
	assert.Contains(t, text.String(), "lock account  row")
	assert.NotContains(t, text.String(), password)
	assert.NotContains(t, js.String(), password)
	var parsed struct {
		OK     bool
		Server string
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &parsed))
	assert.True(t, parsed.OK)
	assert.Equal(t, r.Server, parsed.Server)
}

// TestDoctorFindsProblems: missing tables (each with the migration that
// creates it; on a database made by the migrations of before queue pauses,
// only the queues table and its migration 0003, and the runs' history
// and headers columns and their migrations 0004 and 0005, and the lock
// table's session reservation and its migration 0006), a missing grant, a DSN
// without parseTime and a readTimeout shorter than a row lock's wait each
// fail, with what to do.
func TestDoctorFindsProblems(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()

	r, err := Run(ctx, Options{DSN: s.cfg.FormatDSN(), Spec: loadSpec(t)})
	require.NoError(t, err)
	assert.False(t, r.OK())
	assert.Equal(t, []string{
		"app_locks: table app_locks does not exist in database \"" + s.cfg.DBName + "\", or user " + r.Report.User + " has no privilege on it (see the grants): apply migration db/migrations/0001_app_locks.up.sql (relative to lockgen.yaml)",
		"app_runs: table app_runs does not exist in database \"" + s.cfg.DBName + "\", or user " + r.Report.User + " has no privilege on it (see the grants): apply migration db/migrations/0002_app_runs.up.sql (relative to lockgen.yaml)",
		"app_queues: table app_queues does not exist in database \"" + s.cfg.DBName + "\", or user " + r.Report.User + " has no privilege on it (see the grants): apply migration db/migrations/0003_app_queues.up.sql (relative to lockgen.yaml)",
	}, failures(r))

	// A database migrated before queue pauses: the lock and runs tables.
	for _, name := range []string{templates.LocksUp, templates.RunsUp} {
		up, err := templates.Render(name, templates.Data{Header: templates.Header, Prefix: "app_"})
		require.NoError(t, err)
		_, err = sqltest.Open(t, s.cfg).Exec(string(up))
		require.NoError(t, err)
	}
	r, err = Run(ctx, Options{DSN: s.cfg.FormatDSN(), Spec: loadSpec(t)})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"app_queues: table app_queues does not exist in database \"" + s.cfg.DBName + "\", or user " + r.Report.User + " has no privilege on it (see the grants): apply migration db/migrations/0003_app_queues.up.sql (relative to lockgen.yaml)",
		"app_runs: table app_runs in database \"" + s.cfg.DBName + "\" lacks column history, which migration db/migrations/0004_app_runs_history.up.sql (relative to lockgen.yaml) adds: apply it with your migration tool (lockgen's statements fail with \"Unknown column\" until then)",
		"app_runs: table app_runs in database \"" + s.cfg.DBName + "\" lacks column headers, which migration db/migrations/0005_app_runs_headers.up.sql (relative to lockgen.yaml) adds: apply it with your migration tool (lockgen's statements fail with \"Unknown column\" until then)",
		"app_locks: table app_locks in database \"" + s.cfg.DBName + "\" lacks column session_witness, column session_offset, which migration db/migrations/0006_app_locks_session.up.sql (relative to lockgen.yaml) adds: apply it with your migration tool (lockgen's statements fail with \"Unknown column\" until then)",
	}, failures(r))

	for _, name := range []string{templates.QueuesUp, templates.HistoryUp, templates.HeadersUp, templates.LocksSessionUp} {
		up, err := templates.Render(name, templates.Data{Header: templates.Header, Prefix: "app_"})
		require.NoError(t, err)
		_, err = sqltest.Open(t, s.cfg).Exec(string(up))
		require.NoError(t, err)
	}
	db := s.cfg.DBName
	dsn := s.user(t, "pw-123456",
		"GRANT SELECT, INSERT, UPDATE ON "+db+".app_locks TO USER",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_runs TO USER",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_queues TO USER")
	r, err = Run(ctx, Options{DSN: dsn, Spec: loadSpec(t)})
	require.NoError(t, err)
	name, _, _ := strings.Cut(r.Report.User, "@")
	assert.Equal(t, []string{"grants: user " + r.Report.User + " lacks DELETE on " + db + ".app_locks: GRANT SELECT, INSERT, UPDATE, DELETE ON " + db + ".app_locks TO '" + name + "'@'%'"}, failures(r))

	cfg := s.cfg.Clone()
	cfg.ParseTime = false
	r, err = Run(ctx, Options{DSN: cfg.FormatDSN(), Spec: loadSpec(t)})
	require.NoError(t, err)
	require.Len(t, failures(r), 1)
	assert.Contains(t, failures(r)[0], "parseTime=true")

	cfg = s.cfg.Clone()
	cfg.ReadTimeout = 2_000_000_000 // 2s, below the account lock's 5s wait
	r, err = Run(ctx, Options{DSN: cfg.FormatDSN(), Spec: loadSpec(t)})
	require.NoError(t, err)
	require.Len(t, failures(r), 1)
	assert.Contains(t, failures(r)[0], "readTimeout 2s is not longer than the longest session or row wait 5s")
}

// TestDoctorNamesWhatATableLacks: a table that exists but lacks a column
// or an index of its migration (dropped by hand, or created by another
// version of the migrations) used to pass, and the runtime then logged
// "Unknown column" at WARN for ever. Doctor fails it, naming the table,
// what it lacks and the migration, in the spec's migration format.
func TestDoctorNamesWhatATableLacks(t *testing.T) {
	s := newServer(t)
	s.migrate(t, "app_")
	_, err := s.admin.Exec("ALTER TABLE " + s.cfg.DBName + ".app_runs DROP COLUMN claim_ref, DROP INDEX app_runs_claim")
	require.NoError(t, err)
	_, err = s.admin.Exec("ALTER TABLE " + s.cfg.DBName + ".app_locks DROP COLUMN holding")
	require.NoError(t, err)
	goose, err := spec.Load("lockgen.yaml", []byte(strings.Replace(specYAML, "{ dir: db/migrations }", "{ dir: db/migrations, format: goose }", 1)))
	require.NoError(t, err)
	r, err := Run(context.Background(), Options{DSN: s.cfg.FormatDSN(), Spec: goose})
	require.NoError(t, err)
	assert.False(t, r.OK())
	assert.Equal(t, []string{
		"app_locks: table app_locks in database \"" + s.cfg.DBName + "\" does not match migration db/migrations/00001_app_locks.sql (relative to lockgen.yaml): it lacks column holding; ",
		"app_runs: table app_runs in database \"" + s.cfg.DBName + "\" does not match migration db/migrations/00002_app_runs.sql (relative to lockgen.yaml): it lacks column claim_ref, index KEY app_runs_claim (queue, state, priority, run_at); ",
	}, prefixes(failures(r), "; "))
}

// prefixes cuts each of list after the first sep.
func prefixes(list []string, sep string) []string {
	var out []string
	for _, s := range list {
		if i := strings.Index(s, sep); i >= 0 {
			s = s[:i+len(sep)]
		}
		out = append(out, s)
	}
	return out
}

// TestDoctorWithoutSpec checks every strategy and the jobs on the default
// prefix.
func TestDoctorWithoutSpec(t *testing.T) {
	s := newServer(t)
	s.migrate(t, "lockgen_")
	r, err := Run(context.Background(), Options{DSN: s.cfg.FormatDSN()})
	require.NoError(t, err)
	assert.Empty(t, failures(r))
	var names []string
	for _, u := range r.Uses {
		names = append(names, u.Name)
	}
	assert.Equal(t, []string{"lease", "session", "row", "jobs"}, names)
}

// mariaDB tells whether the test server is MariaDB (roles differ).
func (s *server) mariaDB(t *testing.T) bool {
	t.Helper()
	var version string
	require.NoError(t, s.admin.QueryRow("SELECT VERSION()").Scan(&version))
	return strings.Contains(version, "MariaDB")
}

// role creates a role with the given grants (ROLE in them stands for it)
// and returns its name.
func (s *server) role(t *testing.T, grants ...string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "lgdocr_" + hex.EncodeToString(b[:])
	_, err := s.admin.Exec("CREATE ROLE " + name)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = s.admin.Exec("DROP ROLE IF EXISTS " + name) })
	for _, g := range grants {
		_, err := s.admin.Exec(strings.ReplaceAll(g, "ROLE", name))
		require.NoError(t, err, g)
	}
	return name
}

// grantChecks returns the messages of the grant checks, by severity.
func grantChecks(r *Result) map[Severity][]string {
	out := map[Severity][]string{}
	for _, c := range r.Checks {
		if c.Topic == "grants" {
			out[c.Severity] = append(out[c.Severity], c.Message)
		}
	}
	return out
}

// TestDoctorGrantVerdicts creates users with real grants on the test
// server (MariaDB or MySQL) and checks what doctor says of each: the
// least-privilege user passes with nothing to note; a user with too much
// (ALL PRIVILEGES on the database, PROCESS everywhere, GRANT OPTION), or
// with the right privileges through a database grant or a wildcard
// pattern, passes with a note that names the excess and where it comes
// from; privileges through a default role count, those of a role that is
// not active do not (a failure, and a note saying how to activate it); and
// column grants are not enough.
func TestDoctorGrantVerdicts(t *testing.T) {
	s := newServer(t)
	s.migrate(t, "app_")
	ctx := context.Background()
	db := s.cfg.DBName
	pattern := "`" + strings.ReplaceAll(strings.TrimRight(db, "0123456789abcdef"), "_", "\\_") + "%`"
	maria := s.mariaDB(t)
	exact := func(to string) []string {
		return []string{
			"GRANT SELECT, INSERT, UPDATE, DELETE ON " + db + ".app_locks TO " + to,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON " + db + ".app_runs TO " + to,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON " + db + ".app_queues TO " + to,
		}
	}
	doctor := func(t *testing.T, dsn string) (*Result, map[Severity][]string) {
		t.Helper()
		r, err := Run(ctx, Options{DSN: dsn, Spec: loadSpec(t)})
		require.NoError(t, err)
		return r, grantChecks(r)
	}

	t.Run("least privilege", func(t *testing.T) {
		r, got := doctor(t, s.user(t, "pw-least-1", exact("USER")...))
		assert.True(t, r.OK(), failures(r))
		assert.Equal(t, map[Severity][]string{OK: {
			"user " + r.Report.User + " has exactly SELECT, INSERT, UPDATE, DELETE on " + db + ".app_locks",
			"user " + r.Report.User + " has exactly SELECT, INSERT, UPDATE, DELETE on " + db + ".app_runs",
			"user " + r.Report.User + " has exactly SELECT, INSERT, UPDATE, DELETE on " + db + ".app_queues",
		}}, got)
	})

	t.Run("too broad", func(t *testing.T) {
		r, got := doctor(t, s.user(t, "pw-broad-1",
			"GRANT ALL PRIVILEGES ON "+db+".* TO USER",
			"GRANT PROCESS ON *.* TO USER",
			"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_runs TO USER WITH GRANT OPTION"))
		assert.True(t, r.OK(), "too much is a note, not a failure: %v", failures(r))
		require.Len(t, got[Note], 3, got)
		assert.Empty(t, got[OK])
		assert.Equal(t, "user "+r.Report.User+" has more than lockgen needs on "+db+".app_locks: ALL PRIVILEGES, PROCESS (granted ON *.*, ON `"+db+"`.*); the application needs only SELECT, INSERT, UPDATE, DELETE on the lockgen tables", got[Note][0])
		assert.Equal(t, "user "+r.Report.User+" has more than lockgen needs on "+db+".app_runs: ALL PRIVILEGES, GRANT OPTION, PROCESS (granted ON *.*, ON `"+db+"`.*, ON `"+db+"`.`app_runs`); the application needs only SELECT, INSERT, UPDATE, DELETE on the lockgen tables", got[Note][1])
	})

	t.Run("the right privileges on too many tables", func(t *testing.T) {
		r, got := doctor(t, s.user(t, "pw-db-1",
			"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".* TO USER",
			"GRANT SELECT, INSERT, UPDATE, DELETE ON "+pattern+".* TO USER"))
		assert.True(t, r.OK(), failures(r))
		require.Len(t, got[Note], 3, got)
		name, _, _ := strings.Cut(r.Report.User, "@")
		assert.Equal(t, "user "+r.Report.User+" has SELECT, INSERT, UPDATE, DELETE on "+db+".app_locks through a grant ON "+pattern+".*, ON `"+db+"`.*, which covers more tables than lockgen's; grant them on each lockgen table instead: GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_locks TO '"+name+"'@'%'", got[Note][0])
	})

	t.Run("default role", func(t *testing.T) {
		role := s.role(t, exact("ROLE")...)
		dsn := s.user(t, "pw-role-1", "GRANT "+role+" TO USER")
		if maria {
			_, err := s.admin.Exec("SET DEFAULT ROLE " + role + " FOR " + s.lastUser)
			require.NoError(t, err)
		} else {
			_, err := s.admin.Exec("SET DEFAULT ROLE " + role + " TO " + s.lastUser)
			require.NoError(t, err)
		}
		r, got := doctor(t, dsn)
		assert.True(t, r.OK(), failures(r))
		assert.Empty(t, got[Fail])
		require.Len(t, got[OK], 3, got)
		assert.Equal(t, map[Severity][]string{OK: got[OK]}, got, "nothing to note")
		assert.Contains(t, got[OK][0], "has exactly SELECT, INSERT, UPDATE, DELETE on "+db+".app_locks")
	})

	t.Run("role that is not active", func(t *testing.T) {
		role := s.role(t, exact("ROLE")...)
		r, got := doctor(t, s.user(t, "pw-role-2", "GRANT "+role+" TO USER"))
		assert.False(t, r.OK())
		// Without a privilege in the database it may not even use it.
		assert.Equal(t, []string{
			"app_locks: user " + r.Report.User + " may not use database \"" + db + "\" at all (error 1044), so whether table app_locks exists is unknown: the user has no privilege there, or only through a role that is not active (see the grants)",
			"app_runs: user " + r.Report.User + " may not use database \"" + db + "\" at all (error 1044), so whether table app_runs exists is unknown: the user has no privilege there, or only through a role that is not active (see the grants)",
			"app_queues: user " + r.Report.User + " may not use database \"" + db + "\" at all (error 1044), so whether table app_queues exists is unknown: the user has no privilege there, or only through a role that is not active (see the grants)",
		}, failures(r)[:3])
		require.Len(t, got[Fail], 3, got)
		assert.Contains(t, got[Fail][0], "lacks SELECT, INSERT, UPDATE, DELETE on "+db+".app_locks")
		shown := role
		if !maria {
			shown += "@%"
		}
		require.Len(t, got[Note], 1, got)
		how := "SET DEFAULT ROLE '" + role + "' FOR " + s.lastUser
		if !maria {
			how = "SET DEFAULT ROLE '" + role + "'@'%' TO " + s.lastUser
		}
		assert.Equal(t, "role "+shown+" is granted to "+r.Report.User+" but is not active when it connects (not a default role), so its privileges are not counted: to use it, "+how, got[Note][0])
	})

	t.Run("column grants", func(t *testing.T) {
		r, got := doctor(t, s.user(t, "pw-col-1",
			"GRANT SELECT (name, lock_key, token), INSERT, UPDATE (owner), DELETE ON "+db+".app_locks TO USER",
			exact("USER")[1], exact("USER")[2]))
		assert.False(t, r.OK())
		require.Len(t, got[Fail], 1, got)
		assert.Contains(t, got[Fail][0], "lacks SELECT, UPDATE on "+db+".app_locks")
		assert.Contains(t, got[Fail][0], "(it has SELECT, UPDATE on some columns only; lockgen reads and writes whole rows)")
		assert.Len(t, got[OK], 2, got)
	})
}

// TestDoctorNeverPrintsTheDSNPassword: go-sql-driver's parse errors can
// quote the password (a "/" in it ends the user part early); doctor's
// error never does.
func TestDoctorNeverPrintsTheDSNPassword(t *testing.T) {
	for _, dsn := range []string{"app:s3cr/etPW@tcp(db:3306)", "app:s3cr/et%zzPW@tcp(db:3306)/x"} {
		_, err := Run(context.Background(), Options{DSN: dsn})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "etPW", dsn)
		assert.NotContains(t, err.Error(), "zzPW", dsn)
	}
}

// TestDoctorBinlogFormat: with the binary log on (MySQL's default),
// binlog_format=STATEMENT fails, saying what to set; ROW passes. MariaDB's
// binary log is off by default (and cannot be turned on without a
// restart): the check says so and passes whatever the format.
func TestDoctorBinlogFormat(t *testing.T) {
	s := newServer(t)
	s.migrate(t, "lockgen_")
	var logBin int
	require.NoError(t, s.admin.QueryRow("SELECT @@log_bin").Scan(&logBin))
	check := func(format string) Check {
		cfg := s.cfg.Clone()
		cfg.Params = map[string]string{"binlog_format": "'" + format + "'"}
		r, err := Run(context.Background(), Options{DSN: cfg.FormatDSN()})
		require.NoError(t, err)
		for _, c := range r.Checks {
			if c.Topic == "binlog_format" {
				return c
			}
		}
		t.Fatalf("no binlog_format check in %+v", r.Checks)
		return Check{}
	}
	statement, row := check("STATEMENT"), check("ROW")
	assert.Equal(t, OK, row.Severity, row.Message)
	if logBin == 0 {
		assert.Equal(t, OK, statement.Severity, statement.Message)
		assert.Contains(t, statement.Message, "the binary log is off")
		return
	}
	assert.Equal(t, Fail, statement.Severity)
	assert.Contains(t, statement.Message, "set binlog_format=ROW")
	assert.Contains(t, row.Message, "binlog_format is ROW")
}
