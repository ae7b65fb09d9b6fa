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
		"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_runs TO USER")
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

// TestDoctorFindsProblems: missing tables (with where the migrations are),
// a missing grant, a DSN without parseTime and a readTimeout shorter than
// a row lock's wait each fail, with what to do.
func TestDoctorFindsProblems(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()

	r, err := Run(ctx, Options{DSN: s.cfg.FormatDSN(), Spec: loadSpec(t)})
	require.NoError(t, err)
	assert.False(t, r.OK())
	assert.Contains(t, strings.Join(failures(r), "\n"), "table app_locks does not exist")
	assert.Contains(t, strings.Join(failures(r), "\n"), "apply the migrations in db/migrations/ (relative to lockgen.yaml)")

	s.migrate(t, "app_")
	db := s.cfg.DBName
	dsn := s.user(t, "pw-123456",
		"GRANT SELECT, INSERT, UPDATE ON "+db+".app_locks TO USER",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON "+db+".app_runs TO USER")
	r, err = Run(ctx, Options{DSN: dsn, Spec: loadSpec(t)})
	require.NoError(t, err)
	assert.Equal(t, []string{"grants: user " + r.Report.User + " lacks DELETE on " + db + ".app_locks: GRANT SELECT, INSERT, UPDATE, DELETE ON " + db + ".app_locks TO the user"}, failures(r))

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

// TestPrivileges reads the grant lines of both servers.
func TestPrivileges(t *testing.T) {
	grants := []string{
		"GRANT USAGE ON *.* TO `app`@`%`",
		"GRANT SELECT, INSERT ON `shop`.* TO `app`@`%`",
		"GRANT UPDATE, DELETE ON `shop`.`app_locks` TO `app`@`%`",
		"GRANT ALL PRIVILEGES ON `other`.* TO `app`@`%`",
	}
	assert.Equal(t, map[string]bool{"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true}, privileges(grants, "shop", "app_locks"))
	assert.Equal(t, map[string]bool{"SELECT": true, "INSERT": true}, privileges(grants, "shop", "app_runs"))
	assert.Equal(t, map[string]bool{"ALL PRIVILEGES": true}, privileges(grants, "other", "x"))
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
