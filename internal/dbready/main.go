// Command dbready waits until a MySQL or MariaDB server accepts a login,
// creates the tests' database if it is missing, and prints the server's
// version. The .ci/ensure-* scripts run it, so a machine needs no database
// client to prepare the servers `make test` uses.
//
//	go run ./internal/dbready -dsn 'root@tcp(127.0.0.1:3306)/test' [-wait 30s]
//
// The DSN's database is created when missing (connecting without it first).
// Exit status 0 when ready, 1 when the server did not accept the login in
// time (the last error is printed, never the DSN's password).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/go-sql-driver/mysql"
)

func main() {
	dsn := flag.String("dsn", "", "server to check, as a go-sql-driver/mysql DSN")
	wait := flag.Duration("wait", 30*time.Second, "how long to keep trying")
	flag.Parse()
	version, err := ready(*dsn, *wait)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dbready: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(version)
}

// identifier is what dbready agrees to CREATE DATABASE (it interpolates
// the name).
var identifier = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

func ready(dsn string, wait time.Duration) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The parser's message can quote the password: never show it.
		return "", errors.New("bad DSN: expected user:password@tcp(host:port)/dbname")
	}
	name := cfg.DBName
	if name != "" && !identifier.MatchString(name) {
		return "", fmt.Errorf("database name %q: use letters, digits and _", name)
	}
	cfg.DBName = ""
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return "", err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	_ = mysql.SetLogger(mysql.Logger(nopLogger{}))
	deadline := time.Now().Add(wait)
	for {
		version, err := check(db, name)
		if err == nil {
			return version, nil
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1045 || me.Number == 1044) { // access denied: waiting will not help
			return "", fmt.Errorf("%s: %w", cfg.Addr, err)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s did not accept a login within %s: %w", cfg.Addr, wait, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func check(db *sql.DB, name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if name != "" {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
			return "", err
		}
	}
	var version, comment string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&version, &comment); err != nil {
		return "", err
	}
	return version + " (" + comment + ")", nil
}

type nopLogger struct{}

func (nopLogger) Print(...any) {}
