// Package demodb opens the database pools of the example programs, the way
// an application should: the migrations run as an admin user, and the
// application's nodes connect as a user that has SELECT, INSERT, UPDATE
// and DELETE on the example's tables and nothing else.
package demodb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime"
)

// DefaultDSN is the local MariaDB the examples use unless told otherwise.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// Privileges are what the application user needs on each lockgen table
// (and, in the examples, on the application's own tables).
const Privileges = "SELECT, INSERT, UPDATE, DELETE"

// DSN returns the value of the environment variable env, or DefaultDSN.
// Programs read LOCKGEN_DSN, tests LOCKGEN_TEST_DSN.
func DSN(env string) string {
	if dsn := os.Getenv(env); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// DSNs name the users an example connects as.
type DSNs struct {
	// Admin applies the migrations (and creates App when it is empty).
	Admin string
	// App is the application's user. Empty: the example creates a user
	// for the run, grants it Privileges on the example's tables only, and
	// drops it when the run ends.
	App string
}

// FromEnv reads the programs' environment: LOCKGEN_DSN (the admin, default
// DefaultDSN) and LOCKGEN_APP_DSN (the application's user, already granted
// what Setup prints; default a user created for the run).
func FromEnv() DSNs {
	return DSNs{Admin: DSN("LOCKGEN_DSN"), App: os.Getenv("LOCKGEN_APP_DSN")}
}

// Config parses dsn and sets what the generated code needs: parseTime, for
// the DATETIME columns sqlc scans into time.Time.
func Config(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The parser's message can quote the password (a "/" in it ends
		// the user part early): never show it.
		return nil, errors.New("bad DSN: expected user:password@tcp(host:port)/dbname (a password with / or @ in it must be URL-safe)")
	}
	cfg.ParseTime = true
	return cfg, nil
}

// Open opens a pool on cfg (the examples open one per simulated node),
// each connect bounded by runtime.ConnectTimeout as the README recommends,
// and checks that the server answers.
func Open(cfg *mysql.Config) (*sql.DB, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(runtime.ConnectTimeout(c, 5*time.Second))
	if err := db.Ping(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s as %s (is MariaDB running? `make db` starts it): %w", cfg.Addr, cfg.User, err)
	}
	return db, nil
}

// Env is an example's database once set up.
type Env struct {
	// App connects as the application's user.
	App *mysql.Config
	// User is that user, as CURRENT_USER() names it (name@host).
	User string
	// Grants are the statements that gave it its privileges (empty when
	// the user came from DSNs.App).
	Grants []string
	close  func() error
}

// Close drops the user created for the run.
func (e *Env) Close() error { return e.close() }

// Setup runs the migrations (and stmts, the application's own tables and
// rows) as the admin, then gives the application its user: DSNs.App, or a
// user created for the run with Privileges on tables (in the admin DSN's
// database) only. It checks that the user can log in.
func Setup(ctx context.Context, dsns DSNs, tables []string, stmts ...string) (*Env, error) {
	adminCfg, err := Config(dsns.Admin)
	if err != nil {
		return nil, err
	}
	if adminCfg.DBName == "" {
		return nil, errors.New("dsn: name the database (…/dbname)")
	}
	admin, err := Open(adminCfg)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	for _, s := range stmts {
		if _, err := admin.ExecContext(ctx, s); err != nil && !columnExists(err) {
			return nil, fmt.Errorf("as the admin %s: %w", adminCfg.User, err)
		}
	}
	env := &Env{close: func() error { return nil }}
	if dsns.App != "" {
		if env.App, err = Config(dsns.App); err != nil {
			return nil, err
		}
	} else if err := env.createUser(ctx, admin, adminCfg, tables); err != nil {
		return nil, err
	}
	app, err := Open(env.App)
	if err == nil {
		err = app.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&env.User)
		_ = app.Close()
	}
	if err != nil {
		return nil, errors.Join(err, env.Close())
	}
	return env, nil
}

// createUser creates the run's application user, lockgen_demo_ and random
// hex digits, with a random password, and grants it Privileges on tables.
func (e *Env) createUser(ctx context.Context, admin *sql.DB, adminCfg *mysql.Config, tables []string) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "lockgen_demo_" + hex.EncodeToString(b[:])
	var pw [16]byte
	_, _ = rand.Read(pw[:])
	password := hex.EncodeToString(pw[:])
	user := "'" + name + "'@'%'"
	if _, err := admin.ExecContext(ctx, "CREATE USER "+user+" IDENTIFIED BY '"+password+"'"); err != nil {
		return fmt.Errorf("create the application's user as %s (or set LOCKGEN_APP_DSN to a user of yours): %w", adminCfg.User, err)
	}
	// The server keeps no connection to the admin, so dropping uses a
	// pool of its own.
	e.close = func() error {
		db, err := Open(adminCfg)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.Exec("DROP USER IF EXISTS " + user)
		return err
	}
	for _, t := range tables {
		g := fmt.Sprintf("GRANT %s ON %s.%s TO %s", Privileges, quote(adminCfg.DBName), quote(t), user)
		if _, err := admin.ExecContext(ctx, g); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", g, err), e.close())
		}
		e.Grants = append(e.Grants, g)
	}
	e.App = adminCfg.Clone()
	e.App.User, e.App.Passwd = name, password
	return nil
}

// quote backquotes an identifier.
func quote(id string) string { return "`" + strings.ReplaceAll(id, "`", "``") + "`" }

// columnExists reports MySQL's error 1060 (duplicate column name): a
// migration that adds columns ran already, on an earlier run of the demo
// (the demos keep no record of the migrations they applied, as a migration
// tool does).
func columnExists(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1060
}
