package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// healthyRuns is a handler whose attempts wait for release (or for their
// context to end), and records what each attempt saw.
type healthyRuns struct {
	release chan struct{}
	started chan int64
	mu      sync.Mutex
	handled map[int64]int // attempts handled, by run
	lost    []string      // attempts whose context ended, with the cause
}

func newHealthyRuns() *healthyRuns {
	return &healthyRuns{release: make(chan struct{}), started: make(chan int64, 100), handled: map[int64]int{}}
}

func (h *healthyRuns) handle(ctx context.Context, run *jobs.Run) error {
	h.mu.Lock()
	h.handled[run.ID]++
	h.mu.Unlock()
	h.started <- run.ID
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		h.mu.Lock()
		h.lost = append(h.lost, fmt.Sprintf("run %d attempt %d: %v", run.ID, run.Attempt, context.Cause(ctx)))
		h.mu.Unlock()
		return ctx.Err()
	}
}

// waitStarted waits for n attempts to start.
func (h *healthyRuns) waitStarted(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.started:
		case <-time.After(20 * time.Second):
			t.Fatal("the healthy runs never started")
		}
	}
}

// check releases the handlers and checks that every run in ids completed
// as its first attempt, handled once, its context never ended.
func (h *healthyRuns) check(t *testing.T, j *jobs.Client, ids []int64) {
	t.Helper()
	close(h.release)
	for _, id := range ids {
		info := waitState(t, j, id, jobs.RunCompleted)
		assert.Equal(t, 1, info.Attempt, "run %d completed as its first attempt", id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Empty(t, h.lost, "healthy handlers whose context ended")
	for _, id := range ids {
		assert.Equal(t, 1, h.handled[id], "run %d was handled once", id)
	}
}

// stuckClaim is a store whose claim, once armed, finds the pool's
// connections dead: it fills the pool's idle connections, blackholes them
// (then restores the proxy, so new connections work) and claims. It counts
// the heartbeats that extended every run they named.
type stuckClaim struct {
	lockgendb.Store
	db      *sql.DB
	proxy   *tcpproxy.Proxy
	armed   atomic.Bool
	stuck   chan error // the armed claim's result
	beats   atomic.Int64
	beatErr atomic.Int64
}

func (s *stuckClaim) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration, after *driver.RunCursor) ([]jobs.Run, error) {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Store.RunsClaim(ctx, queue, worker, limit, lease, after)
	}
	// Two idle connections in the pool (its default MaxIdleConns), both
	// about to die.
	var conns []*sql.Conn
	for range 2 {
		if c, err := s.db.Conn(ctx); err == nil {
			conns = append(conns, c)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	s.proxy.Blackhole()
	s.proxy.Restore()
	runs, err := s.Store.RunsClaim(ctx, queue, worker, limit, lease, after)
	s.stuck <- err
	return runs, err
}

func (s *stuckClaim) RunsHeartbeat(ctx context.Context, claims []driver.Claim, lease time.Duration) (driver.Heartbeat, error) {
	hb, err := s.Store.RunsHeartbeat(ctx, claims, lease)
	if err != nil {
		s.beatErr.Add(1)
	} else if len(hb.Extended) == len(claims) {
		s.beats.Add(1)
	}
	return hb, err
}

// TestJobsStuckClaimDelaysNoHeartbeat: a claim stuck on a dead pooled
// connection (the proxy blackholed and restored: pooled connections dead,
// new ones fine) while healthy runs are handled does not delay their
// heartbeats: no handler is told its lease may be lost, and every run
// completes once. The claim used to run in the loop that heartbeats,
// bounded by a whole Lease, and the healthy handlers were cancelled.
func TestJobsStuckClaimDelaysNoHeartbeat(t *testing.T) {
	tdb := testdb.New(t)
	proxy, pdb := testkit.OpenViaProxy(t, tdb)
	store := &stuckClaim{Store: lockgendb.NewStore(pdb), db: pdb, proxy: proxy, stuck: make(chan error, 1)}
	j := jobsOn(t, store, "stuck-claim")
	ctx := context.Background()
	h := newHealthyRuns()
	var ids []int64
	for range 3 {
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "healthy", MaxAttempts: 3, Timeout: time.Minute})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	const lease = 2 * time.Second
	startWorker(t, j, jobs.WorkerConfig{Lease: lease, RescueEvery: -1, Concurrency: 8, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"healthy": {Handle: h.handle}}})
	h.waitStarted(t, len(ids))

	// With free slots, the worker claims again within PollMax.
	store.armed.Store(true)
	select {
	case err := <-store.stuck:
		require.Error(t, err, "the claim was not stuck on a dead connection")
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never claimed again")
	}
	// A lease's worth of heartbeats after the stuck claim gave up.
	after := store.beats.Load()
	require.Eventually(t, func() bool { return store.beats.Load() >= after+3 }, 30*time.Second, 10*time.Millisecond, "heartbeats resumed")
	h.check(t, j, ids)
}

// countingRescues counts the rescues that ended (failed or not).
type countingRescues struct {
	lockgendb.Store
	rounds atomic.Int64
}

func (s *countingRescues) RunsRescue(ctx context.Context, limit int) (int64, error) {
	n, err := s.Store.RunsRescue(ctx, limit)
	s.rounds.Add(1)
	return n, err
}

// TestJobsRescueWaitingOnARowLockDelaysNoHeartbeat: while an admin
// transaction holds a rescuable run's row (SELECT … FOR UPDATE) for longer
// than two leases, the rescue skips it round after round; the healthy runs
// being handled meanwhile are heartbeated all along: no handler is told its
// lease may be lost, and every run completes once. The rescue used to run
// in the loop that heartbeats, bounded by a whole Lease, and the healthy
// runs were cancelled, rescued and run again; then it waited on the row
// apart from the heartbeats, until its bound (TestRescueSkipsARowSomeoneHolds).
func TestJobsRescueWaitingOnARowLockDelaysNoHeartbeat(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	store := &countingRescues{Store: lockgendb.NewStore(db)}
	j := jobsOn(t, store, "node")

	// A run of a dead worker: claimed, its deadline passed.
	stale, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "stale", MaxAttempts: 3, Timeout: time.Minute})
	require.NoError(t, err)
	claimed, err := lockgendb.NewStore(db).RunsClaim(ctx, jobs.DefaultQueue, "ghost", 1, time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, stale, claimed[0].ID)
	// An admin holds its row.
	admin, err := tdb.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = admin.Rollback() }()
	var locked int64
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", stale).Scan(&locked))

	h := newHealthyRuns()
	var ids []int64
	for range 3 {
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "healthy", MaxAttempts: 3, Timeout: time.Minute})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	const lease = 2 * time.Second
	startWorker(t, j, jobs.WorkerConfig{Lease: lease, RescueEvery: 100 * time.Millisecond, Concurrency: 8, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{
			"healthy": {Handle: h.handle},
			"stale":   {Handle: func(context.Context, *jobs.Run) error { return nil }},
		}})
	h.waitStarted(t, len(ids))
	// Hold the row for well over two leases while rescues pass it by (or
	// until a healthy handler is told its lease is lost).
	held := time.Now()
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return (time.Since(held) > 5*time.Second && store.rounds.Load() >= 6) || len(h.lost) > 0
	}, 60*time.Second, 10*time.Millisecond)
	var state string
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", stale).Scan(&state))
	assert.Equal(t, "running", state, "no rescue changed the held row")
	require.NoError(t, admin.Rollback())
	h.check(t, j, ids)
	info := waitState(t, j, stale, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt, "the dead worker's run was rescued once the row was free")
}

// erroringCompletes is a store whose first completions fail with the
// server error number, more times in a row than the completer takes
// rejections.
type erroringCompletes struct {
	lockgendb.Store
	left   atomic.Int32
	number uint16
}

func (s *erroringCompletes) RunsComplete(ctx context.Context, claims []driver.Claim) (driver.Completion, error) {
	if s.left.Add(-1) >= 0 {
		return driver.Completion{}, &mysql.MySQLError{Number: s.number, Message: "failed on purpose"}
	}
	return s.Store.RunsComplete(ctx, claims)
}

// TestJobsCompletionIsRetriedAfterDeadlocksAndRefusals: a completion that
// deadlocks (1213) or times out on a row lock (1205), or that the server refuses for a reason that is not
// the outcome's (1226 max_user_connections, 1040 too many connections,
// 1045 a rotated password, 1290 read-only, 1047 a Galera node outside the
// primary component, 3100 and 3032 a Group Replication member out of its
// group), is
// retried like a lost connection, however many times in a row: the outcome is recorded, and
// its run is neither rescued nor run again. The completer used to count
// these as rejections and drop the outcome after five (issue 21 item 6;
// the chaos harness saw successful last attempts end orphaned behind
// 1226s, and on Galera a successful once run orphaned behind the 1047s of
// its node's 19-second isolation).
func TestJobsCompletionIsRetriedAfterDeadlocksAndRefusals(t *testing.T) {
	for _, number := range []uint16{1213, 1205, 1226, 1040, 1045, 1290, 1047, 3100, 3032} {
		t.Run(fmt.Sprint(number), func(t *testing.T) {
			tdb := testdb.New(t)
			store := &erroringCompletes{Store: lockgendb.NewStore(tdb.Open(t)), number: number}
			store.left.Store(8)
			j := jobsOn(t, store, "node")
			info, handled := completeOneNoop(t, j, jobs.WorkerConfig{Lease: time.Second, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond})
			assert.Equal(t, 1, info.Attempt, "completed as its first attempt")
			assert.Equal(t, int32(1), handled.Load(), "handled once")
			assert.Less(t, store.left.Load(), int32(0), "every failure was met")
		})
	}
}

// completeOneNoop starts a worker with cfg and a "noop" handler that counts
// its calls, enqueues one run of it and waits until the run completed. It
// returns the run and the handler's count.
func completeOneNoop(t *testing.T, j *jobs.Client, cfg jobs.WorkerConfig) (jobs.RunInfo, *atomic.Int32) {
	t.Helper()
	handled := &atomic.Int32{}
	cfg.Handlers = map[string]jobs.JobHandler{"noop": {Handle: func(context.Context, *jobs.Run) error {
		handled.Add(1)
		return nil
	}}}
	startWorker(t, j, cfg)
	id, err := j.Enqueue(context.Background(), nil, newRun("noop"))
	require.NoError(t, err)
	return waitState(t, j, id, jobs.RunCompleted), handled
}

// lostReplyCompletes is a store whose first completion is recorded but
// whose reply is lost: the statement applied, the worker sees a broken
// connection.
type lostReplyCompletes struct {
	lockgendb.Store
	calls atomic.Int32
	err   error // what the first completion returns
}

func (s *lostReplyCompletes) RunsComplete(ctx context.Context, claims []driver.Claim) (driver.Completion, error) {
	done, err := s.Store.RunsComplete(ctx, claims)
	if s.calls.Add(1) == 1 && err == nil && done.Completed > 0 {
		return driver.Completion{}, s.err
	}
	return done, err
}

// TestJobsCompletionRetriedAfterALostReplyIsNoLateCompletion: a completion
// whose statement applied but whose reply was lost (the connection broke,
// or the server killed it while it read the outcome back) is retried; the
// retry matches no running run, since the lost statement recorded it. That
// is logged at Debug, not as the warning for completions that arrived too
// late (whose runs may run again), which the retry used to log.
func TestJobsCompletionRetriedAfterALostReplyIsNoLateCompletion(t *testing.T) {
	for name, lost := range map[string]error{
		"broken connection": fmt.Errorf("reading the reply: %w", mysql.ErrInvalidConn),
		"connection killed": &mysql.MySQLError{Number: 1927, Message: "Connection was killed"},
	} {
		t.Run(name, func(t *testing.T) { testCompletionRetriedAfterALostReply(t, lost) })
	}
}

func testCompletionRetriedAfterALostReply(t *testing.T, lost error) {
	tdb := testdb.New(t)
	store := &lostReplyCompletes{Store: lockgendb.NewStore(tdb.Open(t)), err: lost}
	j, out := jobsLoggingAtDebug(t, store, "node")
	info, handled := completeOneNoop(t, j, jobs.WorkerConfig{PollMin: 10 * time.Millisecond})
	require.Eventually(t, func() bool { return store.calls.Load() >= 2 }, 10*time.Second, 10*time.Millisecond, "the completion is retried")
	require.Eventually(t, func() bool { return len(out.matching("level=DEBUG", "had been recorded by that statement")) > 0 }, 5*time.Second, 10*time.Millisecond)
	assert.Empty(t, out.matching("arrived too late"), "the retry of a recorded completion is no late completion")
	assert.Equal(t, 1, info.Attempt)
	assert.Equal(t, int32(1), handled.Load(), "handled once")
}

// TestJobsRowLockedByAnAdminDelaysNoOtherHeartbeat: while an admin
// transaction holds one running run's row (SELECT … FOR UPDATE) for three
// leases, the worker's other runs, heartbeated in the same batch, are
// extended all along: none of their handlers is told its lease may be
// lost, and each completes once. The held run cannot be heartbeated: its
// handler is told its lease is lost (before its deadline in the database
// passes), and it completes once the row is free. The heartbeat used to be
// one UPDATE of the whole batch, which waited on the held row until its
// bound and extended none of the runs, so every handler was cancelled.
func TestJobsRowLockedByAnAdminDelaysNoOtherHeartbeat(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "node")

	healthy, held := newHealthyRuns(), newHealthyRuns()
	heldID, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "held", MaxAttempts: 3, Timeout: time.Minute})
	require.NoError(t, err)
	var ids []int64
	for range 3 {
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "healthy", MaxAttempts: 3, Timeout: time.Minute})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	const lease = 2 * time.Second
	startWorker(t, j, jobs.WorkerConfig{Lease: lease, RescueEvery: 100 * time.Millisecond, Concurrency: 8, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"healthy": {Handle: healthy.handle}, "held": {Handle: held.handle}}})
	healthy.waitStarted(t, len(ids))
	held.waitStarted(t, 1)

	admin, err := tdb.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = admin.Rollback() }()
	var locked int64
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", heldID).Scan(&locked))
	time.Sleep(3 * lease)
	held.mu.Lock()
	lost := slices.Clone(held.lost)
	held.mu.Unlock()
	var state string
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", heldID).Scan(&state))
	require.NoError(t, admin.Rollback())

	assert.Len(t, lost, 1, "the held run's handler was told its lease is lost")
	assert.Equal(t, "running", state, "the held run was not rescued while its row was held")
	healthy.check(t, j, ids)
	close(held.release)
	info := waitState(t, j, heldID, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt, "the held run ran again once its row was free")
}

// TestJobsRowLockedByAnAdminDelaysNoOtherCompletion: four runs finish
// together, so their outcomes are one round of the completer, while an
// admin transaction holds one of their rows (SELECT … FOR UPDATE). The
// other three are recorded completed while the admin still holds the row;
// the held one stays running, and its outcome (a success, or a failure
// that makes it run again) is recorded once the row is free. The batch
// used to be one UPDATE that waited on the held row, and a failure one
// that waited before the round's completions: no outcome of the round was
// recorded until the admin let go (six successes lost to a SIGKILL in that
// wait in the MySQL chaos run of session 7).
func TestJobsRowLockedByAnAdminDelaysNoOtherCompletion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		heldErr  error // the held run's first attempt's outcome
		attempts int   // the held run's attempts once completed
	}{
		{"success", nil, 1},
		{"failure", errors.New("first attempt fails"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tdb := testdb.New(t)
			ctx := context.Background()
			j := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "node")

			release := make(chan struct{})
			started := make(chan int64, 10)
			var ids []int64
			for range 4 {
				id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "done", MaxAttempts: 3, Timeout: time.Minute})
				require.NoError(t, err)
				ids = append(ids, id)
			}
			heldID := ids[0] // first in primary key order: the UPDATE met it first
			handle := func(ctx context.Context, run *jobs.Run) error {
				started <- run.ID
				<-release
				if run.ID == heldID && run.Attempt == 1 {
					return tc.heldErr
				}
				return nil
			}
			// A long lease: no heartbeat matters here. A long CompleteEvery:
			// the completions are surely one batch.
			startWorker(t, j, jobs.WorkerConfig{Lease: 20 * time.Second, RescueEvery: 100 * time.Millisecond, Concurrency: 8,
				PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond, CompleteEvery: 300 * time.Millisecond,
				Handlers: map[string]jobs.JobHandler{"done": {Handle: handle, BackoffInitial: time.Millisecond, BackoffMax: time.Millisecond}}})
			for range ids {
				select {
				case <-started:
				case <-time.After(20 * time.Second):
					t.Fatal("the runs never started")
				}
			}

			admin, err := tdb.Open(t).BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = admin.Rollback() }()
			var locked int64
			require.NoError(t, admin.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", heldID).Scan(&locked))
			close(release)

			reader := tdb.Open(t)
			states := func() map[int64]string {
				out := map[int64]string{}
				for _, id := range ids {
					var state string
					require.NoError(t, reader.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", id).Scan(&state))
					out[id] = state
				}
				return out
			}
			var last map[int64]string
			require.Eventually(t, func() bool {
				last = states()
				return last[ids[1]] == "completed" && last[ids[2]] == "completed" && last[ids[3]] == "completed"
			}, 10*time.Second, 50*time.Millisecond, "the other runs of the round are completed while the admin holds one row: %v", &last)
			var state string
			require.NoError(t, admin.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", heldID).Scan(&state))
			assert.Equal(t, "running", state, "the held run waits for its row")
			require.NoError(t, admin.Rollback())

			info := waitState(t, j, heldID, jobs.RunCompleted)
			assert.Equal(t, tc.attempts, info.Attempt, "the held run's outcome is recorded once its row is free")
			for _, id := range ids[1:] {
				info := waitState(t, j, id, jobs.RunCompleted)
				assert.Equal(t, 1, info.Attempt, "run %d completed as its first attempt", id)
			}
		})
	}
}

// TestJobsStopGivesUpOnAHeldOutcome: a worker stopping while an admin
// transaction holds the row of a run it finished tries the outcome again
// for up to a lease, then gives up and returns: its Run does not wait for
// the admin (it would have, for as long as the row was held). The run is
// not lost: once the row is free it is rescued and run again.
func TestJobsStopGivesUpOnAHeldOutcome(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "node")
	id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "held", MaxAttempts: 3, Timeout: time.Minute})
	require.NoError(t, err)
	const lease = time.Second
	runs := newHealthyRuns()
	stop := startWorker(t, j, jobs.WorkerConfig{Lease: lease, RescueEvery: 100 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"held": {Handle: runs.handle}}})
	runs.waitStarted(t, 1)

	admin, err := tdb.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = admin.Rollback() }()
	var locked int64
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", id).Scan(&locked))
	close(runs.release)
	time.Sleep(200 * time.Millisecond) // the success reaches the completer
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * lease):
		t.Fatal("the worker's Run waits on the held row's outcome")
	}
	var state string
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", id).Scan(&state))
	assert.Equal(t, "running", state, "the held run's outcome was not written")
	require.NoError(t, admin.Rollback())

	again := newHealthyRuns()
	close(again.release)
	startWorker(t, j, jobs.WorkerConfig{Lease: lease, RescueEvery: 100 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"held": {Handle: again.handle}}})
	info := waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt, "rescued and run again: at least once, never lost")
}

// TestJobsPruneWaitingOnARowLockDelaysNoHeartbeat: while an admin
// transaction holds a running run's row (SELECT … FOR UPDATE), a prune runs;
// the worker's healthy runs are heartbeated all along, and a new run is
// enqueued at once. The prune used to be one DELETE over a range of the
// state index (REPEATABLE READ): it locked the running runs it read, waited
// on the held one, and the next-key locks it had taken stopped the
// heartbeats and inserts whose index entries fell in the gaps (the chaos
// harness, sys.innodb_lock_waits: RunInsert's insert intention on
// runs_state blocked by RunsPrune, itself blocked by the admin).
func TestJobsPruneWaitingOnARowLockDelaysNoHeartbeat(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	store := lockgendb.NewStore(db)
	j := jobsOn(t, store, "node")

	// Finished runs to prune, and a run a dead worker holds for an hour.
	_, err := db.ExecContext(ctx, "INSERT INTO lockgen_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at, finished_at) "+
		"SELECT 'old', 'default', 'completed', UTC_TIMESTAMP(6), '{}', 1, 1000000, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR "+
		"FROM information_schema.columns LIMIT 300")
	require.NoError(t, err)
	ghost, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "ghost", Queue: "ghosts", MaxAttempts: 3, Timeout: time.Hour})
	require.NoError(t, err)
	claimed, err := store.RunsClaim(ctx, "ghosts", "ghost", 1, time.Hour, nil)
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	h := newHealthyRuns()
	var ids []int64
	for range 3 {
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "healthy", MaxAttempts: 3, Timeout: time.Minute})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	const lease = 2 * time.Second
	startWorker(t, j, jobs.WorkerConfig{Lease: lease, Concurrency: 8, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"healthy": {Handle: h.handle}}})
	h.waitStarted(t, len(ids))

	admin, err := tdb.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = admin.Rollback() }()
	var locked int64
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", ghost).Scan(&locked))
	pruned := make(chan error, 1)
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 5*lease)
		defer cancel()
		_, err := j.Prune(pctx, "old", time.Minute, 100)
		pruned <- err
	}()
	time.Sleep(lease / 2)
	ectx, cancel := context.WithTimeout(ctx, lease)
	_, err = j.Enqueue(ectx, nil, jobs.NewRun{Job: "other", MaxAttempts: 1, Timeout: time.Second})
	cancel()
	assert.NoError(t, err, "an enqueue while the prune runs beside the held row")
	time.Sleep(3 * lease)
	require.NoError(t, admin.Rollback())
	require.NoError(t, <-pruned)
	h.check(t, j, ids)
	var left int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockgen_runs WHERE job = 'old'").Scan(&left))
	assert.Zero(t, left, "every finished run was pruned")
}

// TestRescueSkipsARowSomeoneHolds: two runs of dead workers are past their
// deadline and an admin transaction holds one of their rows (SELECT … FOR
// UPDATE). A rescue rescues the other at once and leaves the held one for
// a later round. It used to lock every run it had listed, waiting on the
// held row until its client gave up (the statement waited on in the server
// after that), so rescuers of different workers queued behind each other
// for up to 19 s in the chaos harness, and completions behind them.
func TestRescueSkipsARowSomeoneHolds(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := lockgendb.NewStore(tdb.Open(t))
	j := jobsOn(t, store, "node")
	var runs []int64
	for range 2 {
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "dead", MaxAttempts: 3, Timeout: time.Minute})
		require.NoError(t, err)
		runs = append(runs, id)
	}
	claimed, err := store.RunsClaim(ctx, jobs.DefaultQueue, "dead-worker", 10, 100*time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	time.Sleep(300 * time.Millisecond) // past the deadline

	admin, err := tdb.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = admin.Rollback() }()
	var locked int64
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", runs[0]).Scan(&locked))

	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	n, err := store.RunsRescue(rctx, 100)
	require.NoError(t, err, "the rescue does not wait on the held row")
	assert.Equal(t, int64(1), n, "the free run is rescued")
	assert.Equal(t, jobs.RunAvailable, waitState(t, j, runs[1], jobs.RunAvailable).State)
	var state string
	require.NoError(t, admin.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", runs[0]).Scan(&state))
	assert.Equal(t, "running", state, "the held run is left for a later round")
	require.NoError(t, admin.Rollback())

	n, err = store.RunsRescue(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "rescued once its row is free")
}
