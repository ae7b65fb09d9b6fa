package runtime

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/probe"
)

// serverCheck keeps, per Client, the probe of the server once it found
// every table in place, and the answer for each feature, so that later
// calls cost a mutex and a map lookup.
type serverCheck struct {
	mu       sync.Mutex
	report   *probe.Report
	refusals map[probe.Feature]error
}

// CheckServer probes the server now, as the first lock or job call would:
// it fails with an error wrapping ErrUnsupported when the server (TiDB or
// another engine lockgen does not know, MySQL before 8.0, MariaDB before
// 10.6) cannot run lockgen's locks safely, and with ErrInvalid when the
// connection lacks parseTime=true, its loc is not UTC, its character set
// is not utf8mb4 or its sql_mode not strict (either could store two keys
// as one row; the error names the DSN setting to change), or the lock
// table is missing or does not match the migration that creates it (a
// column or an index missing; the error names the table, what it lacks
// and the migration). The probe costs a few statements once per Client; a
// probe that failed, or found a table missing or unlike its migration, is
// tried again at the next call.
func (c *Client) CheckServer(ctx context.Context) error {
	return c.checkServer(ctx, nil, probe.Lease)
}

// checkServer refuses f when the probed server or connection cannot run
// it. It probes through tx when tx is not nil (the probe only reads), else
// through the store's pool; once every table is in place the answers are
// kept, so later calls cost a mutex and a map lookup.
func (c *Client) checkServer(ctx context.Context, tx *sql.Tx, f probe.Feature) error {
	ss := c.store
	c.server.mu.Lock()
	err, known := c.server.refusals[f]
	c.server.mu.Unlock()
	if known {
		return err
	}
	// Not under the mutex: each first caller waits only for its own probe,
	// bounded by its own ctx.
	target := ss.Server()
	if target.DB == nil {
		return nil // a test's store that hides its pool (driver.Target.DB)
	}
	var q probe.Querier = target.DB
	if tx != nil {
		// Through the caller's transaction: a probe through the pool
		// would wait for a second connection, which a pool the
		// transaction exhausted never gives.
		q = tx
	}
	tables := []string{target.LocksTable}
	if target.RunsTable != "" {
		tables = append(tables, target.RunsTable)
	}
	if target.QueuesTable != "" {
		tables = append(tables, target.QueuesTable)
	}
	r, err := probe.Run(ctx, q, tables...)
	if err != nil {
		return fmt.Errorf("lockgen: checking the server: %w", err)
	}
	c.server.mu.Lock()
	defer c.server.mu.Unlock()
	c.server.report = r
	c.server.refusals = map[probe.Feature]error{}
	for _, each := range probe.Features {
		if tableTrouble(r, each, target) {
			continue // not kept: the migrations may be applied meanwhile
		}
		c.server.refusals[each] = refusal(r, each, target)
	}
	return refusal(r, f, target)
}

// CheckFeature is CheckServer for feature f of the probe: probe.Lease,
// probe.Session, probe.Row, probe.Jobs (which also needs the runs table).
// With a non-nil tx, a probe not yet made runs inside tx (it only reads),
// since one through the pool would need a second connection of a pool the
// caller's transaction may have exhausted.
func (c *Client) CheckFeature(ctx context.Context, tx *sql.Tx, f probe.Feature) error {
	return c.checkServer(ctx, tx, f)
}

// schema is what one migration makes of a table, and that migration's
// name for the error that says it is missing.
type schema struct {
	probe.TableSchema
	migration string
	// column: the migration adds columns to a table an earlier one
	// creates.
	column bool
}

// schemas are the tables f needs, as their migrations create them.
func schemas(f probe.Feature, target driver.Target) []schema {
	s := []schema{{probe.LocksSchema(target.LocksTable), migrationOf(target.LocksMigration, target), false}}
	if f == probe.Session || f == probe.Row { // a row takeover reads the reservation
		s = append(s, schema{probe.LocksSessionSchema(target.LocksTable), migrationOf(target.LocksSessionMigration, target), true})
	}
	if f == probe.Jobs {
		s = append(s, schema{probe.RunsSchema(target.RunsTable), migrationOf(target.RunsMigration, target), false})
		if target.QueuesTable != "" {
			s = append(s, schema{probe.QueuesSchema(target.QueuesTable), migrationOf(target.QueuesMigration, target), false})
		}
		s = append(s, schema{probe.RunsHistorySchema(target.RunsTable), migrationOf(target.HistoryMigration, target), true})
		s = append(s, schema{probe.RunsHeadersSchema(target.RunsTable), migrationOf(target.HeadersMigration, target), true})
	}
	return s
}

// tableTrouble tells whether a table f needs is missing or unlike its
// migration: an answer not to keep, since the migrations may be applied
// meanwhile.
func tableTrouble(r *probe.Report, f probe.Feature, target driver.Target) bool {
	for _, t := range schemas(f, target) {
		if !r.Tables[t.Table] || len(r.Lacks(t.TableSchema)) > 0 {
			return true
		}
	}
	return false
}

// migrationOf names migration file of target, or where the migrations
// are when the store does not name its files.
func migrationOf(file string, target driver.Target) string {
	switch {
	case file != "":
		return "migration " + file
	case target.Migrations != "":
		return "the migrations in " + target.Migrations
	}
	return "the migrations lockgen generate wrote"
}

// guardRefusal is Guard's ErrUnsupported on a cluster (see
// probe.Report.GuardRefusal): from the probe when it ran, else (a store
// that hides its pool) by asking whether the server is a Galera node.
func (c *Client) guardRefusal(ctx context.Context) error {
	c.server.mu.Lock()
	r := c.server.report
	c.server.mu.Unlock()
	if r != nil {
		if why := r.GuardRefusal(); why != "" {
			return fmt.Errorf("%w: Guard on %s: %s", ErrUnsupported, r.Server(), why)
		}
		return nil
	}
	galera, err := c.isGalera(ctx)
	if err != nil {
		return err
	}
	if galera {
		return fmt.Errorf("%w: Guard on a Galera cluster (wsrep_on): %s", ErrUnsupported, (&probe.Report{Cluster: probe.Galera}).GuardRefusal())
	}
	return nil
}

// refusal is the error for running f on the server of r, nil when it can
// run.
func refusal(r *probe.Report, f probe.Feature, target driver.Target) error {
	if why := r.Refusal(f); why != "" {
		return fmt.Errorf("%w: %s on %s: %s", ErrUnsupported, f, r.Server(), why)
	}
	if bad := r.Settings(); len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(bad, "; "))
	}
	for _, t := range schemas(f, target) {
		if !r.Tables[t.Table] {
			// A user without privileges on a table does not see it either.
			return fmt.Errorf("%w: table %s does not exist in database %q, or user %s has no privilege on it: apply %s with your migration tool, and grant the application's user SELECT, INSERT, UPDATE, DELETE on lockgen's tables", ErrInvalid,
				t.Table, r.Database, r.User, t.migration)
		}
	}
	for _, t := range schemas(f, target) {
		if lacks := r.Lacks(t.TableSchema); len(lacks) > 0 {
			if t.column {
				return fmt.Errorf("%w: %s", ErrInvalid, probe.ColumnsProblem(t.Table, r.Database, lacks, t.migration))
			}
			return fmt.Errorf("%w: %s", ErrInvalid, probe.SchemaProblem(t.Table, r.Database, lacks, t.migration))
		}
	}
	return nil
}

// getLockPoll is how often the sub-second rest of a GET_LOCK wait is
// polled where the server rounds GET_LOCK's timeout to whole seconds.
const getLockPoll = 50 * time.Millisecond

// getLock runs GET_LOCK for name on conn, waiting up to wait. MySQL rounds
// GET_LOCK's timeout to whole seconds (0.3 s returns at once, 0.7 s waits
// a second); MariaDB waits fractions. Unless the probe found MariaDB, the
// server waits the whole seconds of wait and the rest is polled with
// GET_LOCK(name, 0) every 50 ms, so a wait neither ends early nor runs
// over by more than one poll. Results are GetLock's.
func (c *Client) getLock(ctx context.Context, conn driver.SessionConn, name string, wait time.Duration) (int64, error) {
	first, polled := c.lockWaits(wait)
	deadline := c.clock.Now().Add(wait)
	got, err := conn.GetLock(ctx, name, first)
	if err != nil || got != 0 || !polled {
		return got, err
	}
	return c.pollLock(ctx, conn, name, deadline)
}

// boundGetLock is getLock on a pinned connection whose idle time is not
// bounded yet: the first GET_LOCK and the bound (SessionConn.BoundIdle)
// go in one statement, SessionConn.BoundGetLock. When the wait goes on
// after it (MySQL's polled sub-second rest), the session is bounded first,
// since a GET_LOCK that did not acquire changed nothing. Results are
// GetLock's; on error the caller discards the connection.
func (c *Client) boundGetLock(ctx context.Context, conn driver.SessionConn, name string, wait, idle time.Duration) (int64, error) {
	first, polled := c.lockWaits(wait)
	deadline := c.clock.Now().Add(wait)
	ok, err := conn.BoundGetLock(ctx, idle, name, first)
	switch {
	case err != nil:
		return -1, err
	case ok:
		return 1, nil
	case !polled:
		return 0, nil
	}
	if err := conn.BoundIdle(ctx, idle); err != nil {
		return -1, err
	}
	return c.pollLock(ctx, conn, name, deadline)
}

// lockWaits splits a wait for GET_LOCK: the first call's timeout, and
// whether the rest is polled until the deadline (see getLock).
func (c *Client) lockWaits(wait time.Duration) (first time.Duration, polled bool) {
	c.server.mu.Lock()
	fractional := c.server.report != nil && c.server.report.FractionalLockWait()
	c.server.mu.Unlock()
	if wait <= 0 || fractional {
		return max(wait, 0), false
	}
	return wait.Truncate(time.Second), true
}

// pollLock polls GET_LOCK(name, 0) every getLockPoll until it answers or
// deadline passes (0).
func (c *Client) pollLock(ctx context.Context, conn driver.SessionConn, name string, deadline time.Time) (int64, error) {
	for {
		left := deadline.Sub(c.clock.Now())
		if left <= 0 {
			return 0, nil
		}
		if err := sleepOrWake(ctx, c.clock, min(left, getLockPoll), nil); err != nil {
			return 0, err
		}
		if got, err := conn.GetLock(ctx, name, 0); err != nil || got != 0 {
			return got, err
		}
	}
}
