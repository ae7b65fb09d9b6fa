package runtime_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/sqlstore"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

func mustSchedule(t *testing.T, spec, tz string) runtime.Schedule {
	t.Helper()
	s, err := runtime.ParseSchedule(spec, tz)
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
		_, err := runtime.ParseSchedule(bad.spec, bad.tz)
		assert.ErrorIs(t, err, runtime.ErrInvalid, "%q in %q", bad.spec, bad.tz)
	}
}

// startScheduler runs a scheduler until the returned stop is called (or
// the test ends).
func startScheduler(t *testing.T, j *runtime.Jobs, list ...runtime.ScheduledJob) (stop func()) {
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
	tdb := testdb.New(t)
	const ticks = 30
	job := runtime.ScheduledJob{Name: "heartbeat", Schedule: mustSchedule(t, "@every 1s", ""), MaxAttempts: 3, Timeout: 10 * time.Second}
	var mu sync.Mutex
	ran := map[time.Time]int{}
	var lateness []time.Duration
	handler := runtime.JobHandler{Handle: func(ctx context.Context, run *runtime.Run) error {
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
			startWorker(t, j, runtime.WorkerConfig{PollMin: 20 * time.Millisecond, PollMax: 200 * time.Millisecond, Handlers: map[string]runtime.JobHandler{"heartbeat": handler}}),
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
	for _, policy := range []string{runtime.CatchUpNone, runtime.CatchUpOne, runtime.CatchUpAll} {
		name := "catch_up_" + policy
		_, err := j.Enqueue(ctx, nil, runtime.NewRun{Job: name, ScheduledAt: last, MaxAttempts: 1, Timeout: time.Second})
		require.NoError(t, err)
		stop := startScheduler(t, j, runtime.ScheduledJob{Name: name, Schedule: every, CatchUp: policy, MaxAttempts: 1, Timeout: time.Second})
		count := func(state string) int {
			var n int
			require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE job = ? AND state = ? AND scheduled_at > ?", name, state, last).Scan(&n))
			return n
		}
		require.Eventually(t, func() bool { return count("available")+count("skipped") == missed }, 10*time.Second, 10*time.Millisecond, policy)
		stop()
		want := map[string]int{runtime.CatchUpNone: 0, runtime.CatchUpOne: 1, runtime.CatchUpAll: missed}[policy]
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
	stop := startScheduler(t, j, runtime.ScheduledJob{Name: "spaced", Schedule: mustSchedule(t, "@every 1s", ""), MinInterval: 1500 * time.Millisecond, MaxAttempts: 1, Timeout: time.Second})
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
	sqlstore.SessionStore
	inserts atomic.Int32
}

func (s *countingInserts) RunInsert(ctx context.Context, tx *sql.Tx, r runtime.NewRun) (int64, error) {
	s.inserts.Add(1)
	return s.SessionStore.RunInsert(ctx, tx, r)
}

// TestSchedulerStopsAfterTheLastTick: a schedule whose ticks run out (Next
// returns zero) gets its last tick inserted once, and then the job's
// scheduler loop ends instead of spinning on the last tick.
func TestSchedulerStopsAfterTheLastTick(t *testing.T) {
	tdb := testdb.New(t)
	store := &countingInserts{SessionStore: sqlstore.NewSession(tdb.Open(t))}
	j := jobsOn(t, store, "node")
	at := time.Now().Add(200 * time.Millisecond).Truncate(time.Millisecond).UTC()
	startScheduler(t, j, runtime.ScheduledJob{Name: "once", Schedule: onceSchedule{at}, MaxAttempts: 1, Timeout: time.Second})
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
