// Package exampletest gives each example test a database of its own, so
// tests running at the same time (or next to a demo) never share lock rows.
package exampletest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/examples/internal/demodb"
)

// FreshDSN creates an empty database on the test server
// (LOCKGEN_TEST_DSN, default demodb.DefaultDSN), drops it when the test
// ends, and returns a DSN that connects to it as the test server's user,
// the admin.
func FreshDSN(t testing.TB) string {
	t.Helper()
	dsn, drop, err := freshDatabase()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	return dsn
}

// freshDatabase is FreshDSN with the drop returned.
func freshDatabase() (dsn string, drop func(), err error) {
	cfg, err := demodb.Config(demodb.DSN("LOCKGEN_TEST_DSN"))
	if err != nil {
		return "", nil, err
	}
	admin, err := demodb.Open(cfg)
	if err != nil {
		return "", nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lockgen_ex_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		_ = admin.Close()
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	fresh := cfg.Clone()
	fresh.DBName = name
	return fresh.FormatDSN(), func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name)
		_ = admin.Close()
	}, nil
}

// Main runs the tests and examples of a package (m) on a database of their
// own: a fresh database on the test server with the migrations applied as
// the admin, and a user created for the run with privileges on tables
// only. It sets *db to a pool connected as that user (examples use it as
// an application would), drops user and database afterwards, and returns
// the exit code for os.Exit.
func Main(m *testing.M, db **sql.DB, tables []string, migrations ...string) int {
	dsn, drop, err := freshDatabase()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer drop()
	env, err := demodb.Setup(context.Background(), demodb.DSNs{Admin: dsn}, tables, migrations...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	if *db, err = demodb.Open(env.App); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer (*db).Close()
	return m.Run()
}

// FreshDSNs is a fresh database (FreshDSN) for an example to set up as the
// admin, its nodes then connecting as a user the example creates.
func FreshDSNs(t testing.TB) demodb.DSNs {
	t.Helper()
	return demodb.DSNs{Admin: FreshDSN(t)}
}

var connectsAs = regexp.MustCompile(`(?m)^nodes connect as (\S+)$`)

// RanAsItsOwnUser checks, from an example's output, that its nodes
// connected as a user created for the run (not the admin) and that the
// user is gone once the run returned. It returns the user (name@host).
func RanAsItsOwnUser(t testing.TB, dsns demodb.DSNs, out string) string {
	t.Helper()
	m := connectsAs.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the example did not say which user its nodes connect as:\n%s", out)
	}
	name, host, _ := strings.Cut(m[1], "@")
	if !strings.HasPrefix(name, "lockgen_demo_") || host != "%" {
		t.Fatalf("nodes connected as %s, want a lockgen_demo_… user created for the run", m[1])
	}
	cfg, err := demodb.Config(dsns.Admin)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := demodb.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM mysql.user WHERE user = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("user %s is still there after the run", m[1])
	}
	return m[1]
}
