// Package sqltest gives a test of the root module an empty database of its
// own on the test server: LOCKGEN_TEST_DSN, default
// root@tcp(127.0.0.1:3306)/test (`make test` runs these tests against
// MariaDB and MySQL). A test that cannot reach the server fails; it never
// skips.
package sqltest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// DB is an empty database created for one test and dropped after it.
type DB struct {
	// Admin is a pool on the server, outside the database.
	Admin *sql.DB
	// Config connects to the database (parseTime on); change a copy of it
	// for connections with other settings.
	Config *mysql.Config
}

// New creates the database, named prefix and random hex digits.
func New(t *testing.T, prefix string) *DB {
	t.Helper()
	dsn := os.Getenv("LOCKGEN_TEST_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	admin := Open(t, cfg)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	_, err = admin.Exec("CREATE DATABASE " + name)
	require.NoError(t, err, "is the test server running? `make test` starts it")
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name) })
	cfg = cfg.Clone()
	cfg.DBName = name
	cfg.ParseTime = true
	return &DB{Admin: admin, Config: cfg}
}

// Open opens a pool on cfg, closed when the test ends.
func Open(t *testing.T, cfg *mysql.Config) *sql.DB {
	t.Helper()
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
