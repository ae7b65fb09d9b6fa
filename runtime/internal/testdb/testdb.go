// Package testdb gives each test its own database on a real MariaDB/MySQL
// server: LOCKGEN_TEST_DSN, default root@tcp(127.0.0.1:3306)/test. A test
// that cannot reach the server fails; it never skips.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultDSN is the server tests use when LOCKGEN_TEST_DSN is not set.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// BaseConfig returns the parsed test DSN with the settings the runtime
// needs (parseTime, interpolateParams, UTC location).
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

// DB is a fresh database created for one test and dropped after it.
type DB struct {
	// Config connects to the fresh database; change a copy of it for
	// sessions with other settings.
	Config *mysql.Config
	// Name is the database's name.
	Name string
}

// New creates an empty database with the lock schema (queries/schema.sql
// from the repository) and drops it when the test ends.
func New(t testing.TB) *DB {
	t.Helper()
	base := BaseConfig(t)
	admin := open(t, base)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lockgen_t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testdb: create database (is MariaDB running? `make test` starts it): %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		_ = admin.Close()
	})
	cfg := base.Clone()
	cfg.DBName = name
	d := &DB{Config: cfg, Name: name}
	d.ApplySchema(t)
	return d
}

// ApplySchema creates the tables of the schema that do not exist.
func (d *DB) ApplySchema(t testing.TB) {
	t.Helper()
	cfg := d.Config.Clone()
	cfg.MultiStatements = true
	db := open(t, cfg)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, Schema(t)); err != nil {
		t.Fatalf("testdb: apply schema: %v", err)
	}
}

// Open opens a new pool (standing for one node) on the test database.
func (d *DB) Open(t testing.TB) *sql.DB {
	t.Helper()
	db := open(t, d.Config)
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
		t.Fatalf("testdb: cannot reach %s (start MariaDB or set LOCKGEN_TEST_DSN; `make test` does both): %v", cfg.Addr, err)
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

// Exec runs statements on a fresh connection to the test database.
func (d *DB) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	db := d.Open(t)
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("testdb: %s: %v", strings.TrimSpace(query), err)
	}
}

// Drop drops the database now, before the test ends (a benchmark does so
// between measurements, so that one measurement's rows do not weigh on
// the next one's buffer pool).
func (d *DB) Drop(t testing.TB) {
	t.Helper()
	cfg := d.Config.Clone()
	cfg.DBName = ""
	admin := open(t, cfg)
	defer admin.Close()
	if _, err := admin.Exec("DROP DATABASE IF EXISTS " + d.Name); err != nil {
		t.Fatalf("testdb: drop %s: %v", d.Name, err)
	}
}

// String describes the database for failure messages.
func (d *DB) String() string { return fmt.Sprintf("%s/%s", d.Config.Addr, d.Name) }
