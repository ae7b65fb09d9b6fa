package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// pausePoll is the idle poll of the pause tests' workers: a pause or a
// resume by another node must be honoured within pausePoll.PollMax.
var pausePoll = jobs.WorkerConfig{PollMin: 20 * time.Millisecond, PollMax: time.Second}

// startedLog records which runs a handler started, and on which node.
type startedLog struct {
	mu  sync.Mutex
	ids map[int64]string
}

func (l *startedLog) add(id int64, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil {
		l.ids = map[int64]string{}
	}
	l.ids[id] = node
}

func (l *startedLog) count(ids []int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := l.ids[id]; ok {
			n++
		}
	}
	return n
}

// TestQueuePauseStopsClaimsOnEveryNodeAndRunningRunsFinish: two nodes
// (separate pools) work a queue; an operator (a third Client, on a pool of
// its own, with no workers) pauses it while a run is running. That run
// finishes and completes; runs enqueued one idle poll (PollMax) after the
// pause are claimed by neither node for three more polls; once the
// operator resumes the queue, both nodes claim again, and every run starts
// within one idle poll (plus slack for a loaded machine).
func TestQueuePauseStopsClaimsOnEveryNodeAndRunningRunsFinish(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	operator := jobsNode(t, tdb.Open(t), "operator")
	started := &startedLog{}
	release := make(chan struct{})
	slowStarted := make(chan int64, 1)
	for _, node := range []string{"node-a", "node-b"} {
		j := jobsNode(t, tdb.Open(t), node)
		cfg := pausePoll
		cfg.Handlers = map[string]jobs.JobHandler{
			"slow": {Handle: func(ctx context.Context, run *jobs.Run) error {
				slowStarted <- run.ID
				<-release
				return nil
			}},
			"noop": {Handle: func(ctx context.Context, run *jobs.Run) error {
				started.add(run.ID, node)
				return nil
			}},
		}
		startWorker(t, j, cfg)
	}

	slow, err := operator.Enqueue(ctx, nil, newRun("slow"))
	require.NoError(t, err)
	select {
	case id := <-slowStarted:
		require.Equal(t, slow, id)
	case <-time.After(10 * time.Second):
		t.Fatal("the slow run never started")
	}

	require.NoError(t, operator.PauseQueue(ctx, jobs.DefaultQueue))
	time.Sleep(pausePoll.PollMax + 100*time.Millisecond)
	var ids []int64
	for range 20 {
		id, err := operator.Enqueue(ctx, nil, newRun("noop"))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	close(release) // the running run finishes while the queue is paused
	waitState(t, operator, slow, jobs.RunCompleted)
	time.Sleep(3 * pausePoll.PollMax)
	assert.Zero(t, started.count(ids), "no node claims a paused queue's runs once one idle poll has passed")
	for _, id := range ids {
		info, err := operator.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, jobs.RunAvailable, info.State, "run %d stays due", id)
	}
	queues, err := operator.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, queues, 1)
	assert.True(t, queues[0].Paused)

	resumed := time.Now()
	require.NoError(t, operator.ResumeQueue(ctx, jobs.DefaultQueue))
	require.Eventually(t, func() bool { return started.count(ids) == len(ids) }, 10*time.Second, 10*time.Millisecond)
	took := time.Since(resumed)
	t.Logf("every run started %v after the resume", took)
	assert.Less(t, took, pausePoll.PollMax+time.Second, "resumed within one idle poll (plus slack)")
	for _, id := range ids {
		waitState(t, operator, id, jobs.RunCompleted)
	}
}

// TestQueuePauseByTheNodeItselfStopsItsClaimsAtOnce: a node's own pause
// stops its claims without waiting for a poll (its view is marked stale),
// and its own resume wakes its workers.
func TestQueuePauseByTheNodeItselfStopsItsClaimsAtOnce(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "node")
	started := &startedLog{}
	cfg := pausePoll
	cfg.PollMax = 10 * time.Second // only the local pause and resume can be seen in time
	cfg.Handlers = map[string]jobs.JobHandler{"noop": {Handle: func(ctx context.Context, run *jobs.Run) error {
		started.add(run.ID, "node")
		return nil
	}}}
	startWorker(t, j, cfg)
	first, err := j.Enqueue(ctx, nil, newRun("noop"))
	require.NoError(t, err)
	waitState(t, j, first, jobs.RunCompleted) // the worker has read the queues: not paused

	require.NoError(t, j.PauseQueue(ctx, jobs.DefaultQueue))
	id, err := j.Enqueue(ctx, nil, newRun("noop")) // wakes the worker at once
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	assert.Zero(t, started.count([]int64{id}), "the node's own pause holds at once")

	resumed := time.Now()
	require.NoError(t, j.ResumeQueue(ctx, jobs.DefaultQueue))
	waitState(t, j, id, jobs.RunCompleted)
	assert.Less(t, time.Since(resumed), 3*time.Second, "the node's own resume wakes its workers, long before their 10 s poll")
}

// TestQueuePauseOutlivesWorkerRestarts: a pause is kept in the database:
// workers started after it, on new Clients (new processes), claim nothing
// of the queue, nor do they after being stopped and started again; a
// resume lets the next one work it. Another queue is not affected.
func TestQueuePauseOutlivesWorkerRestarts(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	operator := jobsNode(t, tdb.Open(t), "operator")
	require.NoError(t, operator.PauseQueue(ctx, "mail"))
	started := &startedLog{}
	worker := func(node, queue string) func() {
		cfg := pausePoll
		cfg.Queue = queue
		cfg.Handlers = map[string]jobs.JobHandler{"noop": {Handle: func(ctx context.Context, run *jobs.Run) error {
			started.add(run.ID, node)
			return nil
		}}}
		return startWorker(t, jobsNode(t, tdb.Open(t), node), cfg)
	}
	mail := newRun("noop")
	mail.Queue = "mail"
	id, err := operator.Enqueue(ctx, nil, mail)
	require.NoError(t, err)
	other, err := operator.Enqueue(ctx, nil, newRun("noop"))
	require.NoError(t, err)

	stop := worker("first", "mail")
	worker("default-worker", jobs.DefaultQueue)
	waitState(t, operator, other, jobs.RunCompleted) // the other queue runs
	time.Sleep(2 * pausePoll.PollMax)
	stop()
	assert.Zero(t, started.count([]int64{id}), "a worker started after the pause claims nothing")

	stop = worker("second", "mail")
	time.Sleep(2 * pausePoll.PollMax)
	assert.Zero(t, started.count([]int64{id}), "nor one started again")

	queues, err := operator.Queues(ctx)
	require.NoError(t, err)
	names := make([]string, len(queues))
	for i, q := range queues {
		names[i] = q.Name
	}
	assert.Equal(t, []string{"default", "mail"}, names, "the queues with runs or a pause")
	assert.False(t, queues[0].Paused)
	assert.True(t, queues[0].Since.IsZero(), "never paused")
	assert.True(t, queues[1].Paused)
	assert.WithinDuration(t, time.Now(), queues[1].Since, time.Minute)

	require.NoError(t, operator.ResumeQueue(ctx, "mail"))
	info := waitState(t, operator, id, jobs.RunCompleted)
	assert.Equal(t, "second", info.Worker)
	stop()
}

// pauseStats counts a node's pause reads and claims.
type pauseStats struct {
	lockgendb.Store
	reads, claims atomic.Int64
}

func (s *pauseStats) QueuesPaused(ctx context.Context) ([]string, error) {
	s.reads.Add(1)
	return s.Store.QueuesPaused(ctx)
}

func (s *pauseStats) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration, after *driver.RunCursor) ([]jobs.Run, error) {
	s.claims.Add(1)
	return s.Store.RunsClaim(ctx, queue, worker, limit, lease, after)
}

// TestQueuePauseAddsNoStatementPerClaim: under load, a node with three
// workers claiming in small batches reads the pause state about once per
// PollMax, not once per claim (nor per worker).
func TestQueuePauseAddsNoStatementPerClaim(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := &pauseStats{Store: lockgendb.NewStore(tdb.Open(t))}
	c, err := runtime.NewClient(store, runtime.WithOwner("node"))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	runs := make([]jobs.NewRun, 3000)
	for i := range runs {
		runs[i] = newRun("noop")
	}
	require.NoError(t, j.EnqueueMany(ctx, nil, runs))
	var done atomic.Int64
	cfg := jobs.WorkerConfig{PollMin: 20 * time.Millisecond, PollMax: 500 * time.Millisecond, Concurrency: 4, ClaimBatch: 2,
		Handlers: map[string]jobs.JobHandler{"noop": {Handle: func(context.Context, *jobs.Run) error { done.Add(1); return nil }}}}
	began := time.Now()
	for range 3 {
		startWorker(t, j, cfg)
	}
	require.Eventually(t, func() bool { return done.Load() == int64(len(runs)) }, time.Minute, 10*time.Millisecond)
	elapsed := time.Since(began)
	reads, claims := store.reads.Load(), store.claims.Load()
	t.Logf("%d runs in %v: %d claims, %d pause reads", len(runs), elapsed, claims, reads)
	assert.Greater(t, claims, int64(len(runs)/2/3), "small batches: many claims")
	assert.LessOrEqual(t, reads, int64(elapsed/cfg.PollMax)+3, "about one pause read per PollMax")
}

// TestQueuePauseRefusesBadNames: PauseQueue and ResumeQueue refuse with
// ErrInvalid, before any statement, a name that is empty, too long, not
// UTF-8 or ends in a space, and with WithQueues a queue no job uses; the
// declared queues are listed even before they have runs.
func TestQueuePauseRefusesBadNames(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := lockgendb.NewStore(tdb.Open(t))
	c, err := runtime.NewClient(store, runtime.WithOwner("node"))
	require.NoError(t, err)
	open, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	declared, err := jobs.NewClient(c, store, jobs.WithQueues("mail", "default"))
	require.NoError(t, err)
	_, err = jobs.NewClient(c, store, jobs.WithQueues("bad "))
	require.ErrorIs(t, err, runtime.ErrInvalid)

	for _, bad := range []string{"", strings.Repeat("q", jobs.MaxQueue+1), "a\xffb", "mail "} {
		for _, j := range []*jobs.Client{open, declared} {
			assert.ErrorIs(t, j.PauseQueue(ctx, bad), runtime.ErrInvalid, "%q", bad)
			assert.ErrorIs(t, j.ResumeQueue(ctx, bad), runtime.ErrInvalid, "%q", bad)
		}
	}
	err = declared.PauseQueue(ctx, "mial")
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.Contains(t, err.Error(), `no job uses queue "mial" (the queues are default, mail)`)
	require.ErrorIs(t, declared.ResumeQueue(ctx, "mial"), runtime.ErrInvalid)
	require.NoError(t, open.PauseQueue(ctx, "mial"), "without WithQueues any valid name is accepted")

	queues, err := declared.Queues(ctx)
	require.NoError(t, err)
	var names []string
	for _, q := range queues {
		names = append(names, q.Name)
		assert.Equal(t, q.Name == "mial", q.Paused)
	}
	assert.Equal(t, []string{"default", "mail", "mial"}, names)
	require.True(t, slices.IsSortedFunc(queues, func(a, b jobs.QueueInfo) int { return strings.Compare(a.Name, b.Name) }))

	// A database error is wrapped, not swallowed.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = open.PauseQueue(cctx, "default")
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// TestQueuesTableMissingOnAnOldDatabase: a database made by the migrations
// of before queue pauses (the lock and runs tables, no queues table) is
// refused by every job entry point, and a worker's Run fails at once,
// with ErrInvalid naming the queues table and the migration that creates
// it; once that migration is applied, the same Client works.
func TestQueuesTableMissingOnAnOldDatabase(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	tdb.Exec(t, "DROP TABLE lockgen_queues")
	j := jobsNode(t, tdb.Open(t), "old")
	migration := lockgendb.Store{}.Server().QueuesMigration
	require.Contains(t, migration, "0003_lockgen_queues.up.sql")
	check := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, runtime.ErrInvalid)
		assert.ErrorContains(t, err, "table lockgen_queues does not exist")
		assert.ErrorContains(t, err, "apply migration "+migration)
	}
	_, err := j.Enqueue(ctx, nil, newRun("x"))
	check(err)
	check(j.PauseQueue(ctx, jobs.DefaultQueue))
	w, err := j.NewWorker(jobs.WorkerConfig{Handlers: map[string]jobs.JobHandler{"x": {Handle: func(context.Context, *jobs.Run) error { return nil }}}})
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	check(w.Run(runCtx))
	assert.NoError(t, runCtx.Err(), "Run returned at once")

	tdb.ApplySchema(t)
	require.NoError(t, j.PauseQueue(ctx, jobs.DefaultQueue))
	queues, err := j.Queues(ctx)
	require.NoError(t, err)
	assert.Equal(t, []jobs.QueueInfo{{Name: jobs.DefaultQueue, Paused: true, Since: queues[0].Since}}, queues)
}

// TestHistoryColumnMissingOnAnOldDatabase: a database made by migrations
// 0001 to 0003 (no history column) is refused by the job entry points with
// ErrInvalid naming the column and migration 0004 that adds it; once the
// column is there, the same Client works.
func TestHistoryColumnMissingOnAnOldDatabase(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	tdb.Exec(t, "ALTER TABLE lockgen_runs DROP COLUMN history")
	j := jobsNode(t, tdb.Open(t), "old")
	migration := lockgendb.Store{}.Server().HistoryMigration
	require.Contains(t, migration, "0004_lockgen_runs_history.up.sql")
	_, err := j.Enqueue(ctx, nil, newRun("x"))
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorContains(t, err, "lacks column history, which migration "+migration+" adds")

	tdb.Exec(t, "ALTER TABLE lockgen_runs ADD COLUMN history JSON NULL")
	_, err = j.Enqueue(ctx, nil, newRun("x"))
	require.NoError(t, err)
}
