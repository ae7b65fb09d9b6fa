package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// history builds synthetic histories for the checker's tests.
type history struct{ events []Event }

func (h *history) hold(proc, sec int, obj, key string, token, start, entry int64) {
	h.events = append(h.events, Event{Kind: KindHold, Proc: proc, Sec: sec, Obj: obj, Key: key, Token: token, T0: start, T1: entry})
}

func (h *history) handle(proc, sec int, job string, run, claim, tick, entry int64) {
	h.events = append(h.events, Event{Kind: KindHandle, Proc: proc, Sec: sec, Obj: job, Run: run, Token: claim, Tick: tick, T1: entry})
}

func (h *history) check(proc, sec int, t0, t1 int64, ok bool) {
	h.events = append(h.events, Event{Kind: KindCheck, Proc: proc, Sec: sec, What: "ctx", T0: t0, T1: t1, OK: ok})
}

func violations(t *testing.T, h *history, f Facts) []string {
	t.Helper()
	return Check(h.events, f, 0).Violations
}

func requireOne(t *testing.T, vs []string, prefix string) {
	t.Helper()
	require.Len(t, vs, 1, "%q", vs)
	require.True(t, strings.HasPrefix(vs[0], prefix), vs[0])
}

func TestCheckAcceptsAHandOver(t *testing.T) {
	h := &history{}
	h.hold(1, 1, "poll", "", 5, 0, 10)
	h.check(1, 1, 11, 12, true)
	h.check(1, 1, 40, 41, false) // told of the loss
	h.hold(2, 1, "poll", "", 6, 5, 50)
	h.check(2, 1, 51, 52, true)
	h.check(2, 1, 90, 91, true)
	require.Empty(t, violations(t, h, Facts{}))
}

func TestCheckFindsANilCheckAfterTheNextHolderCameIn(t *testing.T) {
	h := &history{}
	h.hold(1, 1, "poll", "", 5, 0, 10)
	h.check(1, 1, 11, 12, true)
	h.hold(2, 1, "poll", "", 6, 5, 50)
	h.check(1, 1, 60, 61, true) // after a SIGSTOP: still nil
	requireOne(t, violations(t, h, Facts{}), "two holders: p1.0#1")
}

func TestCheckFindsOverlappingBeliefsWithoutTokens(t *testing.T) {
	h := &history{}
	h.handle(1, 1, "single", 100, 1, 0, 10)
	h.check(1, 1, 11, 12, true)
	h.check(1, 1, 70, 71, true)
	h.handle(2, 1, "single", 101, 1, 0, 50)
	h.check(2, 1, 51, 52, true)
	h.check(2, 1, 80, 81, true)
	vs := violations(t, h, Facts{Singletons: []string{"single"}})
	requireOne(t, vs, "overlap: p1.0#1 (single run 100")
	// One run's handler calls on two processes: the later claim entered
	// while the earlier still checked nil.
	h = &history{}
	h.handle(1, 1, "delayed", 7, 1, 0, 10)
	h.check(1, 1, 11, 12, true)
	h.handle(2, 1, "delayed", 7, 2, 0, 50)
	h.check(2, 1, 51, 52, true)
	h.check(1, 1, 60, 61, true)
	vs = violations(t, h, Facts{})
	require.Len(t, vs, 2, "%q", vs)
	require.Contains(t, vs[0], "two holders")
	require.Contains(t, vs[1], "overlap")
}

func TestCheckFindsTokensThatDoNotRise(t *testing.T) {
	h := &history{}
	h.hold(1, 1, "keyed", "3", 9, 0, 10)
	h.hold(2, 1, "keyed", "3", 8, 20, 30) // acquired after p1 was in, lower token
	requireOne(t, violations(t, h, Facts{}), "token did not rise")
	h = &history{}
	h.hold(1, 1, "keyed", "3", 9, 0, 10)
	h.hold(2, 1, "keyed", "3", 9, 20, 30)
	vs := violations(t, h, Facts{})
	require.Contains(t, vs[0], "token reused")
	// Different keys are different locks.
	h = &history{}
	h.hold(1, 1, "keyed", "3", 9, 0, 10)
	h.hold(2, 1, "keyed", "4", 8, 20, 30)
	require.Empty(t, violations(t, h, Facts{}))
}

func TestCheckFindsAGuardedWriteBehindAnother(t *testing.T) {
	require.Empty(t, violations(t, &history{}, Facts{Guarded: []int64{3, 3, 4, 9}}))
	requireOne(t, violations(t, &history{}, Facts{Guarded: []int64{3, 5, 4}}), "guarded write 3 accepted with token 4 after token 5")
}

func TestCheckFindsTicksRunTwiceOrNever(t *testing.T) {
	from := time.Date(2026, 11, 25, 10, 0, 0, 300, time.UTC)
	to := from.Add(4 * time.Second) // ticks :01 :02 :03 :04
	tick := func(s int) time.Time { return time.Date(2026, 11, 25, 10, 0, s, 0, time.UTC) }
	f := Facts{TickJob: "tick", TickFrom: from, TickTo: to, TickEvery: time.Second}
	h := &history{}
	for s := 1; s <= 4; s++ {
		f.Runs = append(f.Runs, RunRow{ID: int64(s), Job: "tick", State: "completed", Tick: tick(s)})
		h.handle(1, s, "tick", int64(s), 1, tick(s).UnixMicro(), int64(s*100))
	}
	require.Empty(t, violations(t, h, f))
	// A node whose loc differs stored the :02 tick as another row.
	h.handle(2, 1, "tick", 9, 1, tick(2).UnixMicro(), 500)
	requireOne(t, violations(t, h, f), "tick 2026-11-25T10:00:02Z of tick ran as 2 runs")
	// A tick that never completed.
	h.events = h.events[:len(h.events)-1]
	f.Runs[2].State = "available"
	requireOne(t, violations(t, h, f), "1 of 4 ticks of the window never completed: 10:00:03")
}

func TestCheckFindsEnqueuedRunsThatNeverFinished(t *testing.T) {
	h := &history{events: []Event{{Kind: KindEnqueue, Obj: "delayed", Run: 1}, {Kind: KindEnqueue, Obj: "delayed", Run: 2}}}
	f := Facts{Runs: []RunRow{{ID: 1, Job: "delayed", State: "completed"}, {ID: 2, Job: "delayed", State: "running"}, {ID: 3, Job: "delayed", State: "completed"}}}
	requireOne(t, violations(t, h, f), "enqueued run 2 (delayed) never finished: state running")
	f.Runs = f.Runs[:1]
	requireOne(t, violations(t, h, f), "enqueued run 2 is not in the runs table")
}

func TestCheckReportsStuckLocksAndCrashes(t *testing.T) {
	vs := violations(t, &history{}, Facts{Stuck: []string{"poll could not be taken"}, Crashes: []string{"p1-i2.log: panic: boom"}})
	require.Equal(t, []string{"stuck lock: poll could not be taken", "worker crashed: p1-i2.log: panic: boom"}, vs)
}

func TestPlanIsReproducible(t *testing.T) {
	a := Plan(42, 5, time.Minute, true)
	require.Equal(t, a, Plan(42, 5, time.Minute, true))
	require.NotEqual(t, a, Plan(43, 5, time.Minute, true))
	restarts := 0
	busy := map[int]time.Duration{}
	for _, f := range a {
		if f.Kind == FaultRestart || f.Kind == FaultCrash {
			restarts++
			continue
		}
		if f.Kind == FaultLockRows {
			continue
		}
		require.GreaterOrEqual(t, f.At, busy[f.Proc], "two faults at once on p%d", f.Proc)
		busy[f.Proc] = f.At + f.Lead + f.Dur
	}
	require.Equal(t, 1, restarts)
	for seed, want := range map[uint64]string{42: FaultRestart, 43: FaultCrash} {
		assert.True(t, slices.ContainsFunc(Plan(seed, 5, time.Minute, true), func(f Fault) bool { return f.Kind == want }), "seed %d: a %s", seed, want)
	}
}

// TestPlanClusterFaultsOneNodeAtATime: a cluster's plan has no server
// restart, faults its nodes one at a time (the others keep a majority),
// keeps the processes' faults, and leaves a one-server plan as it was.
func TestPlanClusterFaultsOneNodeAtATime(t *testing.T) {
	require.Equal(t, Plan(42, 5, 3*time.Minute, true), PlanCluster(42, 5, 0, 3*time.Minute, true))
	plan := PlanCluster(42, 5, 3, 3*time.Minute, true)
	require.Equal(t, plan, PlanCluster(42, 5, 3, 3*time.Minute, true))
	require.True(t, slices.IsSortedFunc(plan, func(a, b Fault) int { return int(a.At - b.At) }))
	var nodeEnd time.Duration
	kinds := map[string]int{}
	for _, f := range plan {
		require.NotContains(t, []string{FaultRestart, FaultCrash}, f.Kind)
		kinds[f.Kind]++
		if !f.nodeFault() {
			continue
		}
		require.GreaterOrEqual(t, f.At, nodeEnd, "two node faults at once")
		require.Contains(t, []int{0, 1, 2}, f.Node)
		nodeEnd = f.At + f.Dur
	}
	for _, k := range []string{FaultNodeKill, FaultNodePause, FaultNodeIsolate, FaultKill, FaultPartition} {
		assert.Positive(t, kinds[k], k)
	}
}

// TestNodeFaultsHitEveryProcess: a fault of one node of a cluster counts
// as a fault of every process, as a server restart does.
func TestNodeFaultsHitEveryProcess(t *testing.T) {
	for _, kind := range []string{FaultNodeKill, FaultNodePause, FaultNodeIsolate, FaultRestart} {
		tl := newTimeline(Facts{Spans: []Span{{Kind: kind, Proc: -1, Node: 2, From: 100, To: 200}}})
		assert.NotNil(t, tl.faulted(4, 0, 150, 160), kind)
		assert.Nil(t, tl.faulted(4, 0, 300, 400), kind)
	}
	tl := newTimeline(Facts{Spans: []Span{{Kind: FaultPause, Proc: 1, From: 100, To: 200}}})
	assert.Nil(t, tl.faulted(4, 0, 150, 160), "a process's fault hits that process only")
}

func TestCheckAllowsTheDocumentedWindowsOfSessionAndRowLocks(t *testing.T) {
	ms := int64(time.Millisecond)
	h := &history{}
	h.hold(1, 1, "session", "", 5, 0, 10*ms)
	h.check(1, 1, 11*ms, 12*ms, true)
	h.hold(2, 1, "session", "", 6, 5*ms, 50*ms) // the server dropped p1's connection
	h.check(2, 1, 51*ms, 52*ms, true)
	h.check(1, 1, 300*ms, 301*ms, true) // p1 has not checked its connection yet
	f := Facts{Windows: map[string]time.Duration{"session": time.Second, "row": -1}}
	require.Empty(t, violations(t, h, f))
	h.check(1, 1, 1100*ms, 1101*ms, true) // beyond the window
	require.Len(t, violations(t, h, f), 2)
	for i := range h.events {
		h.events[i].Obj = strings.Replace(h.events[i].Obj, "session", "row", 1)
	}
	require.Empty(t, violations(t, h, f), "row holders learn at the release")
	requireOne(t, violations(t, &history{}, Facts{RowWrites: []int64{3, 5, 4}}), "row holding's write 3 accepted with token 4")
}
