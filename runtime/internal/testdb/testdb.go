// Package testdb gives each test its own database on a real MariaDB/MySQL
// server: LOCKGEN_TEST_DSN, default root@tcp(127.0.0.1:3306)/test. A test
// that cannot reach the server fails; it never skips.
//
// The DSN's user is the admin: it creates the database, applies the schema
// and creates the test's application user, which has SELECT, INSERT,
// UPDATE and DELETE on the schema's tables and nothing else (the grants the
// README tells applications to give). The runtime under test connects as
// that user (Open, Config); what only an operator does (DDL, KILL, reading
// other sessions' transactions) goes through Admin.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultDSN is the server tests use when LOCKGEN_TEST_DSN is not set.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// Privileges are what the application user gets on each lockgen table.
const Privileges = "SELECT, INSERT, UPDATE, DELETE"

// BaseConfig returns the parsed test DSN (the admin) with the settings the
// runtime needs (parseTime, interpolateParams, UTC location).
func BaseConfig(t testing.TB) *mysql.Config {
	t.Helper()
	dsn := os.Getenv("LOCKGEN_TEST_DSN")
	if dsn == "" {
		dsn = DefaultDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testdb: bad LOCKGEN_TEST_DSN %q: %v", dsn, err)
	}
	cfg.ParseTime = true
	cfg.InterpolateParams = true
	return cfg
}

// DB is a fresh database created for one test and dropped after it, with
// an application user of its own, dropped with it.
type DB struct {
	// Config connects to the fresh database as the application user;
	// change a copy of it for sessions with other settings.
	Config *mysql.Config
	// AdminConfig connects to the fresh database as the admin.
	AdminConfig *mysql.Config
	// Name is the database's name; User the application user's ('User'@'%').
	Name, User string
}

// New creates an empty database with the lock schema (queries/schema.sql
// from the repository) and an application user with SELECT, INSERT,
// UPDATE, DELETE on its tables, and drops both when the test ends.
func New(t testing.TB) *DB {
	t.Helper()
	base := BaseConfig(t)
	admin := open(t, base)
	var b [6]byte
	_, _ = rand.Read(b[:])
	// The user is named like its database (22 characters; MySQL allows
	// 32), so that one test's user never collides with another's, on
	// either server, and a leftover one says where it came from.
	name := "lockgen_t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testdb: create database (is MariaDB running? `make test` starts it): %v", err)
	}
	var pw [16]byte
	_, _ = rand.Read(pw[:])
	password := hex.EncodeToString(pw[:])
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		_, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS "+quoteUser(name))
		_ = admin.Close()
	})
	if _, err := admin.ExecContext(ctx, "CREATE USER "+quoteUser(name)+" IDENTIFIED BY '"+password+"'"); err != nil {
		t.Fatalf("testdb: create the application user (the LOCKGEN_TEST_DSN user must be allowed to CREATE USER and GRANT): %v", err)
	}
	adminCfg := base.Clone()
	adminCfg.DBName = name
	cfg := adminCfg.Clone()
	cfg.User, cfg.Passwd = name, password
	d := &DB{Config: cfg, AdminConfig: adminCfg, Name: name, User: name}
	d.ApplySchema(t)
	d.checkUser(t)
	return d
}

// quoteUser is 'name'@'%' (names here are [a-z0-9_]).
func quoteUser(name string) string { return "'" + name + "'@'%'" }

// checkUser makes sure the application user's connections log in as that
// user: an anonymous account (empty user name) for localhost would take
// them over.
func (d *DB) checkUser(t testing.TB) {
	t.Helper()
	db := open(t, d.Config)
	defer db.Close()
	var user string
	if err := db.QueryRow("SELECT CURRENT_USER()").Scan(&user); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if user != d.User+"@%" {
		t.Fatalf("testdb: the application user %s logs in as %s (an anonymous account?)", d.User, user)
	}
}

// schemaTable names the tables the schema creates.
var schemaTable = regexp.MustCompile(`(?m)^CREATE TABLE IF NOT EXISTS (\w+)`)

// Tables returns the lockgen tables of the schema, in its order.
func Tables(t testing.TB) []string {
	t.Helper()
	var tables []string
	for _, m := range schemaTable.FindAllStringSubmatch(Schema(t), -1) {
		tables = append(tables, m[1])
	}
	if len(tables) == 0 {
		t.Fatal("testdb: queries/schema.sql creates no table")
	}
	return tables
}

// ApplySchema creates, as the admin, the tables of the schema that do not
// exist, and grants the application user SELECT, INSERT, UPDATE, DELETE on
// each of them.
func (d *DB) ApplySchema(t testing.TB) {
	t.Helper()
	cfg := d.AdminConfig.Clone()
	cfg.MultiStatements = true
	db := open(t, cfg)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, Schema(t)); err != nil {
		t.Fatalf("testdb: apply schema: %v", err)
	}
	d.Grant(t, Tables(t)...)
}

// Grant gives the application user SELECT, INSERT, UPDATE, DELETE on
// tables of the test database: the lockgen tables, or a table a test
// created (with Exec) for the application's own writes.
func (d *DB) Grant(t testing.TB, tables ...string) {
	t.Helper()
	db := open(t, d.AdminConfig)
	defer db.Close()
	for _, table := range tables {
		q := fmt.Sprintf("GRANT %s ON `%s`.`%s` TO %s", Privileges, d.Name, table, quoteUser(d.User))
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("testdb: %s: %v", q, err)
		}
	}
}

// Open opens a new pool (standing for one node) on the test database, as
// the application user.
func (d *DB) Open(t testing.TB) *sql.DB {
	t.Helper()
	db := open(t, d.Config)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Admin opens a pool on the test database as the admin, for what an
// operator does: DDL, KILL, reading other sessions' transactions.
func (d *DB) Admin(t testing.TB) *sql.DB {
	t.Helper()
	db := open(t, d.AdminConfig)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func open(t testing.TB, cfg *mysql.Config) *sql.DB {
	t.Helper()
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	db := sql.OpenDB(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("testdb: cannot reach %s as %s (start MariaDB or set LOCKGEN_TEST_DSN; `make test` does both): %v", cfg.Addr, cfg.User, err)
	}
	return db
}

// Schema returns queries/schema.sql from the repository root, found by
// walking up from the working directory.
func Schema(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "queries", "schema.sql"))
		if err == nil {
			return string(b)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testdb: queries/schema.sql not found above the working directory")
		}
		dir = parent
	}
}

// Exec runs statements as the admin on a fresh connection to the test
// database: DDL, such as a table of the test's own (then Grant it).
func (d *DB) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	db := open(t, d.AdminConfig)
	defer db.Close()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("testdb: %s: %v", strings.TrimSpace(query), err)
	}
}

// Drop drops the database now, before the test ends (a benchmark does so
// between measurements, so that one measurement's rows do not weigh on
// the next one's buffer pool).
func (d *DB) Drop(t testing.TB) {
	t.Helper()
	cfg := d.AdminConfig.Clone()
	cfg.DBName = ""
	admin := open(t, cfg)
	defer admin.Close()
	if _, err := admin.Exec("DROP DATABASE IF EXISTS " + d.Name); err != nil {
		t.Fatalf("testdb: drop %s: %v", d.Name, err)
	}
}

// String describes the database for failure messages.
func (d *DB) String() string { return fmt.Sprintf("%s/%s", d.Config.Addr, d.Name) }
