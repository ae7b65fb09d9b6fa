package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/chaos"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

func mustSchedule(t *testing.T, spec, tz string) jobs.Schedule {
	t.Helper()
	s, err := jobs.ParseSchedule(spec, tz)
	require.NoError(t, err)
	return s
}

func TestParseSchedule(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 7, 500, time.UTC)
	assert.Equal(t, time.Date(2026, 11, 23, 10, 0, 10, 0, time.UTC), mustSchedule(t, "@every 5s", "").Next(at),
		"@every ticks at multiples of the interval since the epoch, whenever the node started")
	assert.Equal(t, time.Date(2026, 11, 23, 19, 0, 0, 0, time.UTC), mustSchedule(t, "0 3 * * *", "Asia/Shanghai").Next(at),
		"03:00 in Shanghai is 19:00 UTC")
	assert.Equal(t, time.Date(2026, 11, 23, 10, 0, 8, 0, time.UTC), mustSchedule(t, "* * * * * *", "").Next(at), "six fields: seconds")
	for _, bad := range []struct{ spec, tz string }{
		{"61 * * * *", ""}, {"@every 1s", "Mars/Olympus"}, {"CRON_TZ=UTC 0 3 * * *", ""}, {"@fortnightly", ""},
		{"0 0 30 2 *", ""}, // February 30th: never fires
	} {
		_, err := jobs.ParseSchedule(bad.spec, bad.tz)
		assert.ErrorIs(t, err, runtime.ErrInvalid, "%q in %q", bad.spec, bad.tz)
	}
}

// startScheduler runs a scheduler until the returned stop is called (or
// the test ends).
func startScheduler(t *testing.T, j *jobs.Client, list ...jobs.ScheduledJob) (stop func()) {
	t.Helper()
	s, err := j.NewScheduler(list)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); assert.NoError(t, <-done) }) }
	t.Cleanup(stop)
	return stop
}

// TestScheduledTicksRunOnceAcrossNodes: three nodes run the scheduler and a
// worker for an @every 1s job; one node stops a third of the way in. Every
// tick from the first to the last ran exactly once: none missing, none
// twice.
func TestScheduledTicksRunOnceAcrossNodes(t *testing.T) {
	t.Parallel() // mostly waiting for ticks: overlaps the other long scheduler tests
	tdb := testdb.New(t)
	const ticks = 30
	job := jobs.ScheduledJob{Name: "heartbeat", Schedule: mustSchedule(t, "@every 1s", ""), MaxAttempts: 3, Timeout: 10 * time.Second}
	var mu sync.Mutex
	ran := map[time.Time]int{}
	var lateness []time.Duration
	handler := jobs.JobHandler{Handle: func(ctx context.Context, run *jobs.Run) error {
		mu.Lock()
		defer mu.Unlock()
		ran[run.ScheduledAt]++
		lateness = append(lateness, time.Since(run.ScheduledAt))
		return nil
	}}
	var stops [][2]func()
	for i := 0; i < 3; i++ {
		j := jobsNode(t, tdb.Open(t), "node-"+string(rune('a'+i)))
		stops = append(stops, [2]func(){
			startScheduler(t, j, job),
			startWorker(t, j, jobs.WorkerConfig{PollMin: 20 * time.Millisecond, PollMax: 200 * time.Millisecond, Handlers: map[string]jobs.JobHandler{"heartbeat": handler}}),
		})
	}
	time.Sleep(ticks / 3 * time.Second)
	stops[0][0]()
	stops[0][1]()
	time.Sleep(ticks * 2 / 3 * time.Second)
	for _, s := range stops[1:] {
		s[0]()
	}
	time.Sleep(time.Second) // the workers finish the last tick
	for _, s := range stops[1:] {
		s[1]()
	}

	mu.Lock()
	defer mu.Unlock()
	var got []time.Time
	for tick, n := range ran {
		assert.Equal(t, 1, n, "tick %v ran once", tick)
		got = append(got, tick)
	}
	slices.SortFunc(got, func(a, b time.Time) int { return a.Compare(b) })
	require.GreaterOrEqual(t, len(got), ticks-2, "about one tick per second")
	for i := 1; i < len(got); i++ {
		assert.Equal(t, time.Second, got[i].Sub(got[i-1]), "no tick missing after %v", got[i-1])
	}
	var runs int
	require.NoError(t, tdb.Open(t).QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = 'heartbeat' AND state = 'completed'").Scan(&runs))
	assert.Equal(t, len(got), runs, "one completed run per tick")
	slices.Sort(lateness)
	t.Logf("%d ticks; lateness from tick to handler start p50 %v p99 %v", len(got), lateness[len(lateness)/2], lateness[len(lateness)*99/100])
}

// TestSchedulerCatchUp: ticks missed while no scheduler ran follow the
// job's policy, and every tick that is not run is recorded as skipped.
func TestSchedulerCatchUp(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	j := jobsNode(t, db, "node")
	// Ticks every minute, the latest 30s ago: none near the catch-up cutoff.
	every := shiftedEvery{d: time.Minute, anchor: time.Now().Add(-30 * time.Second).Truncate(time.Microsecond)}
	last := every.anchor.Add(-10 * time.Minute) // 10 ticks ago
	var missed int
	for tick := every.Next(last); !tick.After(time.Now()); tick = every.Next(tick) {
		missed++
	}
	for _, policy := range []jobs.CatchUp{jobs.CatchUpNone, jobs.CatchUpOne, jobs.CatchUpAll} {
		name := "catch_up_" + string(policy)
		_, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: name, ScheduledAt: last, MaxAttempts: 1, Timeout: time.Second})
		require.NoError(t, err)
		stop := startScheduler(t, j, jobs.ScheduledJob{Name: name, Schedule: every, CatchUp: policy, MaxAttempts: 1, Timeout: time.Second})
		count := func(state string) int {
			var n int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = ? AND state = ? AND scheduled_at > ?", name, state, last).Scan(&n))
			return n
		}
		require.Eventually(t, func() bool { return count("available")+count("skipped") == missed }, 10*time.Second, 10*time.Millisecond, string(policy))
		stop()
		want := map[jobs.CatchUp]int{jobs.CatchUpNone: 0, jobs.CatchUpOne: 1, jobs.CatchUpAll: missed}[policy]
		assert.Equal(t, want, count("available"), "%s: runs", policy)
		assert.Equal(t, missed-want, count("skipped"), "%s: skipped ticks are recorded", policy)
	}
}

// TestSchedulerMinInterval: a tick sooner than min_interval after the
// previous run's tick is skipped and recorded.
func TestSchedulerMinInterval(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	j := jobsNode(t, db, "node")
	stop := startScheduler(t, j, jobs.ScheduledJob{Name: "spaced", Schedule: mustSchedule(t, "@every 1s", ""), MinInterval: 1500 * time.Millisecond, MaxAttempts: 1, Timeout: time.Second})
	time.Sleep(4500 * time.Millisecond)
	stop()
	rows, err := db.Query("SELECT state FROM lockgen_runs WHERE job = 'spaced' ORDER BY scheduled_at")
	require.NoError(t, err)
	defer rows.Close()
	var states []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		states = append(states, s)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(states), 3)
	for i, s := range states {
		assert.Equal(t, map[bool]string{true: "available", false: "skipped"}[i%2 == 0], s, "tick %d of %v", i, states)
	}
}

// shiftedEvery ticks every d at anchor + k·d.
type shiftedEvery struct {
	d      time.Duration
	anchor time.Time
}

func (e shiftedEvery) Next(t time.Time) time.Time {
	k := t.Sub(e.anchor) / e.d
	next := e.anchor.Add(k * e.d)
	for !next.After(t) {
		next = next.Add(e.d)
	}
	for next.Add(-e.d).After(t) {
		next = next.Add(-e.d)
	}
	return next.UTC()
}

// onceSchedule has one tick.
type onceSchedule struct{ at time.Time }

func (o onceSchedule) Next(t time.Time) time.Time {
	if t.Before(o.at) {
		return o.at
	}
	return time.Time{}
}

// countingInserts counts the runs a node's scheduler inserts.
type countingInserts struct {
	lockgendb.Store
	inserts atomic.Int32
}

func (s *countingInserts) RunInsert(ctx context.Context, tx *sql.Tx, r jobs.NewRun) (int64, error) {
	s.inserts.Add(1)
	return s.Store.RunInsert(ctx, tx, r)
}

// TestSchedulerStopsAfterTheLastTick: a schedule whose ticks run out (Next
// returns zero) gets its last tick inserted once, and then the job's
// scheduler loop ends instead of spinning on the last tick.
func TestSchedulerStopsAfterTheLastTick(t *testing.T) {
	tdb := testdb.New(t)
	store := &countingInserts{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "node")
	at := time.Now().Add(200 * time.Millisecond).Truncate(time.Millisecond).UTC()
	startScheduler(t, j, jobs.ScheduledJob{Name: "once", Schedule: onceSchedule{at}, MaxAttempts: 1, Timeout: time.Second})
	time.Sleep(time.Second)
	assert.Equal(t, int32(1), store.inserts.Load(), "the one tick, inserted once")
	var n int
	require.NoError(t, tdb.Open(t).QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = 'once' AND scheduled_at = ?", at).Scan(&n))
	assert.Equal(t, 1, n)
}

// TestScheduleDaylightSaving pins what a cron schedule in a zone with
// daylight saving does (robfig/cron's rules, documented in the README): a
// wall-clock time skipped by the spring change does not fire that day, and
// one repeated by the autumn change fires twice, an hour apart.
func TestScheduleDaylightSaving(t *testing.T) {
	utc := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return at
	}
	spring := mustSchedule(t, "30 2 * * *", "America/New_York")
	assert.Equal(t, utc("2026-03-09T06:30:00Z"), spring.Next(utc("2026-03-07T12:00:00Z")), "no 02:30 on 2026-03-08")
	autumn := mustSchedule(t, "30 1 * * *", "America/New_York")
	first := autumn.Next(utc("2026-10-31T12:00:00Z"))
	assert.Equal(t, utc("2026-11-01T05:30:00Z"), first, "01:30 EDT")
	assert.Equal(t, utc("2026-11-01T06:30:00Z"), autumn.Next(first), "and 01:30 EST")
}

// startNode runs j.RunNode(cfg) until the test ends and fails the test if
// it returns an error.
func startNode(t *testing.T, j *jobs.Client, cfg jobs.NodeConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.RunNode(ctx, cfg) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
}

// jobsWithClock is one node's job API on store, with clock as its clock.
func jobsWithClock(t *testing.T, store driver.JobStore, owner string, clock runtime.Clock) *jobs.Client {
	t.Helper()
	c, err := runtime.NewClient(store, runtime.WithOwner(owner), runtime.WithClock(clock))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	return j
}

// waitSleeping waits until the scheduler on clock sleeps until tick: it
// has handled every tick before.
func waitSleeping(t *testing.T, clock *testkit.ManualClock, tick time.Time) {
	t.Helper()
	require.Eventually(t, func() bool { return clock.SleepingUntil(tick) }, 20*time.Second, time.Millisecond, "the scheduler sleeps until %v", tick)
}

// jobTicks reads the ticks that have a run of job, oldest first, each as
// its offset from base ("30s").
func jobTicks(t *testing.T, db *sql.DB, job string, base time.Time) []string {
	t.Helper()
	rows, err := db.Query("SELECT scheduled_at FROM lockgen_runs WHERE job = ? ORDER BY scheduled_at", job)
	require.NoError(t, err)
	defer rows.Close()
	var ticks []string
	for rows.Next() {
		var tick time.Time
		require.NoError(t, rows.Scan(&tick))
		ticks = append(ticks, tick.Sub(base).String())
	}
	require.NoError(t, rows.Err())
	return ticks
}

// seconds lists the offsets lo s … hi s, as jobTicks gives them.
func seconds(lo, hi int) []string {
	var ticks []string
	for i := lo; i <= hi; i++ {
		ticks = append(ticks, (time.Duration(i) * time.Second).String())
	}
	return ticks
}

// lateNode is a node whose scheduler runs an @every 1s job with catch_up
// all and a 20 s retention on a manual clock, and another node that works
// the job's runs and records which ticks ran.
type lateNode struct {
	db     *sql.DB
	clock  *testkit.ManualClock
	first  time.Time // the paused node's first tick
	others *jobs.Client
	mu     sync.Mutex
	ran    map[time.Time]int
}

const (
	lateJob  = "late"
	lateKeep = 20 * time.Second
)

// newLateNode starts both nodes; the paused node runs its first tick live
// and then sleeps until the next, until the test advances its clock.
func newLateNode(t *testing.T, store driver.JobStore, db *sql.DB, others *jobs.Client) *lateNode {
	t.Helper()
	n := &lateNode{db: db, others: others, ran: map[time.Time]int{}}
	startWorker(t, others, jobs.WorkerConfig{PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond, Handlers: map[string]jobs.JobHandler{
		lateJob: {Handle: func(ctx context.Context, run *jobs.Run) error {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.ran[run.ScheduledAt.UTC()]++
			return nil
		}},
	}})
	n.clock = testkit.NewManualClock(time.Now().UTC().Truncate(time.Second).Add(500 * time.Millisecond))
	n.first = n.clock.Now().Add(500 * time.Millisecond)
	startNode(t, jobsWithClock(t, store, "paused", n.clock), jobs.NodeConfig{
		Scheduled:  []jobs.ScheduledJob{{Name: lateJob, Schedule: mustSchedule(t, "@every 1s", ""), CatchUp: jobs.CatchUpAll, MaxAttempts: 1, Timeout: 10 * time.Second}},
		Retention:  []jobs.Retention{{Job: lateJob, Keep: lateKeep}},
		PruneEvery: time.Hour, // never, by the manual clock
	})
	waitSleeping(t, n.clock, n.first)
	n.clock.Advance(time.Second)
	waitSleeping(t, n.clock, n.first.Add(time.Second))
	require.Equal(t, seconds(0, 0), jobTicks(t, db, lateJob, n.first), "the first tick ran live")
	return n
}

// othersRun has the other nodes run the ticks first+1s … first+last·1s,
// waits until every run of the job completed and prunes them all but the
// newest (which Prune keeps).
func (n *lateNode) othersRun(t *testing.T, last int) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= last; i++ {
		tick := n.first.Add(time.Duration(i) * time.Second)
		_, err := n.others.Enqueue(ctx, nil, jobs.NewRun{Job: lateJob, ScheduledAt: tick, MaxAttempts: 1, Timeout: 10 * time.Second})
		require.NoError(t, err)
	}
	n.waitCompleted(t)
	require.Eventually(t, func() bool {
		_, err := n.others.Prune(ctx, lateJob, 0, 1000)
		require.NoError(t, err)
		return len(jobTicks(t, n.db, lateJob, n.first)) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, seconds(last, last), jobTicks(t, n.db, lateJob, n.first), "pruning keeps the newest tick")
}

// waitCompleted waits until every run of the job has completed.
func (n *lateNode) waitCompleted(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, n.db.QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = ? AND state <> 'completed'", lateJob).Scan(&left))
		return left == 0
	}, 20*time.Second, 10*time.Millisecond)
}

// checkRanOnce fails the test when a tick ran more than once.
func (n *lateNode) checkRanOnce(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	var twice []time.Duration
	for tick, runs := range n.ran {
		if runs > 1 {
			twice = append(twice, tick.Sub(n.first))
		}
	}
	slices.Sort(twice)
	assert.Empty(t, twice, "ticks (after the first) that ran twice")
}

// TestSchedulerLateNodeDoesNotRerunPrunedTicks: a node paused right after
// its first tick wakes a minute late. Meanwhile the other nodes ran the
// next 50 ticks and pruned them (all but the newest). The late node
// catches up from the database's newest tick, not from its own: no pruned
// tick is inserted, so run, again. Paused once more while no other node
// runs, it wakes another minute late and catches up only the ticks within
// the retention (20 s): none older is inserted.
func TestSchedulerLateNodeDoesNotRerunPrunedTicks(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	n := newLateNode(t, localClockSession{Store: lockgendb.NewStore(tdb.Open(t))}, db, jobsNode(t, tdb.Open(t), "others"))
	// The test prunes every finished run but the newest: ticks 41 s to 49 s
	// stand for ticks that are within the retention by the late node's
	// clock but were pruned by the database's, which is ahead.
	n.othersRun(t, 50)

	// The node wakes 60.25 s after its first tick: the catch-up cutoff is
	// 55.25 s after it, the retention's bound 40.25 s.
	n.clock.Advance(n.first.Add(60*time.Second + 250*time.Millisecond).Sub(n.clock.Now()))
	waitSleeping(t, n.clock, n.first.Add(61*time.Second))
	n.waitCompleted(t)
	want := append(seconds(50, 50), seconds(51, 60)...)
	require.Equal(t, want, jobTicks(t, db, lateJob, n.first), "the newest tick the others ran, then caught up to 55 s and live from 56 s")

	// Paused again, with no other node running, it wakes at 120.25 s: the
	// cutoff is 115.25 s, the retention's bound 100.25 s.
	n.clock.Advance(n.first.Add(120*time.Second + 250*time.Millisecond).Sub(n.clock.Now()))
	waitSleeping(t, n.clock, n.first.Add(121*time.Second))
	n.waitCompleted(t)
	want = append(want, seconds(101, 120)...)
	assert.Equal(t, want, jobTicks(t, db, lateJob, n.first), "then the ticks of the last 20 s: caught up to 115 s and live from 116 s")
	n.checkRanOnce(t)
}

// localClockSession and localClockFailing are stores whose pool the runtime
// cannot see: their Server leaves driver.Target.DB nil. Their scheduler
// tells the time by the test's manual clock, as if it were the database's,
// instead of reading the database's clock: the late-node tests move the
// node's time by minutes without waiting for the database's to move.
type (
	localClockSession struct{ lockgendb.Store }
	localClockFailing struct{ *failingLastTick }
)

func (localClockSession) Server() driver.Target { return driver.Target{} }
func (localClockFailing) Server() driver.Target { return driver.Target{} }

// failingLastTick fails RunLastTick once fail is set.
type failingLastTick struct {
	lockgendb.Store
	fail atomic.Bool
}

func (s *failingLastTick) RunLastTick(ctx context.Context, job string) (time.Time, bool, error) {
	if s.fail.Load() {
		return time.Time{}, false, errors.New("test: network partition")
	}
	return s.Store.RunLastTick(ctx, job)
}

// TestSchedulerLateNodeWithoutTheNewestTickSkipsCatchUp: a late node that
// cannot read the database's newest tick does not catch up from its own
// stale one, and inserts no live tick either: one would become the newest
// tick, and the missed ticks before it would never be caught up by any
// node. Once it can read again it catches up from the newest tick (within
// the retention) and goes on live. It used to insert the live ticks after
// the cutoff meanwhile, and then found nothing to catch up: ticks 42 s to
// 55 s, which no node ran, never ran.
func TestSchedulerLateNodeWithoutTheNewestTickSkipsCatchUp(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	store := &failingLastTick{Store: lockgendb.NewStore(tdb.Open(t))}
	n := newLateNode(t, localClockFailing{failingLastTick: store}, db, jobsNode(t, tdb.Open(t), "others"))
	n.othersRun(t, 30)

	store.fail.Store(true)
	n.clock.Advance(n.first.Add(60*time.Second + 250*time.Millisecond).Sub(n.clock.Now()))
	waitSleeping(t, n.clock, n.first.Add(61*time.Second))
	n.waitCompleted(t)
	assert.Equal(t, seconds(30, 30), jobTicks(t, db, lateJob, n.first), "nothing inserted while the newest tick cannot be read")

	// It reads again at 61.25 s: the retention's bound is 41.25 s, the
	// cutoff 56.25 s.
	store.fail.Store(false)
	n.clock.Advance(time.Second)
	waitSleeping(t, n.clock, n.first.Add(62*time.Second))
	n.waitCompleted(t)
	want := append(seconds(30, 30), seconds(42, 61)...)
	assert.Equal(t, want, jobTicks(t, db, lateJob, n.first), "the anchor, the ticks within the retention caught up, then live")
	n.checkRanOnce(t)
}

// failingTickInsert fails the insert of one tick, once.
type failingTickInsert struct {
	lockgendb.Store
	tick   time.Time
	failed atomic.Bool
}

func (s *failingTickInsert) RunInsert(ctx context.Context, tx *sql.Tx, r jobs.NewRun) (int64, error) {
	if r.ScheduledAt.Equal(s.tick) && s.failed.CompareAndSwap(false, true) {
		return 0, errors.New("test: the connection broke")
	}
	return s.Store.RunInsert(ctx, tx, r)
}

func (s failingTickInsertLocal) Server() driver.Target { return driver.Target{} }

type failingTickInsertLocal struct{ *failingTickInsert }

// TestSchedulerCatchUpStopsAtAFailedInsert: a catch-up whose insert of one
// missed tick fails stops there and goes on from it at the next attempt:
// every missed tick runs, none is recorded as skipped. The failed tick
// used to be recorded as skipped (catch_up all: it never ran), and the
// ticks after it inserted, so no later catch-up went back to it.
func TestSchedulerCatchUpStopsAtAFailedInsert(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	store := &failingTickInsert{Store: lockgendb.NewStore(tdb.Open(t))}
	n := newLateNode(t, failingTickInsertLocal{store}, db, jobsNode(t, tdb.Open(t), "others"))
	store.tick = n.first.Add(45 * time.Second)
	n.othersRun(t, 30)

	// The node wakes at 60.25 s: the retention's bound is 40.25 s, the
	// cutoff 55.25 s; the insert of the tick at 45 s fails.
	n.clock.Advance(n.first.Add(60*time.Second + 250*time.Millisecond).Sub(n.clock.Now()))
	waitSleeping(t, n.clock, n.first.Add(61*time.Second))
	n.clock.Advance(time.Second)
	waitSleeping(t, n.clock, n.first.Add(62*time.Second))
	n.waitCompleted(t)
	require.True(t, store.failed.Load(), "the insert of the tick at 45 s failed")
	want := append(seconds(30, 30), seconds(41, 61)...)
	assert.Equal(t, want, jobTicks(t, db, lateJob, n.first), "every tick within the retention ran")
	var skipped int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = ? AND state = 'skipped'", lateJob).Scan(&skipped))
	assert.Zero(t, skipped)
	n.checkRanOnce(t)
}

// TestSchedulerCatchUpStopsAtTheRetention: a node that starts five minutes
// after the job's newest tick (every node was down) catches up only the
// ticks within the job's retention, which RunNode takes from its
// Retention: a tick older than that is neither run nor recorded.
func TestSchedulerCatchUpStopsAtTheRetention(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	ctx := context.Background()
	anchor := time.Now().UTC().Truncate(time.Second).Add(-300 * time.Second)
	j := jobsNode(t, db, "seed")
	for _, policy := range []jobs.CatchUp{jobs.CatchUpAll, jobs.CatchUpNone} {
		job := lateJob + "_" + string(policy)
		_, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: job, ScheduledAt: anchor, MaxAttempts: 1, Timeout: time.Second, Delay: time.Hour})
		require.NoError(t, err)
		clock := testkit.NewManualClock(anchor.Add(300*time.Second + 250*time.Millisecond))
		startNode(t, jobsWithClock(t, localClockSession{Store: lockgendb.NewStore(tdb.Open(t))}, "late-"+string(policy), clock), jobs.NodeConfig{
			Scheduled:  []jobs.ScheduledJob{{Name: job, Schedule: mustSchedule(t, "@every 1s", ""), CatchUp: policy, MaxAttempts: 1, Timeout: time.Second}},
			Retention:  []jobs.Retention{{Job: job, Keep: lateKeep}},
			PruneEvery: time.Hour,
		})
		waitSleeping(t, clock, anchor.Add(301*time.Second))
		// The retention's bound is 280.25 s after the anchor, the catch-up
		// cutoff 295.25 s.
		want := append(seconds(0, 0), seconds(281, 300)...)
		assert.Equal(t, want, jobTicks(t, db, job, anchor), "%s: the anchor, then the ticks of the last 20 s", policy)
		var skipped int
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = ? AND state = 'skipped'", job).Scan(&skipped))
		assert.Equal(t, map[jobs.CatchUp]int{jobs.CatchUpAll: 0, jobs.CatchUpNone: 15}[policy], skipped, "%s: missed ticks within the retention not run are recorded", policy)
	}
}

// TestSchedulerCatchesUpTicksWhoseInsertFailed: while the database cannot
// be reached, every node's tick inserts fail and no node falls behind, so
// nobody would insert those ticks; once the database answers again they
// follow the job's catch-up policy (those older than the catch-up grace,
// 5 s; the younger ones are inserted as live ticks). Found by the chaos
// harness: a server restart lost every tick of its downtime under
// catch_up: all.
func TestSchedulerCatchesUpTicksWhoseInsertFailed(t *testing.T) {
	for _, policy := range []jobs.CatchUp{jobs.CatchUpAll, jobs.CatchUpNone} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			tdb := testdb.New(t)
			db := tdb.Open(t)
			proxy, pdb := testkit.OpenViaProxy(t, tdb)
			j := jobsNode(t, pdb, "node")
			stop := startScheduler(t, j, jobs.ScheduledJob{Name: "beat", Schedule: mustSchedule(t, "@every 1s", ""), CatchUp: policy, MaxAttempts: 1, Timeout: time.Second})
			time.Sleep(2500 * time.Millisecond)
			proxy.Cut()
			time.Sleep(8 * time.Second) // longer than the catch-up grace
			proxy.Restore()
			time.Sleep(2500 * time.Millisecond)
			stop()

			states := map[time.Time]string{}
			rows, err := db.Query("SELECT scheduled_at, state FROM lockgen_runs WHERE job = 'beat'")
			require.NoError(t, err)
			defer rows.Close()
			var ticks []time.Time
			for rows.Next() {
				var tick time.Time
				var state string
				require.NoError(t, rows.Scan(&tick, &state))
				states[tick] = state
				ticks = append(ticks, tick)
			}
			require.NoError(t, rows.Err())
			slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
			require.GreaterOrEqual(t, len(ticks), 11, "ticks before, during and after the cut")
			skipped := 0
			for i := 1; i < len(ticks); i++ {
				require.Equal(t, time.Second, ticks[i].Sub(ticks[i-1]), "no tick missing after %v", ticks[i-1])
				if states[ticks[i]] == "skipped" {
					skipped++
				}
			}
			if policy == jobs.CatchUpAll {
				assert.Zero(t, skipped, "catch_up all runs every missed tick")
			} else {
				assert.GreaterOrEqual(t, skipped, 2, "catch_up none records the ticks of the cut older than the grace as skipped")
			}
		})
	}
}

// TestSchedulerTicksByTheDatabaseClock: a node whose wall clock is
// stepped by an hour while it runs goes on inserting the ticks of the
// database's time: no tick an hour ahead (which every node that restarts
// afterwards would take as its position, and fall silent), and no hour of
// silence. Found by the chaos harness.
func TestSchedulerTicksByTheDatabaseClock(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			tdb := testdb.New(t)
			db := tdb.Open(t)
			clock := &chaos.SteppedClock{}
			j := jobsWithClock(t, lockgendb.NewStore(db), "stepped", clock)
			stop := startScheduler(t, j, jobs.ScheduledJob{Name: "beat", Schedule: mustSchedule(t, "@every 1s", ""), CatchUp: jobs.CatchUpAll, MaxAttempts: 1, Timeout: time.Second})
			time.Sleep(1500 * time.Millisecond)
			clock.Step(step)
			time.Sleep(7 * time.Second) // past the catch-up grace
			stop()

			var n, ahead int
			var first, last time.Time
			require.NoError(t, db.QueryRow("SELECT COUNT(*), MIN(scheduled_at), MAX(scheduled_at), COUNT(CASE WHEN scheduled_at > UTC_TIMESTAMP(6) + INTERVAL 2 SECOND THEN 1 END) FROM lockgen_runs WHERE job = 'beat'").Scan(&n, &first, &last, &ahead))
			assert.Zero(t, ahead, "ticks ahead of the database's clock")
			assert.GreaterOrEqual(t, n, 7, "a tick a second all along")
			assert.Equal(t, n, int(last.Sub(first)/time.Second)+1, "no tick missing between %v and %v", first, last)
		})
	}
}
