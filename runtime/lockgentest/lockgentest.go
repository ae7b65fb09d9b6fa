// Package lockgentest helps an application test the code that uses
// lockgen, as rivertest helps River's users: a database of its own per
// test with the generated migrations applied (NewDatabase), a job's
// handler run inline with typed arguments as a worker would run it (Work),
// and checks that code under test enqueued a run of a job with given
// arguments, in its transaction or after it committed (RequireEnqueued).
//
// It reads the runs table directly, with the application's own pool or
// transaction, so a check sees exactly what a worker would claim.
package lockgentest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime/jobs"
)

// NewDatabase creates a database of the test's own on the server of
// adminDSN (a go-sql-driver/mysql DSN of a user that may create and drop
// databases), applies every *.up.sql file of migrationsDir in name order
// (the migrations lockgen generates, in either format: goose's Down
// sections are not run), drops it when the test ends, and returns the DSN
// of the new database for the same user, with the settings the runtime
// needs (parseTime=true, loc=UTC). It fails the test when the server
// cannot be reached or a migration fails.
func NewDatabase(t testing.TB, adminDSN, migrationsDir string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(adminDSN)
	if err != nil {
		t.Fatalf("lockgentest: bad DSN: %v", err)
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("lockgentest: %v", err)
	}
	defer admin.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lockgen_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("lockgentest: create a test database on %s: %v", cfg.Addr, err)
	}
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", cfg.FormatDSN()); err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
			_ = db.Close()
		}
	})
	cfg.DBName = name
	mcfg := cfg.Clone()
	mcfg.MultiStatements = true
	migrate, err := sql.Open("mysql", mcfg.FormatDSN())
	if err != nil {
		t.Fatalf("lockgentest: %v", err)
	}
	defer migrate.Close()
	ups, err := filepath.Glob(filepath.Join(migrationsDir, "*.up.sql"))
	if err == nil && len(ups) == 0 {
		ups, err = filepath.Glob(filepath.Join(migrationsDir, "*.sql"))
	}
	if err != nil || len(ups) == 0 {
		t.Fatalf("lockgentest: no migrations in %s", migrationsDir)
	}
	sort.Strings(ups)
	for _, up := range ups {
		b, err := os.ReadFile(up)
		if err != nil {
			t.Fatalf("lockgentest: %v", err)
		}
		text := string(b)
		if i := strings.Index(text, "-- +goose Down"); i >= 0 {
			text = text[:i] // goose: one file, the Up section first
		}
		if _, err := migrate.Exec(text); err != nil {
			t.Fatalf("lockgentest: apply %s: %v", up, err)
		}
	}
	return cfg.FormatDSN()
}

// Work runs handler once, inline, as a worker runs an attempt: args go
// through JSON as they would through the runs table (so a type that does
// not survive the trip fails here too, as a permanent error), the context
// ends at the run's timeout, and a panic is returned as an error. run's
// zero fields get a worker's defaults: ID 1, attempt 1 of 1, the job
// "test", a 10 minute timeout, due and enqueued now.
func Work[T any](ctx context.Context, handler func(ctx context.Context, run *jobs.Run, args T) error, args T, run jobs.Run) (err error) {
	b, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("lockgentest: encode args: %w", err)
	}
	run.Args = b
	if run.ID == 0 {
		run.ID = 1
	}
	if run.Job == "" {
		run.Job = "test"
	}
	if run.Attempt == 0 {
		run.Attempt = 1
	}
	if run.MaxAttempts == 0 {
		run.MaxAttempts = max(run.Attempt, 1)
	}
	if run.Timeout == 0 {
		run.Timeout = 10 * time.Minute
	}
	now := time.Now().UTC()
	if run.RunAt.IsZero() {
		run.RunAt = now
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = now
	}
	ctx, cancel := context.WithTimeout(ctx, run.Timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("lockgentest: handler panicked: %v", p)
		}
	}()
	return jobs.HandleArgs(handler)(ctx, &run)
}

// Querier is a pool or a transaction: what code under test enqueues with.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Enqueued is a run found in the runs table.
type Enqueued struct {
	ID    int64
	Queue string
	State string
	// Args is the run's JSON arguments.
	Args json.RawMessage
	// RunAt is when it is due (UTC, the database clock).
	RunAt time.Time
}

// prefixPattern is what a table prefix may hold: it is pasted into SQL.
var prefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// Runs returns the runs of job in the runs table of the given prefix
// (lockgen.yaml's table_prefix; "lockgen_" by default), oldest first, as q
// sees them: in a transaction, its uncommitted enqueues too.
func Runs(ctx context.Context, q Querier, prefix, job string) ([]Enqueued, error) {
	if prefix == "" {
		prefix = "lockgen_"
	}
	if !prefixPattern.MatchString(prefix) {
		return nil, fmt.Errorf("lockgentest: table prefix %q must be letters, digits and underscores", prefix)
	}
	rows, err := q.QueryContext(ctx, "SELECT id, queue, state, args, run_at FROM "+prefix+"runs WHERE job = ? ORDER BY id", job)
	if err != nil {
		return nil, fmt.Errorf("lockgentest: read the runs of %s: %w", job, err)
	}
	defer rows.Close()
	var out []Enqueued
	for rows.Next() {
		var e Enqueued
		var args []byte
		if err := rows.Scan(&e.ID, &e.Queue, &e.State, &args, &e.RunAt); err != nil {
			return nil, fmt.Errorf("lockgentest: read the runs of %s: %w", job, err)
		}
		e.Args = json.RawMessage(args)
		out = append(out, e)
	}
	return out, rows.Err()
}

// RequireEnqueued fails t unless q sees a run of the job whose arguments
// are args (compared as JSON, so field order and spacing do not matter),
// and returns the newest such run. kind is the generated package's
// <Job>Kind (jobs.Kind: the job's name, its arguments' type and the
// tables' prefix), so the job and its arguments are checked together at
// compile time:
//
//	lockgentest.RequireEnqueued(t, tx, app.SendReceiptKind, app.SendReceiptArgs{OrderID: 7})
func RequireEnqueued[T any](t testing.TB, q Querier, kind jobs.Kind[T], args T) Enqueued {
	t.Helper()
	job := kind.Name
	want, err := json.Marshal(args)
	if err != nil {
		t.Fatalf("lockgentest: encode args: %v", err)
	}
	runs, err := Runs(context.Background(), q, kind.TablePrefix, job)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for i := len(runs) - 1; i >= 0; i-- {
		if jsonEqual(runs[i].Args, want) {
			return runs[i]
		}
		seen = append(seen, string(runs[i].Args))
	}
	if len(seen) == 0 {
		t.Fatalf("lockgentest: no run of %s with args %s (it has no run)", job, want)
	}
	t.Fatalf("lockgentest: no run of %s with args %s (its runs' args, newest first: %s)", job, want, strings.Join(seen, ", "))
	return Enqueued{}
}

// RequireNotEnqueued fails t if q sees any run of the job of kind (the
// generated package's <Job>Kind).
func RequireNotEnqueued[T any](t testing.TB, q Querier, kind jobs.Kind[T]) {
	t.Helper()
	job := kind.Name
	runs, err := Runs(context.Background(), q, kind.TablePrefix, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) > 0 {
		t.Fatalf("lockgentest: %d runs of %s, want none (the first: %d with args %s)", len(runs), job, runs[0].ID, runs[0].Args)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
