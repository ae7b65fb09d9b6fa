package ops_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/ops"
)

// deployment is what the tests' lockgen.yaml would declare.
var deployment = ops.Config{
	Locks: []ops.Lock{
		{Name: "master", Strategy: "lease", Leader: true},
		{Name: "orders", Strategy: "lease", Keyed: true},
		{Name: "rows", Strategy: "row", Keyed: true},
	},
	Jobs: []ops.Job{
		{Name: "test", Queue: "default"},
		{Name: "mail", Queue: "mail"},
		{Name: "tick", Queue: "default", Schedule: "@every 1m"},
	},
}

type fixture struct {
	tdb   *testdb.DB
	db    *sql.DB
	locks *runtime.Client
	jobs  *jobs.Client
	ops   *ops.Ops
}

func newFixture(t *testing.T, cfg ops.Config) *fixture {
	t.Helper()
	tdb := testdb.New(t)
	db := tdb.Open(t)
	store := lockgendb.NewStore(db)
	c, err := runtime.NewClient(store, runtime.WithOwner("node-a"))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	o, err := ops.New(tdb.Open(t), cfg)
	require.NoError(t, err)
	return &fixture{tdb: tdb, db: db, locks: c, jobs: j, ops: o}
}

func (f *fixture) lock(t *testing.T, cfg runtime.LockConfig) *runtime.Lock {
	t.Helper()
	l, err := f.locks.Lock(cfg)
	require.NoError(t, err)
	return l
}

func (f *fixture) enqueue(t *testing.T, r jobs.NewRun) int64 {
	t.Helper()
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 3
	}
	if r.Timeout == 0 {
		r.Timeout = time.Minute
	}
	if r.Args == nil {
		r.Args = []byte(`{"n":1}`)
	}
	id, err := f.jobs.Enqueue(context.Background(), nil, r)
	require.NoError(t, err)
	return id
}

// requireCode fails unless err is an *ops.Error with the code and field.
func requireCode(t *testing.T, err error, code ops.Code, field string) {
	t.Helper()
	var e *ops.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code, "%v", err)
	assert.Equal(t, field, e.Field, "%v", err)
	assert.NotEmpty(t, e.Message)
}

// TestStatusShowsLeadersLocksQueuesAndSchedules: the overview tells, by
// the database clock, who leads with which token and for how long, how
// many keys of each lock are held (a row-strategy holding, an uncommitted
// row, included), each queue's runs by state, and each schedule's next and
// newest tick.
func TestStatusShowsLeadersLocksQueuesAndSchedules(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	leader, err := f.lock(t, runtime.LockConfig{Name: "master", TTL: 30 * time.Second}).Try(ctx, "")
	require.NoError(t, err)
	defer func() { _ = leader.Release(ctx) }()
	orders := f.lock(t, runtime.LockConfig{Name: "orders", Keyed: true, TTL: 30 * time.Second})
	for _, key := range []string{"a", "b", "c"} {
		lease, err := orders.Try(ctx, key)
		require.NoError(t, err)
		if key == "c" {
			require.NoError(t, lease.Release(ctx))
			continue
		}
		defer func() { _ = lease.Release(ctx) }()
	}
	rowHeld, err := f.lock(t, runtime.LockConfig{Name: "rows", Keyed: true, Strategy: runtime.StrategyRow}).Try(ctx, "r1")
	require.NoError(t, err)
	defer func() { _ = rowHeld.Release(ctx) }()

	for i := 0; i < 3; i++ {
		f.enqueue(t, jobs.NewRun{Job: "test"})
	}
	f.enqueue(t, jobs.NewRun{Job: "test", Delay: time.Hour})
	f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	tick := time.Now().UTC().Truncate(time.Minute)
	tickRun := f.enqueue(t, jobs.NewRun{Job: "tick", ScheduledAt: tick})
	_, err = f.ops.PauseQueue(ctx, "mail")
	require.NoError(t, err)

	st, err := f.ops.Status(ctx)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), st.Time, 5*time.Second)
	require.Len(t, st.Leaders, 1)
	l := st.Leaders[0]
	assert.Equal(t, "master", l.Lock)
	assert.Equal(t, "node-a", l.Owner)
	assert.Equal(t, leader.Token(), l.Token)
	require.NotNil(t, l.TimeLeftMS)
	assert.Greater(t, *l.TimeLeftMS, int64(20_000))
	assert.LessOrEqual(t, *l.TimeLeftMS, int64(30_000))

	held := map[string]int64{}
	for _, s := range st.Locks {
		held[s.Name] = s.Held
		assert.True(t, s.Exact, s.Name)
	}
	assert.Equal(t, map[string]int64{"master": 1, "orders": 2, "rows": 1}, held)

	byName := map[string]ops.Queue{}
	for _, q := range st.Queues {
		byName[q.Name] = q
	}
	require.Len(t, byName, 2)
	assert.Equal(t, ops.Counts{Due: 4, Scheduled: 1, Exact: true}, byName["default"].Counts, "3 test runs and the tick due, one test run in an hour")
	assert.False(t, byName["default"].Paused)
	assert.Equal(t, ops.Counts{Due: 1, Exact: true}, byName["mail"].Counts)
	assert.True(t, byName["mail"].Paused)
	require.NotNil(t, byName["mail"].PausedAt)

	require.Len(t, st.Schedules, 1)
	s := st.Schedules[0]
	assert.Equal(t, "tick", s.Job)
	assert.True(t, s.Next.After(st.Time) && !s.Next.After(st.Time.Add(time.Minute)), "next tick %v after %v", s.Next, st.Time)
	require.NotNil(t, s.LastTick)
	assert.True(t, tick.Equal(*s.LastTick), "last tick %v, want %v", s.LastTick, tick)
	assert.Equal(t, "available", s.LastState)
	assert.Equal(t, tickRun, s.LastRun)
}

// TestStatusCountsStopAtTheCap: a count reads at most CountCap entries and
// says when it stopped there.
func TestStatusCountsStopAtTheCap(t *testing.T) {
	cfg := deployment
	cfg.CountCap = 2
	f := newFixture(t, cfg)
	for i := 0; i < 3; i++ {
		f.enqueue(t, jobs.NewRun{Job: "test"})
	}
	qs, err := f.ops.Queues(context.Background())
	require.NoError(t, err)
	require.Equal(t, "default", qs[0].Name)
	assert.Equal(t, ops.Counts{Due: 2, Exact: false}, qs[0].Counts)
}

// TestStatusOfALocksOnlyDeployment: a spec without jobs generates no runs
// or queues table; Status and Queues answer from the locks table alone
// (Status failed with 1146 on the missing queues table).
func TestStatusOfALocksOnlyDeployment(t *testing.T) {
	cfg := ops.Config{Locks: deployment.Locks}
	f := newFixture(t, cfg)
	ctx := context.Background()
	_, err := f.tdb.Admin(t).ExecContext(ctx, "DROP TABLE lockgen_queues, lockgen_runs")
	require.NoError(t, err)
	lease, err := f.lock(t, runtime.LockConfig{Name: "orders", Keyed: true, TTL: 30 * time.Second}).Try(ctx, "k")
	require.NoError(t, err)
	defer func() { _ = lease.Release(ctx) }()
	st, err := f.ops.Status(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Queues)
	var held int64 = -1
	for _, l := range st.Locks {
		if l.Name == "orders" {
			held = l.Held
		}
	}
	assert.Equal(t, int64(1), held)
	qs, err := f.ops.Queues(ctx)
	require.NoError(t, err)
	assert.Empty(t, qs)
}

// TestLocksPagesHeldRowsOnly: the held-locks list pages in (lock, key)
// order with an opaque cursor, skips free rows, filters by lock, and
// refuses a cursor it did not make.
func TestLocksPagesHeldRowsOnly(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	orders := f.lock(t, runtime.LockConfig{Name: "orders", Keyed: true, TTL: 30 * time.Second})
	var want []string
	for i := 0; i < 10; i++ {
		key := fmt.Sprintf("k%02d", i)
		lease, err := orders.Try(ctx, key)
		require.NoError(t, err)
		if i%3 == 0 {
			require.NoError(t, lease.Release(ctx)) // free rows between held ones
			continue
		}
		want = append(want, key)
		defer func() { _ = lease.Release(ctx) }()
	}
	leader, err := f.lock(t, runtime.LockConfig{Name: "master", TTL: 30 * time.Second}).Try(ctx, "")
	require.NoError(t, err)
	defer func() { _ = leader.Release(ctx) }()

	var got []string
	var pages int
	filter := ops.LocksFilter{Name: "orders", Limit: 4}
	for {
		page, err := f.ops.Locks(ctx, filter)
		require.NoError(t, err)
		pages++
		for _, h := range page.Items {
			assert.Equal(t, "orders", h.Lock)
			assert.Equal(t, "node-a", h.Owner)
			assert.Equal(t, "lease", h.Strategy)
			got = append(got, h.Key)
		}
		if page.Next == "" {
			break
		}
		filter.After = page.Next
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 2, pages, "6 held keys in pages of 4")

	all, err := f.ops.Locks(ctx, ops.LocksFilter{})
	require.NoError(t, err)
	require.Len(t, all.Items, 7)
	assert.Equal(t, "master", all.Items[0].Lock)
	assert.Equal(t, leader.Token(), all.Items[0].Token)

	_, err = f.ops.Locks(ctx, ops.LocksFilter{After: "not a cursor"})
	requireCode(t, err, ops.CodeInvalid, "after")
	_, err = f.ops.Locks(ctx, ops.LocksFilter{Limit: ops.MaxLimit + 1})
	requireCode(t, err, ops.CodeInvalid, "limit")
}

// TestEndedSessionHoldingsAreNotHeld: a session holding leaves its row's
// far-future mark when it ends; the locks page and the status counts show
// only the marked rows whose server-side lock is held.
func TestEndedSessionHoldingsAreNotHeld(t *testing.T) {
	cfg := deployment
	cfg.Locks = append(slices.Clone(deployment.Locks), ops.Lock{Name: "sessions", Strategy: "session", Keyed: true})
	f := newFixture(t, cfg)
	ctx := context.Background()
	sessions := f.lock(t, runtime.LockConfig{Name: "sessions", Strategy: runtime.StrategySession, Keyed: true, TTL: 30 * time.Second})
	// GET_LOCK names are server-wide: keys no other test uses.
	prefix := fmt.Sprintf("ended%d-", time.Now().UnixNano())
	var want []string
	for i := 0; i < 6; i++ {
		key := fmt.Sprintf("%s%d", prefix, i)
		lease, err := sessions.Try(ctx, key)
		require.NoError(t, err)
		if i%2 == 0 {
			require.NoError(t, lease.Release(ctx))
			continue
		}
		want = append(want, key)
		defer func() { _ = lease.Release(ctx) }()
	}
	var marked int
	require.NoError(t, f.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockgen_locks WHERE name = 'sessions' AND expires_at = '9999-12-31 23:59:59'").Scan(&marked))
	require.Equal(t, 6, marked, "every session holding, ended or not, marks its row")

	page, err := f.ops.Locks(ctx, ops.LocksFilter{Name: "sessions"})
	require.NoError(t, err)
	var got []string
	for _, h := range page.Items {
		assert.Equal(t, "session", h.Strategy)
		got = append(got, h.Key)
	}
	assert.Equal(t, want, got, "only the live session holdings")

	st, err := f.ops.Status(ctx)
	require.NoError(t, err)
	var held int64 = -1
	for _, l := range st.Locks {
		if l.Name == "sessions" {
			held = l.Held
		}
	}
	assert.Equal(t, int64(3), held)
}

// TestRunsPagesNewestFirstAndFilters: runs page newest first by ID, filter
// by job, queue and state, and every bad filter names its field.
func TestRunsPagesNewestFirstAndFilters(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	var ids []int64
	for i := 0; i < 7; i++ {
		job, queue := "test", ""
		if i%2 == 1 {
			job, queue = "mail", "mail"
		}
		ids = append(ids, f.enqueue(t, jobs.NewRun{Job: job, Queue: queue, Args: []byte(fmt.Sprintf(`{"n":%d}`, i))}))
	}
	var got []int64
	filter := ops.RunsFilter{Limit: 3}
	for {
		page, err := f.ops.Runs(ctx, filter)
		require.NoError(t, err)
		for _, r := range page.Items {
			got = append(got, r.ID)
			assert.Empty(t, r.Args, "a page carries no args")
		}
		if page.Next == "" {
			break
		}
		filter.After = page.Next
	}
	assert.Equal(t, []int64{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}, got)

	mail, err := f.ops.Runs(ctx, ops.RunsFilter{Job: "mail"})
	require.NoError(t, err)
	require.Len(t, mail.Items, 3)
	for _, r := range mail.Items {
		assert.Equal(t, "mail", r.Queue)
		assert.Equal(t, "available", r.State)
	}
	_, err = f.ops.CancelRun(ctx, ids[0])
	require.NoError(t, err)
	cancelled, err := f.ops.Runs(ctx, ops.RunsFilter{Queue: "default", State: "cancelled"})
	require.NoError(t, err)
	require.Len(t, cancelled.Items, 1)
	assert.Equal(t, ids[0], cancelled.Items[0].ID)

	for _, c := range []struct {
		filter ops.RunsFilter
		field  string
	}{
		{ops.RunsFilter{Job: "nope"}, "job"},
		{ops.RunsFilter{Queue: "nope"}, "queue"},
		{ops.RunsFilter{State: "done"}, "state"},
		{ops.RunsFilter{After: "12; DROP TABLE lockgen_runs"}, "after"},
		{ops.RunsFilter{After: "-4"}, "after"},
		{ops.RunsFilter{Limit: -1}, "limit"},
	} {
		_, err := f.ops.Runs(ctx, c.filter)
		requireCode(t, err, ops.CodeInvalid, c.field)
	}
}

// TestCancelRetryAndPauseChangeOneRowEach: an operator's changes take
// effect in the database, and a change the run's state does not allow is
// a conflict that changes nothing.
func TestCancelRetryAndPauseChangeOneRowEach(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	id := f.enqueue(t, jobs.NewRun{Job: "test", Args: []byte(`{"n":42}`)})
	r, err := f.ops.Run(ctx, id)
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":42}`, string(r.Args))
	assert.Equal(t, int64(60_000), r.TimeoutMS)
	body, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"args":{"n":42}`)

	_, err = f.ops.RetryRun(ctx, id)
	requireCode(t, err, ops.CodeConflict, "")
	r, err = f.ops.CancelRun(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", r.State)
	require.NotNil(t, r.FinishedAt)
	_, err = f.ops.CancelRun(ctx, id)
	requireCode(t, err, ops.CodeConflict, "")
	info, err := f.jobs.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, jobs.RunState("cancelled"), info.State)

	r, err = f.ops.RetryRun(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "available", r.State)
	assert.Nil(t, r.FinishedAt)
	info, err = f.jobs.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, jobs.RunState("available"), info.State)

	_, err = f.ops.Run(ctx, id+1000)
	requireCode(t, err, ops.CodeNotFound, "id")
	_, err = f.ops.CancelRun(ctx, id+1000)
	requireCode(t, err, ops.CodeNotFound, "id")
	_, err = f.ops.Run(ctx, 0)
	requireCode(t, err, ops.CodeInvalid, "id")

	q, err := f.ops.PauseQueue(ctx, "default")
	require.NoError(t, err)
	assert.True(t, q.Paused)
	seen, err := f.jobs.Queues(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, seen)
	assert.Equal(t, "default", seen[0].Name)
	assert.True(t, seen[0].Paused, "the runtime reads the pause the operator wrote")
	q, err = f.ops.ResumeQueue(ctx, "default")
	require.NoError(t, err)
	assert.False(t, q.Paused)
	assert.Nil(t, q.PausedAt)
	_, err = f.ops.PauseQueue(ctx, "defualt")
	requireCode(t, err, ops.CodeInvalid, "queue")
	_, err = f.ops.PauseQueue(ctx, "")
	requireCode(t, err, ops.CodeInvalid, "queue")
}

// TestNewRefusesABadPrefix: the prefix is pasted into SQL.
func TestNewRefusesABadPrefix(t *testing.T) {
	c, err := mysql.NewConnector(mysql.NewConfig()) // connects to nothing
	require.NoError(t, err)
	db := sql.OpenDB(c)
	defer db.Close()
	_, err = ops.New(db, ops.Config{TablePrefix: "x; DROP TABLE y; --"})
	requireCode(t, err, ops.CodeInvalid, "table_prefix")
	_, err = ops.Connector(c, "x; DROP TABLE y; --")
	requireCode(t, err, ops.CodeInvalid, "table_prefix")
	_, err = ops.New(db, ops.Config{Jobs: []ops.Job{{Name: "j", Schedule: "every day"}}})
	requireCode(t, err, ops.CodeInvalid, "jobs")
}

// TestCancelARunningRunReachesItsHandler: an operator's CancelRun on a run
// that a real worker is handling cancels the handler's context (cause
// jobs.ErrCancelled) within a heartbeat; the run ends cancelled although
// the handler returns nil, and RetryRun is a conflict until the attempt's
// deadline (the run's finished_at) has passed.
func TestCancelARunningRunReachesItsHandler(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	const lease = 3 * time.Second
	started, causes := make(chan struct{}, 1), make(chan error, 1)
	w, err := f.jobs.NewWorker(jobs.WorkerConfig{Lease: lease, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"test": {Handle: func(ctx context.Context, _ *jobs.Run) error {
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil
		}}}})
	require.NoError(t, err)
	runWorker(t, w)

	id := f.enqueue(t, jobs.NewRun{Job: "test"})
	<-started
	r, err := f.ops.CancelRun(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", r.State)
	require.NotNil(t, r.FinishedAt)
	select {
	case cause := <-causes:
		assert.ErrorIs(t, cause, jobs.ErrCancelled)
	case <-time.After(lease):
		t.Fatal("the handler was not told within a heartbeat")
	}
	_, err = f.ops.RetryRun(ctx, id)
	requireCode(t, err, ops.CodeConflict, "")
	info, err := f.jobs.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, jobs.RunState("cancelled"), info.State, "the handler's nil changed nothing")
	time.Sleep(time.Until(*r.FinishedAt) + 100*time.Millisecond)
	r, err = f.ops.RetryRun(ctx, id)
	require.NoError(t, err)
	// RetryRun reads the run back after its change: the worker, polling
	// every 50 ms at most, may have claimed it in between.
	assert.Contains(t, []string{"available", "running"}, r.State)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the retried run was not claimed again")
	}
}

// TestRunHistoryRecordsEveryChange: a run that fails once, then completes,
// then is retried by an operator, cancelled and retried again has every
// change in its history, written by the statements that made them, and
// its attempts read from it; a run snoozed 60 times keeps the newest 50
// entries, the last of them its completion.
func TestRunHistoryRecordsEveryChange(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	var calls, snoozes atomic.Int32
	w, err := f.jobs.NewWorker(jobs.WorkerConfig{Lease: 3 * time.Second, PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{
			"test": {BackoffInitial: time.Millisecond, BackoffMax: time.Millisecond, Handle: func(context.Context, *jobs.Run) error {
				if calls.Add(1) == 1 {
					return errors.New("smtp: connection refused")
				}
				return nil
			}},
			"nap": {Handle: func(context.Context, *jobs.Run) error {
				if snoozes.Add(1) <= 60 {
					return jobs.Snooze(0)
				}
				return nil
			}},
		}})
	require.NoError(t, err)
	stop := runWorker(t, w)

	id := f.enqueue(t, jobs.NewRun{Job: "test"})
	waitRun := func(id int64, state string) *ops.Run {
		t.Helper()
		var r *ops.Run
		require.Eventually(t, func() bool {
			r, err = f.ops.Run(ctx, id)
			require.NoError(t, err)
			return r.State == state
		}, 20*time.Second, 10*time.Millisecond)
		return r
	}
	r := waitRun(id, "completed")
	events := func(r *ops.Run) (out []string) {
		for _, e := range r.History {
			out = append(out, fmt.Sprintf("%s %d", e.Event, e.Attempt))
		}
		return out
	}
	assert.Equal(t, []string{"started 1", "failed 1", "started 2", "completed 2"}, events(r))
	assert.Equal(t, "smtp: connection refused", r.History[1].Error)
	assert.Contains(t, r.History[0].Worker, "node-a", "the worker's owner")
	for i := 1; i < len(r.History); i++ {
		assert.False(t, r.History[i].At.Before(r.History[i-1].At), "in time order by the database clock")
	}
	require.Len(t, r.Attempts, 2)
	assert.Equal(t, "failed", r.Attempts[0].Outcome)
	assert.Equal(t, "smtp: connection refused", r.Attempts[0].Error)
	assert.Equal(t, "completed", r.Attempts[1].Outcome)
	require.NotNil(t, r.Attempts[1].FinishedAt)

	stop() // no worker: the operator's changes stay
	_, err = f.db.ExecContext(ctx, "UPDATE lockgen_runs SET state = 'discarded' WHERE id = ?", id)
	require.NoError(t, err)
	_, err = f.ops.RetryRun(ctx, id)
	require.NoError(t, err)
	_, err = f.ops.CancelRun(ctx, id)
	require.NoError(t, err)
	r, err = f.ops.RetryRun(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"started 1", "failed 1", "started 2", "completed 2", "retried 2", "cancelled 0", "retried 0"}, events(r))

	nap := f.enqueue(t, jobs.NewRun{Job: "nap", MaxAttempts: 1})
	runWorker(t, w)
	r = waitRun(nap, "completed")
	require.Len(t, r.History, 50, "the newest 50 entries are kept")
	assert.Equal(t, "completed 1", events(r)[49])
	assert.Equal(t, "started 1", events(r)[48])
	assert.Equal(t, "snoozed 1", events(r)[47], "a snooze uses no attempt")
}

// runWorker runs w until the test ends or stop is called; stop waits for
// it and fails the test if Run returned an error.
func runWorker(t *testing.T, w *jobs.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
	t.Cleanup(stop)
	return stop
}

// TestLocksShowWhatWaits: a row lock's waiter (a row lock wait) is counted
// on both servers; a session lock's and a server-waiting lease's waiters
// (GET_LOCK) where performance_schema lists them (MySQL's default), and
// otherwise the page says why not (MariaDB's default); a polling lease's
// waiters are never counted and the page says so. A holding nobody waits
// for counts 0.
func TestLocksShowWhatWaits(t *testing.T) {
	cfg := deployment
	cfg.Locks = append(slices.Clone(deployment.Locks),
		ops.Lock{Name: "sessions", Strategy: "session", Keyed: true},
		ops.Lock{Name: "woken", Strategy: "lease", Keyed: true, WaitOnServer: true})
	f := newFixture(t, cfg)
	ctx := context.Background()
	// GET_LOCK names are server-wide: keys no other test uses, with the
	// characters InnoDB's LOCK_DATA escapes.
	key := fmt.Sprintf(`w%d it's, "x" é\`, time.Now().UnixNano())
	configs := map[string]runtime.LockConfig{
		"rows":     {Name: "rows", Strategy: runtime.StrategyRow, Keyed: true, IdleTimeout: 5 * time.Minute},
		"sessions": {Name: "sessions", Strategy: runtime.StrategySession, Keyed: true, TTL: 30 * time.Second},
		"woken":    {Name: "woken", Keyed: true, TTL: 30 * time.Second, WaitOnServer: true},
		"orders":   {Name: "orders", Keyed: true, TTL: 30 * time.Second},
	}
	// One waiter for each, in another client with its own pool (opened
	// first: closed after the waiters ended).
	other, err := runtime.NewClient(lockgendb.NewStore(f.tdb.Open(t)), runtime.WithOwner("node-b"))
	require.NoError(t, err)
	// The waiters end before it: the holders' releases (cleanups run last
	// registered first) let each waiter acquire and return, so that no
	// statement is left waiting on the server for a client that is gone.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ended := make(chan struct{})
		go func() { wg.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Error("a waiter did not get its lock after the holders released")
		}
		stop()
		wg.Wait()
	})
	for _, c := range configs {
		lease, err := f.lock(t, c).Try(ctx, key)
		require.NoError(t, err, c.Name)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
	}
	idle, err := f.lock(t, configs["rows"]).Try(ctx, key+"-idle")
	require.NoError(t, err)
	t.Cleanup(func() { _ = idle.Release(context.Background()) })

	for _, c := range configs {
		c.Wait = time.Minute
		l, err := other.Lock(c)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until the test ends: an attempt that fails (a deadlock
			// while the row is created, a starved statement) waits again.
			for wctx.Err() == nil {
				lease, err := l.Acquire(wctx, key)
				if err == nil {
					_ = lease.Release(context.Background())
					return
				}
				if wctx.Err() == nil {
					t.Logf("waiter for %s: %v (waiting again)", l.Config().Name, err)
				}
			}
		}()
	}

	var version string
	var perfSchema bool
	require.NoError(t, f.db.QueryRowContext(ctx, "SELECT VERSION(), @@performance_schema").Scan(&version, &perfSchema))
	namedSeen := false // performance_schema lists named locks
	if perfSchema {
		var enabled string
		require.NoError(t, f.tdb.Admin(t).QueryRowContext(ctx, "SELECT ENABLED FROM performance_schema.setup_instruments WHERE NAME = 'wait/lock/metadata/sql/mdl'").Scan(&enabled))
		namedSeen = enabled == "YES"
	}
	if !strings.Contains(version, "MariaDB") {
		require.True(t, perfSchema, "MySQL's default: performance_schema on")
	}
	waiters := func(page *ops.LockPage, lock, key string) *int64 {
		for _, h := range page.Items {
			if h.Lock == lock && h.Key == key {
				return h.Waiters
			}
		}
		return nil
	}
	counted := func(page *ops.LockPage) bool {
		locks := []string{"rows"}
		if namedSeen {
			locks = append(locks, "sessions", "woken")
		}
		for _, lock := range locks {
			if w := waiters(page, lock, key); w == nil || *w != 1 {
				return false
			}
		}
		return true
	}
	// The application's user reads no server tables: the page says so.
	page, err := f.ops.Locks(ctx, ops.LocksFilter{Limit: ops.MaxLimit})
	require.NoError(t, err)
	require.Nil(t, waiters(page, "rows", key))
	assert.Regexp(t, "Row lock waiters are not shown: reading (information_schema.INNODB_LOCK_WAITS|performance_schema.data_locks) failed.*(PROCESS|denied)", strings.Join(page.WaitersUnseen, "\n"))

	// An operator's user with the privileges (PROCESS on MariaDB, SELECT on
	// performance_schema on MySQL) sees them.
	admin, err := ops.New(f.tdb.Admin(t), cfg)
	require.NoError(t, err)
	// Polled no faster than every 150 ms: MariaDB refreshes its
	// INNODB_LOCK_WAITS snapshot only when nobody read it for 100 ms (a
	// faster poll, here or in the test run just before, reads the same
	// stale snapshot for ever).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(150 * time.Millisecond) {
		page, err = admin.Locks(ctx, ops.LocksFilter{Limit: ops.MaxLimit})
		require.NoError(t, err)
		if counted(page) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a waiter for each lock is not counted: %+v, unseen %q", page.Items, page.WaitersUnseen)
		}
	}
	if w := waiters(page, "rows", key+"-idle"); assert.NotNil(t, w) {
		assert.Zero(t, *w, "nobody waits for the idle row")
	}
	assert.Nil(t, waiters(page, "orders", key), "a polling lease's waiters are not counted")
	unseen := strings.Join(page.WaitersUnseen, "\n")
	assert.Contains(t, unseen, "Nobody can tell who waits for orders: lease waiters poll the row")
	if !namedSeen {
		assert.Nil(t, waiters(page, "sessions", key))
		assert.Nil(t, waiters(page, "woken", key))
		assert.Contains(t, unseen, "Waiters in GET_LOCK (session locks, lease locks with wait_mode: server) are not shown: performance_schema is off")
	} else {
		assert.NotContains(t, unseen, "GET_LOCK")
	}
	assert.NotContains(t, unseen, "Row lock waiters", "row lock waits are read on both servers")
	t.Logf("%s: %v", version, page.WaitersUnseen)
}
