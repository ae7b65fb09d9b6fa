package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// jobsNode is one node's job API on its own pool.
func jobsNode(t *testing.T, db *sql.DB, owner string) *jobs.Client {
	t.Helper()
	return jobsOn(t, lockgendb.NewStore(db), owner)
}

func jobsOn(t *testing.T, store driver.JobStore, owner string) *jobs.Client {
	t.Helper()
	c, err := runtime.NewClient(store, runtime.WithOwner(owner))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	return j
}

// startWorker runs a worker until the test ends (or stop is called) and
// fails the test if Run returns an error.
func startWorker(t *testing.T, j *jobs.Client, cfg jobs.WorkerConfig) (stop func()) {
	t.Helper()
	w, err := j.NewWorker(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			assert.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

func newRun(job string) jobs.NewRun {
	return jobs.NewRun{Job: job, MaxAttempts: 3, Timeout: 10 * time.Second}
}

// waitState waits until run id is in state.
func waitState(t *testing.T, j *jobs.Client, id int64, state jobs.RunState) jobs.RunInfo {
	t.Helper()
	var mu sync.Mutex
	var info jobs.RunInfo
	var lastErr error
	ok := assert.Eventually(t, func() bool {
		got, err := j.Get(context.Background(), id)
		mu.Lock()
		defer mu.Unlock()
		info, lastErr = got, err
		return err == nil && got.State == state
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if !ok {
		t.Fatalf("run %d never reached %s (last: %+v, error %v)", id, state, info, lastErr)
	}
	return info
}

// runLog records which runs ran and fails on a run handled twice at once.
type runLog struct {
	mu      sync.Mutex
	ran     map[int64]int
	inside  map[int64]bool
	overlap []int64
}

func newRunLog() *runLog { return &runLog{ran: map[int64]int{}, inside: map[int64]bool{}} }

func (l *runLog) enter(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inside[id] {
		l.overlap = append(l.overlap, id)
	}
	l.inside[id] = true
	l.ran[id]++
}

func (l *runLog) exit(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inside, id)
}

// TestJobsEveryRunRunsOnceAcrossNodes: 10,000 runs enqueued from three
// nodes, worked by three nodes: every run completes, each ran exactly once
// (no worker died, so none is retried), and none ran twice at once.
func TestJobsEveryRunRunsOnceAcrossNodes(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	const total, nodes = 10000, 3
	var js []*jobs.Client
	for i := 0; i < nodes; i++ {
		js = append(js, jobsNode(t, tdb.Open(t), fmt.Sprintf("node-%d", i)))
	}
	log := newRunLog()
	var completed atomic.Int64
	handler := jobs.JobHandler{Handle: func(ctx context.Context, run *jobs.Run) error {
		log.enter(run.ID)
		defer log.exit(run.ID)
		completed.Add(1)
		return nil
	}}
	for i, j := range js {
		startWorker(t, j, jobs.WorkerConfig{Handlers: map[string]jobs.JobHandler{"noop": handler}, Concurrency: 20 + i})
	}
	ids := make(chan int64, total)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := js[g%nodes]
			for i := g; i < total; i += 8 {
				r := newRun("noop")
				r.Delay = time.Duration(i%50) * time.Millisecond
				id, err := j.Enqueue(ctx, nil, r)
				if !assert.NoError(t, err) {
					return
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	require.Len(t, ids, total)
	require.Eventually(t, func() bool { return completed.Load() >= total }, 2*time.Minute, 20*time.Millisecond)
	var notCompleted int
	require.NoError(t, tdb.Open(t).QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE state <> 'completed'").Scan(&notCompleted))
	require.Eventually(t, func() bool {
		require.NoError(t, tdb.Open(t).QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE state <> 'completed'").Scan(&notCompleted))
		return notCompleted == 0
	}, 10*time.Second, 20*time.Millisecond, "completions are recorded")
	log.mu.Lock()
	defer log.mu.Unlock()
	assert.Empty(t, log.overlap, "no run handled twice at once")
	assert.Len(t, log.ran, total, "every run ran")
	for id := range ids {
		assert.Equal(t, 1, log.ran[id], "run %d ran once", id)
	}
}

// TestJobsRetryBackoffDiscardAndRestore: a failing run is retried until
// max_attempts, then discarded with its error kept; Retry restores it and
// it runs again from attempt 1.
func TestJobsRetryBackoffDiscardAndRestore(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "node")
	var fail atomic.Bool
	fail.Store(true)
	var attempts []int
	var mu sync.Mutex
	startWorker(t, j, jobs.WorkerConfig{PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond, Handlers: map[string]jobs.JobHandler{
		"flaky": {BackoffInitial: 20 * time.Millisecond, BackoffMax: 40 * time.Millisecond, Handle: func(ctx context.Context, run *jobs.Run) error {
			mu.Lock()
			attempts = append(attempts, run.Attempt)
			mu.Unlock()
			if fail.Load() {
				return fmt.Errorf("attempt %d failed", run.Attempt)
			}
			return nil
		}},
	}})
	id, err := j.Enqueue(ctx, nil, newRun("flaky"))
	require.NoError(t, err)
	info := waitState(t, j, id, jobs.RunDiscarded)
	assert.Equal(t, 3, info.Attempt)
	assert.Equal(t, "attempt 3 failed", info.LastError)
	assert.False(t, info.FinishedAt.IsZero())
	mu.Lock()
	assert.Equal(t, []int{1, 2, 3}, attempts)
	mu.Unlock()

	fail.Store(false)
	ok, err := j.Retry(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	info = waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, 1, info.Attempt, "attempts count from zero again")
	ok, err = j.Retry(ctx, id)
	require.NoError(t, err)
	assert.False(t, ok, "a completed run is not restored")
}

// TestJobsPanicAndTimeoutAreFailures: a panicking handler fails its
// attempt (the worker goes on); a handler past its timeout has its context
// cancelled and the attempt fails.
func TestJobsPanicAndTimeoutAreFailures(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "node")
	startWorker(t, j, jobs.WorkerConfig{PollMin: 10 * time.Millisecond, Handlers: map[string]jobs.JobHandler{
		"panics": {Handle: func(context.Context, *jobs.Run) error { panic("boom") }},
		"slow": {Handle: func(ctx context.Context, run *jobs.Run) error {
			<-ctx.Done()
			return context.Cause(ctx)
		}},
	}})
	r := newRun("panics")
	r.MaxAttempts = 1
	id, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info := waitState(t, j, id, jobs.RunDiscarded)
	assert.Contains(t, info.LastError, "panic: boom")

	r = newRun("slow")
	r.MaxAttempts, r.Timeout = 1, 100*time.Millisecond
	id, err = j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info = waitState(t, j, id, jobs.RunDiscarded)
	assert.Contains(t, info.LastError, context.DeadlineExceeded.Error())
}

// TestJobsRescueAndStaleClaim: a worker claims a run and dies; once its
// lease passes another node rescues the run and runs it as attempt 2; the
// dead worker's late completion (its old claim) changes nothing.
func TestJobsRescueAndStaleClaim(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := lockgendb.NewStore(tdb.Open(t))
	j := jobsOn(t, store, "node")
	id, err := j.Enqueue(ctx, nil, newRun("work"))
	require.NoError(t, err)
	claimed, err := store.RunsClaim(ctx, jobs.DefaultQueue, "dead-worker", 10, 300*time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	dead := driver.Claim{ID: claimed[0].ID, Claim: claimed[0].Claim}

	var ran atomic.Int32
	startWorker(t, jobsNode(t, tdb.Open(t), "live"), jobs.WorkerConfig{Lease: 2 * time.Second, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"work": {Handle: func(ctx context.Context, run *jobs.Run) error {
			assert.Equal(t, 2, run.Attempt)
			ran.Add(1)
			return nil
		}}}})
	info := waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt)
	assert.Equal(t, "live", info.Worker)
	assert.Contains(t, info.LastError, "rescued: worker dead-worker")
	assert.Equal(t, int32(1), ran.Load())

	done, err := store.RunsComplete(ctx, []driver.Claim{dead})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{}, done, "a stale claim completes nothing")
	ok, err := store.RunFail(ctx, dead, "late failure", time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "a stale claim cannot fail the run either")
	info = waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt)
}

// TestJobsCancelUniqueAndTxEnqueue: Cancel before the run starts; a unique
// key returns the active run's ID and frees when it finishes; an enqueue in
// a rolled back transaction leaves no run.
func TestJobsCancelUniqueAndTxEnqueue(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	j := jobsNode(t, db, "node")

	later := newRun("later")
	later.Delay = time.Hour
	id, err := j.Enqueue(ctx, nil, later)
	require.NoError(t, err)
	ok, err := j.Cancel(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, jobs.RunCancelled, waitState(t, j, id, jobs.RunCancelled).State)
	ok, err = j.Cancel(ctx, id)
	require.NoError(t, err)
	assert.False(t, ok, "a cancelled run is not cancelled again")

	u := newRun("unique")
	u.Delay, u.UniqueKey = time.Hour, "order-7"
	first, err := j.Enqueue(ctx, nil, u)
	require.NoError(t, err)
	again, err := j.Enqueue(ctx, nil, u)
	require.NoError(t, err)
	assert.Equal(t, first, again, "the active run's ID")
	ok, err = j.Cancel(ctx, first)
	require.NoError(t, err)
	require.True(t, ok)
	fresh, err := j.Enqueue(ctx, nil, u)
	require.NoError(t, err)
	assert.NotEqual(t, first, fresh, "a finished run frees its unique key")
	ok, err = j.Retry(ctx, first)
	require.ErrorIs(t, err, jobs.ErrUniqueKeyTaken, "restoring would repeat the active run's key")
	assert.False(t, ok)

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	rolledBack, err := j.Enqueue(ctx, tx, newRun("tx"))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	_, err = j.Get(ctx, rolledBack)
	require.ErrorIs(t, err, jobs.ErrRunNotFound)

	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	committed, err := j.Enqueue(ctx, tx, newRun("tx"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	_, err = j.Get(ctx, committed)
	require.NoError(t, err)

	fine := newRun("fine")
	for name, bad := range map[string]func(r *jobs.NewRun){
		"no attempts":         func(r *jobs.NewRun) { r.MaxAttempts = 0 },
		"no timeout":          func(r *jobs.NewRun) { r.Timeout = 0 },
		"no job":              func(r *jobs.NewRun) { r.Job = "" },
		"negative delay":      func(r *jobs.NewRun) { r.Delay = -time.Second },
		"priority too high":   func(r *jobs.NewRun) { r.Priority = jobs.MaxPriority + 1 },
		"unique key too long": func(r *jobs.NewRun) { r.UniqueKey = strings.Repeat("k", jobs.MaxUniqueKey+1) },
		"tick and unique key": func(r *jobs.NewRun) { r.ScheduledAt, r.UniqueKey = time.Now(), "k" },
		"attempts past int32": func(r *jobs.NewRun) { r.MaxAttempts = math.MaxInt32 + 1 },
		"unique key not utf8": func(r *jobs.NewRun) { r.UniqueKey = "k\xff" },
		"queue not utf8":      func(r *jobs.NewRun) { r.Queue = "q\xfe" },
	} {
		r := fine
		bad(&r)
		_, err = j.Enqueue(ctx, nil, r)
		require.ErrorIs(t, err, runtime.ErrInvalid, name)
	}
	longest := fine
	longest.UniqueKey = strings.Repeat("k", jobs.MaxUniqueKey)
	_, err = j.Enqueue(ctx, nil, longest)
	require.NoError(t, err, "the longest unique key fits the column")
}

// TestJobsPriorityOrder: with one handler at a time, due runs go highest
// priority first, then oldest.
func TestJobsPriorityOrder(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "node")
	for _, p := range []int{0, 10, -5, 100, 10} {
		r := newRun("ordered")
		r.Priority = p
		r.Args = []byte(fmt.Sprintf(`{"p": %d}`, p))
		_, err := j.Enqueue(ctx, nil, r)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var order []string
	startWorker(t, j, jobs.WorkerConfig{Concurrency: 1, Handlers: map[string]jobs.JobHandler{"ordered": {Handle: func(ctx context.Context, run *jobs.Run) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, fmt.Sprintf("%d:%d", run.Priority, run.ID))
		return nil
	}}}})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 5 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"100:4", "10:2", "10:5", "0:1", "-5:3"}, order)
}

// failingCompletes fails every RunsComplete while on.
type failingCompletes struct {
	lockgendb.Store
	on     atomic.Bool
	failed atomic.Int32
}

var errDBDown = errors.New("test: database unavailable")

func (s *failingCompletes) RunsComplete(ctx context.Context, claims []driver.Claim) (driver.Completion, error) {
	if s.on.Load() {
		s.failed.Add(1)
		return driver.Completion{}, errDBDown
	}
	return s.Store.RunsComplete(ctx, claims)
}

// rejectingFails is a store whose server rejects recording failures while
// on (as a strict server rejects a value it cannot store).
type rejectingFails struct {
	lockgendb.Store
	on atomic.Bool
}

func (s *rejectingFails) RunFail(ctx context.Context, c driver.Claim, errText string, backoff time.Duration) (bool, error) {
	if s.on.Load() {
		return false, &mysql.MySQLError{Number: 1366, Message: "test: Incorrect string value"}
	}
	return s.Store.RunFail(ctx, c, errText, backoff)
}

// stopWithin stops a worker, failing the test if that takes longer than d.
func stopWithin(t *testing.T, stop func(), d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("the worker did not stop within %v", d)
	}
}

// TestJobsCompletionErrorLeavesRunRetryable: when a worker stops while the
// database fails to record a completion, the run is not lost: it stays
// claimed until its lease passes, is rescued and runs again on another
// node.
func TestJobsCompletionErrorLeavesRunRetryable(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := &failingCompletes{Store: lockgendb.NewStore(tdb.Open(t))}
	store.on.Store(true)
	a, b := jobsOn(t, store, "a"), jobsNode(t, tdb.Open(t), "b")
	cfg := jobs.WorkerConfig{Lease: 600 * time.Millisecond, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond}
	var ranOnA, ranOnB atomic.Int32
	cfg.Handlers = map[string]jobs.JobHandler{"work": {Handle: func(ctx context.Context, run *jobs.Run) error {
		ranOnA.Add(1)
		return nil
	}}}
	stopA := startWorker(t, a, cfg)
	id, err := a.Enqueue(ctx, nil, newRun("work"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ranOnA.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	stopWithin(t, stopA, 30*time.Second) // gives up recording after a few rounds

	cfg.Handlers = map[string]jobs.JobHandler{"work": {Handle: func(ctx context.Context, run *jobs.Run) error {
		ranOnB.Add(1)
		return nil
	}}}
	startWorker(t, b, cfg)
	info := waitState(t, b, id, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt, "run again after the rescue")
	assert.Equal(t, int32(1), ranOnA.Load())
	assert.Equal(t, int32(1), ranOnB.Load())
}

// TestJobsOutcomesWaitForTheDatabase: while completions cannot be
// recorded, the worker keeps the finished runs and the running ones
// claimed (heartbeats go on; the recorder never blocks the worker loop),
// claims no more than it can record, and records every outcome once the
// database is back: each run ran once, as attempt 1, although the outage
// lasted several leases and rescue ran all along.
func TestJobsOutcomesWaitForTheDatabase(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := &failingCompletes{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "node")
	log := newRunLog()
	handler := func(d time.Duration) jobs.JobHandler {
		return jobs.JobHandler{Handle: func(ctx context.Context, run *jobs.Run) error {
			log.enter(run.ID)
			defer log.exit(run.ID)
			time.Sleep(d)
			return nil
		}}
	}
	store.on.Store(true)
	startWorker(t, j, jobs.WorkerConfig{
		Concurrency: 10, CompleteBatch: 2, CompleteEvery: 5 * time.Millisecond,
		Lease: time.Second, RescueEvery: 100 * time.Millisecond, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"long": handler(3 * time.Second), "short": handler(0)},
	})
	var ids []int64
	for i := 0; i < 30; i++ {
		job := "short"
		if i == 0 {
			job = "long"
		}
		id, err := j.Enqueue(ctx, nil, newRun(job))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	time.Sleep(3500 * time.Millisecond) // 3.5 leases without completions
	assert.LessOrEqual(t, store.failed.Load(), int32(100), "the recorder backs off while the database fails")
	var running int
	require.NoError(t, tdb.Open(t).QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE state = 'running'").Scan(&running))
	assert.LessOrEqual(t, running, 20, "no more runs claimed than can run (10) and wait to be recorded (10)")
	store.on.Store(false)
	for _, id := range ids {
		info := waitState(t, j, id, jobs.RunCompleted)
		assert.Equal(t, 1, info.Attempt, "run %d was never rescued", id)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, id := range ids {
		assert.Equal(t, 1, log.ran[id], "run %d ran once", id)
	}
}

// TestJobsEnqueueMany: a batch larger than one statement inserts every
// run (skipping a repeated unique key), in a transaction only on commit,
// and validates every run before inserting any.
func TestJobsEnqueueMany(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	j := jobsNode(t, db, "node")
	count := func(job string) int {
		var n int
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = ?", job).Scan(&n))
		return n
	}
	var runs []jobs.NewRun
	for i := 0; i < jobs.MaxEnqueueBatch+7; i++ {
		r := newRun("many")
		r.Priority, r.Delay, r.Args = i%3, time.Hour, []byte(fmt.Sprintf(`{"i": %d}`, i))
		runs = append(runs, r)
	}
	dup := newRun("many")
	dup.UniqueKey, dup.Delay = "once", time.Hour
	runs = append(runs, dup, dup)
	require.NoError(t, j.EnqueueMany(ctx, nil, runs))
	assert.Equal(t, jobs.MaxEnqueueBatch+8, count("many"), "every run once, the repeated unique key once")

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, j.EnqueueMany(ctx, tx, []jobs.NewRun{newRun("many_tx"), newRun("many_tx")}))
	require.NoError(t, tx.Rollback())
	assert.Zero(t, count("many_tx"), "rolled back")

	bad := []jobs.NewRun{newRun("many_bad"), {Job: "many_bad", MaxAttempts: 1}}
	require.ErrorIs(t, j.EnqueueMany(ctx, nil, bad), runtime.ErrInvalid)
	assert.Zero(t, count("many_bad"), "nothing inserted when one run is invalid")

	var args string
	var priority int
	require.NoError(t, db.QueryRow("SELECT args, priority FROM lockgen_runs WHERE job = 'many' AND args = '{\"i\": 4}'").Scan(&args, &priority))
	assert.Equal(t, 1, priority)
}

// TestJobsPrune: finished runs of a job older than the retention are
// deleted in bounded statements; unfinished runs and other jobs stay.
func TestJobsPrune(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	j := jobsNode(t, db, "node")
	enqueue := func(job string, cancel bool) {
		r := newRun(job)
		r.Delay = time.Hour
		id, err := j.Enqueue(ctx, nil, r)
		require.NoError(t, err)
		if cancel {
			ok, err := j.Cancel(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	for i := 0; i < 3; i++ {
		enqueue("old", true)
	}
	enqueue("old", false)
	enqueue("other", true)
	time.Sleep(20 * time.Millisecond)
	n, err := j.Prune(ctx, "old", time.Hour, 2)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing finished an hour ago")
	n, err = j.Prune(ctx, "old", 10*time.Millisecond, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	var left int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs").Scan(&left))
	assert.Equal(t, 2, left, "the unfinished run and the other job's run stay")
	_, err = j.Prune(ctx, "old", time.Hour, 0)
	require.ErrorIs(t, err, runtime.ErrInvalid)

	// The newest tick of a scheduled job anchors catch-up: never pruned.
	for _, tick := range []time.Time{time.Now().Add(-2 * time.Minute).Truncate(time.Second), time.Now().Add(-time.Minute).Truncate(time.Second)} {
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "ticking", ScheduledAt: tick, MaxAttempts: 1, Timeout: time.Second, Delay: time.Hour})
		require.NoError(t, err)
		ok, err := j.Cancel(ctx, id)
		require.NoError(t, err)
		require.True(t, ok)
	}
	time.Sleep(20 * time.Millisecond)
	n, err = j.Prune(ctx, "ticking", 10*time.Millisecond, 10)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "only the older tick")
	var newest time.Time
	require.NoError(t, db.QueryRow("SELECT scheduled_at FROM lockgen_runs WHERE job = 'ticking'").Scan(&newest))
	assert.WithinDuration(t, time.Now().Add(-time.Minute), newest, 2*time.Second)
}

// TestJobsHeartbeatKeepsLongRunsClaimed: a run that lasts several leases is
// not rescued while its worker heartbeats, although another node rescues
// eagerly; and a delayed run never starts before its delay.
func TestJobsHeartbeatKeepsLongRunsClaimed(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "slow-node")
	var runs atomic.Int32
	started := make(chan time.Time, 1)
	startWorker(t, j, jobs.WorkerConfig{Lease: 300 * time.Millisecond, PollMin: 10 * time.Millisecond, RescueEvery: -1,
		Handlers: map[string]jobs.JobHandler{"long": {Handle: func(ctx context.Context, run *jobs.Run) error {
			runs.Add(1)
			select {
			case started <- time.Now():
			default: // a second run: the assertions below fail
			}
			time.Sleep(1200 * time.Millisecond) // four leases
			return nil
		}}}})
	// Another node that only rescues, every 50ms.
	startWorker(t, jobsNode(t, tdb.Open(t), "rescuer"), jobs.WorkerConfig{Queue: "elsewhere", RescueEvery: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"none": {Handle: func(context.Context, *jobs.Run) error { return nil }}}})
	r := newRun("long")
	r.Delay = 300 * time.Millisecond
	enqueued := time.Now()
	id, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, (<-started).Sub(enqueued), r.Delay, "not before its delay")
	info := waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, 1, info.Attempt, "never rescued")
	assert.Equal(t, int32(1), runs.Load())
	assert.Empty(t, info.LastError)
}

// TestJobsSingletonNeverOverlaps: runs of a singleton job worked by three
// nodes never run at once; runs claimed while another runs are given back
// without using up their attempts.
func TestJobsSingletonNeverOverlaps(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	var inside, overlaps, done atomic.Int32
	handler := jobs.JobHandler{Singleton: true, Handle: func(ctx context.Context, run *jobs.Run) error {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(30 * time.Millisecond)
		inside.Add(-1)
		done.Add(1)
		return nil
	}}
	var js []*jobs.Client
	for i := 0; i < 3; i++ {
		j := jobsNode(t, tdb.Open(t), fmt.Sprintf("node-%d", i))
		js = append(js, j)
		startWorker(t, j, jobs.WorkerConfig{Concurrency: 5, PollMin: 10 * time.Millisecond, Handlers: map[string]jobs.JobHandler{"solo": handler}})
	}
	var ids []int64
	for i := 0; i < 12; i++ {
		r := newRun("solo")
		r.MaxAttempts = 1
		id, err := js[i%3].Enqueue(ctx, nil, r)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		info := waitState(t, js[0], id, jobs.RunCompleted)
		assert.Equal(t, 1, info.Attempt, "given back runs keep their attempts")
	}
	assert.Zero(t, overlaps.Load(), "no two runs of the singleton at once")
	assert.Equal(t, int32(12), done.Load())

	// A handler error that happens to wrap ErrNotAcquired is a failure,
	// not a busy lock: the run is discarded with the error kept.
	stop := startWorker(t, js[0], jobs.WorkerConfig{Queue: "other", PollMin: 10 * time.Millisecond, Handlers: map[string]jobs.JobHandler{
		"solo_fails": {Singleton: true, Handle: func(ctx context.Context, run *jobs.Run) error {
			return fmt.Errorf("another lock was busy: %w", runtime.ErrNotAcquired)
		}}}})
	defer stop()
	r := newRun("solo_fails")
	r.Queue, r.MaxAttempts = "other", 1
	id, err := js[0].Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info := waitState(t, js[0], id, jobs.RunDiscarded)
	assert.Contains(t, info.LastError, "another lock was busy")
}

// TestJobsIdleWorkersBackOff: two workers of one node on an empty queue
// back off their polls; the claim gate's wake-ups (for workers that
// skipped a claim while the other claimed) do not keep them claiming.
func TestJobsIdleWorkersBackOff(t *testing.T) {
	tdb := testdb.New(t)
	stats := &jobStats{}
	store := statsStore{Store: lockgendb.NewStore(tdb.Open(t)), stats: stats}
	c, err := runtime.NewClient(store, runtime.WithOwner("node"))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	cfg := jobs.WorkerConfig{PollMin: 10 * time.Millisecond, PollMax: 200 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"noop": {Handle: func(context.Context, *jobs.Run) error { return nil }}}}
	startWorker(t, j, cfg)
	startWorker(t, j, cfg)
	time.Sleep(1500 * time.Millisecond)
	// Each worker: polls at 10, 20, 40, 80, 160 ms, then every ~200 ms
	// (with up to 25% jitter): about 12 claims in 1.5 s.
	assert.LessOrEqual(t, stats.claims.Load(), int64(40), "two idle workers claimed %d times in 1.5 s", stats.claims.Load())
	assert.Positive(t, stats.claims.Load())

	// A local enqueue still wakes them at once.
	id, err := j.Enqueue(context.Background(), nil, newRun("noop"))
	require.NoError(t, err)
	waitState(t, j, id, jobs.RunCompleted)
}

// TestJobsRejectedOutcomeFallsBackToRescue: an outcome the server keeps
// rejecting is given up after a few tries (it would otherwise be retried
// and heartbeated for ever): the run is rescued and run again. An error
// text that is not valid UTF-8 or is cut inside a character is stored as
// valid UTF-8.
func TestJobsRejectedOutcomeFallsBackToRescue(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := &rejectingFails{Store: lockgendb.NewStore(tdb.Open(t))}
	store.on.Store(true)
	j := jobsOn(t, store, "node")
	long := strings.Repeat("a", 59999) + "€ and \xff"
	startWorker(t, j, jobs.WorkerConfig{Lease: 600 * time.Millisecond, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{
			"flaky": {Handle: func(ctx context.Context, run *jobs.Run) error {
				if run.Attempt == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			}},
			"long_error": {Handle: func(ctx context.Context, run *jobs.Run) error { return errors.New(long) }},
		}})
	id, err := j.Enqueue(ctx, nil, newRun("flaky"))
	require.NoError(t, err)
	info := waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt, "rescued after its failure could not be recorded")

	store.on.Store(false)
	r := newRun("long_error")
	r.MaxAttempts = 1
	id, err = j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info = waitState(t, j, id, jobs.RunDiscarded)
	assert.True(t, utf8.ValidString(info.LastError))
	assert.Equal(t, strings.Repeat("a", 59999), info.LastError, "cut before the character that did not fit")
}

// TestJobsWorkerStopsDespiteAStuckHandler: a handler that ignores its
// cancelled context does not keep Run from returning: one lease after the
// shutdown grace the worker stops without it, and its run is rescued and
// run again elsewhere.
func TestJobsWorkerStopsDespiteAStuckHandler(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	a, b := jobsNode(t, tdb.Open(t), "a"), jobsNode(t, tdb.Open(t), "b")
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1)
	cfg := jobs.WorkerConfig{Lease: 500 * time.Millisecond, ShutdownGrace: 100 * time.Millisecond, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond}
	cfg.Handlers = map[string]jobs.JobHandler{"stuck": {Handle: func(context.Context, *jobs.Run) error {
		started <- struct{}{}
		<-release // ignores its context
		return nil
	}}}
	stopA := startWorker(t, a, cfg)
	id, err := a.Enqueue(ctx, nil, newRun("stuck"))
	require.NoError(t, err)
	<-started
	stopWithin(t, stopA, 5*time.Second)

	cfg.Handlers = map[string]jobs.JobHandler{"stuck": {Handle: func(context.Context, *jobs.Run) error { return nil }}}
	startWorker(t, b, cfg)
	info := waitState(t, b, id, jobs.RunCompleted)
	assert.Equal(t, 2, info.Attempt)
}

// TestJobsWorkerStopsDespiteAStuckRescuedHandler: a handler stuck past its
// timeout whose run was rescued and run again on the same worker is still
// waited for at shutdown only up to the grace and one lease.
func TestJobsWorkerStopsDespiteAStuckRescuedHandler(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "node")
	release := make(chan struct{})
	defer close(release)
	stop := startWorker(t, j, jobs.WorkerConfig{Lease: 300 * time.Millisecond, ShutdownGrace: 100 * time.Millisecond, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"stuck_once": {Handle: func(ctx context.Context, run *jobs.Run) error {
			if run.Attempt == 1 {
				<-release // ignores its context
			}
			return nil
		}}}})
	r := newRun("stuck_once")
	r.Timeout = 100 * time.Millisecond
	id, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info := waitState(t, j, id, jobs.RunCompleted)
	require.Equal(t, 2, info.Attempt, "rescued from the stuck attempt")
	stopWithin(t, stop, 5*time.Second)
}

// TestJobsStuckHandlerKeepsItsSlot: a handler stuck past its timeout
// (ignoring its context) still takes one of the worker's slots after its
// run is rescued and claimed again, so the worker never runs more handlers
// than its Concurrency.
func TestJobsStuckHandlerKeepsItsSlot(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "a")
	release := make(chan struct{})
	var inside, most atomic.Int32
	started := make(chan int, 4)
	enter := func() func() {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return func() { inside.Add(-1) }
	}
	stop := startWorker(t, j, jobs.WorkerConfig{Concurrency: 2, Lease: 300 * time.Millisecond, RescueEvery: 50 * time.Millisecond,
		PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond, ShutdownGrace: 100 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{
			"stuck": {Handle: func(ctx context.Context, run *jobs.Run) error {
				defer enter()()
				started <- run.Attempt
				<-release // ignores its context, attempt after attempt
				return nil
			}},
			"quick": {Handle: func(ctx context.Context, run *jobs.Run) error {
				defer enter()()
				return nil
			}},
		}})
	r := newRun("stuck")
	r.Timeout = 100 * time.Millisecond
	_, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	require.Equal(t, 1, <-started)
	require.Equal(t, 2, <-started, "rescued and claimed again beside the stuck attempt 1")
	quick, err := j.Enqueue(ctx, nil, newRun("quick"))
	require.NoError(t, err)
	time.Sleep(700 * time.Millisecond)
	assert.Equal(t, int32(2), most.Load(), "never more handlers than Concurrency")
	info, err := j.Get(ctx, quick)
	require.NoError(t, err)
	assert.Equal(t, jobs.RunAvailable, info.State, "no slot for it while both stuck handlers run")
	close(release)
	waitState(t, j, quick, jobs.RunCompleted)
	stopWithin(t, stop, 5*time.Second)
}

// TestJobsRescueKeepsALastAttemptThatMayStillFinish: a run on its last
// attempt whose worker stopped heartbeating (cut off, not dead) is not
// discarded while that attempt may still finish within its timeout, so the
// worker's late success is recorded instead of dropped; once the timeout
// has passed too it is orphaned (see orphan_test.go). Earlier attempts are
// rescued at the deadline as before.
func TestJobsRescueKeepsALastAttemptThatMayStillFinish(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := lockgendb.NewStore(tdb.Open(t))
	j := jobsOn(t, store, "node")
	claim := func(r jobs.NewRun) driver.Claim {
		t.Helper()
		_, err := j.Enqueue(ctx, nil, r)
		require.NoError(t, err)
		claimed, err := store.RunsClaim(ctx, jobs.DefaultQueue, "cut-off", 10, 200*time.Millisecond, nil)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		return driver.Claim{ID: claimed[0].ID, Claim: claimed[0].Claim}
	}

	last := newRun("last")
	last.MaxAttempts, last.Timeout = 1, 2*time.Second
	slow := claim(last)
	time.Sleep(300 * time.Millisecond) // past the deadline, within the timeout
	n, err := store.RunsRescue(ctx, 100)
	require.NoError(t, err)
	assert.Zero(t, n, "the last attempt may still finish")
	done, err := store.RunsComplete(ctx, []driver.Claim{slow})
	require.NoError(t, err)
	assert.Equal(t, driver.Completion{Completed: 1}, done, "the late success is recorded")
	assert.Equal(t, jobs.RunCompleted, waitState(t, j, slow.ID, jobs.RunCompleted).State)

	over := newRun("over")
	over.MaxAttempts, over.Timeout = 1, 100*time.Millisecond
	stuck := claim(over)
	time.Sleep(400 * time.Millisecond) // past the deadline and the timeout
	n, err = store.RunsRescue(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	info := waitState(t, j, stuck.ID, jobs.RunOrphaned)
	assert.Contains(t, info.LastError, "orphaned: worker cut-off")

	early := newRun("early")
	early.MaxAttempts, early.Timeout = 2, time.Hour
	first := claim(early)
	time.Sleep(300 * time.Millisecond)
	n, err = store.RunsRescue(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "an earlier attempt is rescued at its deadline")
	assert.Equal(t, jobs.RunAvailable, waitState(t, j, first.ID, jobs.RunAvailable).State)
}
