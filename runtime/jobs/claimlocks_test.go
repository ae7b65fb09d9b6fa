package jobs_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// TestClaimLocksOnlyTheRunsItTakes: while a claim of a batch is open, from
// the first due run or from a place (driver.RunCursor), every other due
// run can still be claimed (locked with NOWAIT) by another transaction. MySQL 9.7 read the claim through the state index and sorted,
// which locked every available run it read, so one claim blocked every
// other claim until it committed (and deadlocked with them under load).
// Each claim reads about as many index entries as it takes runs: from a
// place, the claim index is read as a range from there (MariaDB 10.11's
// EXPLAIN names only queue and state as the range's key parts, but reads
// from the place).
func TestClaimLocksOnlyTheRunsItTakes(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	j := jobsNode(t, db, "claimer")
	bg := context.Background()
	const n, claim = 900, 50
	runs := make([]jobs.NewRun, n)
	for i := range runs {
		runs[i] = newRun("many")
	}
	require.NoError(t, j.EnqueueMany(bg, nil, runs))
	// A busy queue: a third of its runs running (far from their deadline),
	// and statistics like a table that has seen traffic, so that the
	// optimizer chooses as it would in production.
	tdb.Exec(t, "UPDATE lockgen_runs SET run_at = run_at - INTERVAL id SECOND")
	tdb.Exec(t, "UPDATE lockgen_runs SET state = 'running', claim = 1, claim_ref = CONCAT(id, ':1'), deadline = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE id % 3 = 0")
	tdb.Exec(t, "ANALYZE TABLE lockgen_runs")
	// The due runs in claim order, and their places.
	var ids []int64
	var places []driver.RunCursor
	rows, err := db.QueryContext(bg, "SELECT id, priority, run_at FROM lockgen_runs WHERE state = 'available' ORDER BY priority DESC, run_at, id")
	require.NoError(t, err)
	for rows.Next() {
		var c driver.RunCursor
		require.NoError(t, rows.Scan(&c.ID, &c.Priority, &c.RunAt))
		ids = append(ids, c.ID)
		places = append(places, c)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, n-n/3)

	for _, tc := range []struct {
		name  string
		after *driver.RunCursor
	}{
		{"from the first", nil},
		{"from a place", &places[len(places)/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(bg, 30*time.Second)
			defer cancel()
			priority, runAt, id := driver.CursorArgs(tc.after)
			err := driver.InTx(ctx, db, func(conn *sql.Conn) error {
				rows, err := lockgendb.New(conn).RunsClaimable(ctx, lockgendb.RunsClaimableParams{
					Queue: jobs.DefaultQueue, AfterPriority: priority, AfterRunAt: runAt, AfterID: id, Limit: claim})
				if err != nil {
					return err
				}
				require.Len(t, rows, claim)
				taken := map[int64]bool{}
				for _, r := range rows {
					taken[r.ID] = true
				}
				if tc.after != nil {
					at := slices.Index(ids, tc.after.ID)
					for _, id := range ids[at+1 : at+1+claim] {
						require.True(t, taken[id], "the claim from the place took the %d runs after it", claim)
					}
				}
				other, err := db.BeginTx(ctx, nil)
				require.NoError(t, err)
				defer func() { _ = other.Rollback() }()
				locked := 0
				for _, id := range ids {
					if taken[id] {
						continue
					}
					var got int64
					if err := other.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE NOWAIT", id).Scan(&got); err != nil {
						locked++
					}
				}
				require.Zero(t, locked, "a claim of %d runs locked %d other due runs", claim, locked)
				return nil
			})
			require.NoError(t, err)
			// The claim reads the claim index as a range from where it
			// starts: the index entries it reads are about the runs it
			// takes, not the due runs before its place. Index condition
			// pushdown is turned off for this read, so that every entry the
			// server reads counts in Handler_read_next (with it, MySQL
			// counts only the entries that pass the condition).
			read := claimIndexEntriesRead(t, ctx, tdb, priority, runAt, id, claim)
			assert.LessOrEqual(t, read, int64(2*claim), "a claim of %d runs read %d index entries", claim, read)
		})
	}
}

// claimIndexEntriesRead runs the claim statement from the place (priority,
// runAt, id), taking up to limit runs, on a connection of its own with index
// condition pushdown off, and returns how many index entries it read
// (Handler_read_next). It rolls the claim back.
func claimIndexEntriesRead(t *testing.T, ctx context.Context, tdb *testdb.DB, priority int64, runAt time.Time, id int64, limit int32) int64 {
	t.Helper()
	pool := tdb.Open(t)
	defer func() { _ = pool.Close() }()
	conn, err := pool.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = conn.ExecContext(ctx, "SET SESSION optimizer_switch = 'index_condition_pushdown=off'")
	require.NoError(t, err)
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	readNext := func() int64 {
		var name string
		var n int64
		require.NoError(t, tx.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read_next'").Scan(&name, &n))
		return n
	}
	before := readNext()
	rows, err := lockgendb.New(tx).RunsClaimable(ctx, lockgendb.RunsClaimableParams{
		Queue: jobs.DefaultQueue, AfterPriority: priority, AfterRunAt: runAt, AfterID: id, Limit: limit})
	require.NoError(t, err)
	require.Len(t, rows, int(limit))
	return readNext() - before
}

// TestStaleHeartbeatHoldsNoRowOfTheNewClaim: a worker cut off while its run
// was rescued and claimed again still heartbeats its old claim. Its
// heartbeat locked the run's row by ID, and a heartbeat transaction stuck
// before its commit (a partition whose server side stays open, a paused
// process) held that row, so the new claim's heartbeats skipped it as busy
// until its healthy handler was cancelled (the chaos runs beside a loaded
// machine). A stale heartbeat now takes no lock on the new claim's row:
// the new claim is extended while the old one's heartbeat hangs before its
// commit, and the old claim is told it is gone.
func TestStaleHeartbeatHoldsNoRowOfTheNewClaim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tdb := testdb.New(t)
	db := tdb.Open(t)
	store := lockgendb.NewStore(db)
	j := jobsOn(t, store, "node")
	id, err := j.Enqueue(ctx, nil, newRun("stale"))
	require.NoError(t, err)
	first, err := store.RunsClaim(ctx, jobs.DefaultQueue, "cut-off", 1, 50*time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, first, 1)
	old := driver.Claim{ID: id, Claim: first[0].Claim}
	var again []driver.Run
	require.Eventually(t, func() bool {
		_, err := store.RunsRescue(ctx, 10)
		require.NoError(t, err)
		again, err = store.RunsClaim(ctx, jobs.DefaultQueue, "new", 1, time.Minute, nil)
		require.NoError(t, err)
		return len(again) == 1
	}, 20*time.Second, 50*time.Millisecond, "the run is rescued and claimed again")
	current := driver.Claim{ID: id, Claim: again[0].Claim}
	require.Greater(t, current.Claim, old.Claim)

	// The cut-off worker's pool holds each transaction's commit until the
	// test lets it go.
	gate := &commitGate{release: make(chan struct{})}
	cutDB := sql.OpenDB(gate.wrap(testkit.Connector(t, tdb.Config)))
	defer cutDB.Close()
	cutOff := lockgendb.NewStore(cutDB)
	stale := make(chan driver.Heartbeat, 1)
	go func() {
		hb, err := cutOff.RunsHeartbeat(ctx, []driver.Claim{old}, time.Minute)
		assert.NoError(t, err)
		stale <- hb
	}()
	require.Eventually(t, gate.waiting.Load, 10*time.Second, 5*time.Millisecond, "the stale heartbeat reaches its commit")

	hb, err := store.RunsHeartbeat(ctx, []driver.Claim{current}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []driver.Claim{current}, hb.Extended, "the new claim is extended, not skipped as busy, while the stale heartbeat hangs: %+v", hb)
	close(gate.release)
	hb = <-stale
	assert.Equal(t, []driver.Claim{old}, hb.Gone, "the old claim learns it is gone: %+v", hb)
}

// commitGate wraps a connector whose connections hold the statement that
// commits a driver.InTx transaction ("COMMIT") until
// release is closed.
type commitGate struct {
	release chan struct{}
	waiting atomic.Bool
}

func (g *commitGate) wrap(c sqldriver.Connector) sqldriver.Connector { return gatedConnector{c, g} }

type gatedConnector struct {
	sqldriver.Connector
	g *commitGate
}

func (c gatedConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return gatedConn{conn.(mysqlConn), c.g}, nil
}

// mysqlConn is what database/sql uses of the MySQL driver's connections.
type mysqlConn interface {
	sqldriver.Conn
	sqldriver.ExecerContext
	sqldriver.QueryerContext
	sqldriver.ConnBeginTx
	sqldriver.ConnPrepareContext
	sqldriver.NamedValueChecker
	sqldriver.SessionResetter
	sqldriver.Validator
}

type gatedConn struct {
	mysqlConn
	g *commitGate
}

func (c gatedConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	if query == "COMMIT" {
		c.g.waiting.Store(true)
		<-c.g.release
	}
	return c.mysqlConn.ExecContext(ctx, query, args)
}

// TestCompletionSkipsARowAnOperatorHolds: a worker's completion batch
// holds a run whose row an operator's transaction has locked, and a run
// that was rescued and claimed again by another worker meanwhile (a stale
// outcome). The completion returns at once: it reports the held run busy
// (not completed, still running with its claim) and completes nothing,
// while the operator's transaction still holds the row; the stale outcome
// matches nothing and leaves no lock on the new claim's row, whose
// heartbeat extends it. Once the row is free, the held run's completion is
// recorded. The completion used to be one UPDATE that waited on the held
// row until the operator let go (it kept a batch of six successes
// unrecorded until a SIGKILL in the MySQL chaos run of session 7).
func TestCompletionSkipsARowAnOperatorHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tdb := testdb.New(t)
	db := tdb.Open(t)
	store := lockgendb.NewStore(db)
	j := jobsOn(t, store, "node")
	staleID, err := j.Enqueue(ctx, nil, newRun("stale"))
	require.NoError(t, err)
	heldID, err := j.Enqueue(ctx, nil, newRun("held"))
	require.NoError(t, err)
	first, err := store.RunsClaim(ctx, jobs.DefaultQueue, "cut-off", 2, 50*time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, first, 2)
	claims := map[int64]driver.Claim{}
	for _, r := range first {
		claims[r.ID] = driver.Claim{ID: r.ID, Claim: r.Claim}
	}
	// Both deadlines pass, the rescue makes both due again, and another
	// worker claims both. The completion the test sends carries stale's
	// old claim (a stale outcome) and held's current one.
	require.Eventually(t, func() bool {
		_, err := store.RunsRescue(ctx, 10)
		require.NoError(t, err)
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockgen_runs WHERE state = 'available'").Scan(&n))
		return n == 2
	}, 20*time.Second, 50*time.Millisecond, "both runs are rescued")
	again, err := store.RunsClaim(ctx, jobs.DefaultQueue, "new", 2, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, again, 2)
	var current driver.Claim
	for _, r := range again {
		if r.ID == staleID {
			current = driver.Claim{ID: r.ID, Claim: r.Claim}
		} else {
			claims[heldID] = driver.Claim{ID: r.ID, Claim: r.Claim}
		}
	}
	require.NotZero(t, current.ID)

	// The operator's transaction holds held's row.
	admin := tdb.Admin(t)
	tx, err := admin.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", heldID)
	require.NoError(t, err)

	// The completion runs on a connection that ran nothing before, as a
	// worker's completer may: a connection that had run a READ COMMITTED
	// transaction (a claim, a rescue) kept that isolation for the
	// statements after it, on MySQL, and hid a hole from an earlier form
	// of this test.
	fresh := lockgendb.NewStore(tdb.Open(t))
	batch := []driver.Claim{claims[staleID], claims[heldID]}
	bounded, stop := context.WithTimeout(ctx, 5*time.Second)
	done, err := fresh.RunsComplete(bounded, batch)
	stop()
	require.NoError(t, err, "the completion returns while the operator holds the row")
	assert.Equal(t, driver.Completion{Busy: []driver.Claim{claims[heldID]}}, done, "held is busy, stale's old claim matches nothing")

	hb, err := store.RunsHeartbeat(ctx, []driver.Claim{current, claims[heldID]}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []driver.Claim{current}, hb.Extended, "the new claim of stale is extended: %+v", hb)
	assert.Equal(t, []driver.Claim{claims[heldID]}, hb.Busy, "held's row is still the operator's: %+v", hb)

	require.NoError(t, tx.Rollback())
	done, err = fresh.RunsComplete(ctx, batch)
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{Completed: 1}, done, "held completes once its row is free")
	var state string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", heldID).Scan(&state))
	assert.Equal(t, "completed", state)
	require.NoError(t, db.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", staleID).Scan(&state))
	assert.Equal(t, "running", state, "stale's old claim matches nothing")
}
