// Package demodb opens the database pools of the example programs.
package demodb

import (
	"database/sql"
	"fmt"
	"os"

	"github.com/go-sql-driver/mysql"
)

// DefaultDSN is the local MariaDB the examples use unless told otherwise.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// DSN returns the value of the environment variable env, or DefaultDSN.
// Programs read LOCKGEN_DSN, tests LOCKGEN_TEST_DSN.
func DSN(env string) string {
	if dsn := os.Getenv(env); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// Config parses dsn and sets what the generated code needs: parseTime, for
// the DATETIME columns sqlc scans into time.Time.
func Config(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	cfg.ParseTime = true
	return cfg, nil
}

// Open opens a pool on cfg (the examples open one per simulated node) and
// checks that the server answers.
func Open(cfg *mysql.Config) (*sql.DB, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	if err := db.Ping(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s (is MariaDB running? `make db` starts it): %w", cfg.Addr, err)
	}
	return db, nil
}
