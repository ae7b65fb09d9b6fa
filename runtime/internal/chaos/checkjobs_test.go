package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func (h *history) end(proc, sec int, at int64, err string) {
	h.events = append(h.events, Event{Kind: KindEnd, Proc: proc, Sec: sec, T1: at, Err: err})
}

const sec = int64(time.Second)

// TestCheckFindsAPrunedTickRunAgain: a tick of the pruned job that ran as
// two runs (a node inserted it again after its run was pruned) is found by
// the history, a run of a tick other than the one that ran it by the
// table, and a tick of the window with no successful call is missing.
func TestCheckFindsAPrunedTickRunAgain(t *testing.T) {
	from := time.Date(2026, 11, 25, 10, 0, 0, 300, time.UTC)
	tick := func(s int) time.Time { return time.Date(2026, 11, 25, 10, 0, s, 0, time.UTC) }
	f := Facts{PrunedTickJob: "retained", TickFrom: from, TickTo: from.Add(2 * time.Second), TickEvery: time.Second}
	h := &history{}
	for s := 1; s <= 2; s++ {
		h.handle(0, s, "retained", int64(s), 1, tick(s).UnixMicro(), int64(s)*sec)
		h.end(0, s, int64(s)*sec+1, "")
	}
	require.Empty(t, violations(t, h, f))
	// p1 inserts :01 again after run 1 was pruned, and runs it.
	h.handle(1, 1, "retained", 9, 1, tick(1).UnixMicro(), 90*sec)
	h.end(1, 1, 90*sec+1, "")
	requireOne(t, violations(t, h, f), "tick 2026-11-25T10:00:01Z of retained ran as 2 runs: [1 9]")
	// Inserted again, not run yet: the table shows it.
	h.events = h.events[:len(h.events)-2]
	f.Runs = []RunRow{{ID: 9, Job: "retained", State: "available", Tick: tick(1)}}
	requireOne(t, violations(t, h, f), "tick 2026-11-25T10:00:01Z of retained has run 9 in the table, although runs [1] ran it")
	// :02's only call failed.
	f.Runs = nil
	h.events[len(h.events)-1].Err = "context canceled"
	requireOne(t, violations(t, h, f), "1 of 2 ticks of retained in the window had no handler call that succeeded: 10:00:02")
}

// TestCheckFindsAHealthyHandlerCancelled: a handler told its lease was
// lost while neither its process nor the server had a fault is a
// violation; a fault of its process (or a restart, or a lockrows fault on
// its own run) explains it. A lockrows fault on another run of its process
// does not: the heartbeat skips the held row and extends the others.
func TestCheckFindsAHealthyHandlerCancelled(t *testing.T) {
	h := &history{}
	h.handle(1, 1, "long", 5, 3, 0, 10*sec)
	h.check(1, 1, 11*sec, 11*sec+1, true)
	h.check(1, 1, 12*sec, 12*sec+1, false)
	h.end(1, 1, 12*sec+2, "context canceled")
	h.handle(2, 1, "long", 5, 4, 0, 13*sec)
	f := Facts{Lease: 2 * time.Second}
	requireOne(t, violations(t, h, f), "healthy handler cancelled: p1.0#1 (long run 5 claim 3), entered at 10s, was told at 12s")
	require.Contains(t, violations(t, h, f)[0], "the run was executed again by p2.0#1")

	for _, sp := range []Span{
		{Kind: FaultBlackhole, Proc: 1, From: 6 * sec, To: 7 * sec}, // healed less than a lease before
		{Kind: FaultPause, Proc: 1, From: 11 * sec, To: 13 * sec},
		{Kind: FaultRestart, Proc: -1, From: 11 * sec, To: 20 * sec},
		{Kind: FaultLockRows, Proc: -1, From: 9 * sec, To: 15 * sec, Runs: []int64{5}, Owners: []int{1}},
	} {
		f.Spans = []Span{sp}
		require.Empty(t, violations(t, h, f), "%+v", sp)
	}
	for _, sp := range []Span{
		{Kind: FaultCut, Proc: 2, From: 9 * sec, To: 15 * sec},
		{Kind: FaultCut, Proc: 1, From: 2 * sec, To: 5 * sec},
		{Kind: FaultLockRows, Proc: -1, From: 9 * sec, To: 15 * sec, Runs: []int64{77}, Owners: []int{3}},
		{Kind: FaultLockRows, Proc: -1, From: 9 * sec, To: 15 * sec, Runs: []int64{77}, Owners: []int{1}},
	} {
		f.Spans = []Span{sp}
		requireOne(t, violations(t, h, f), "healthy handler cancelled")
	}
}

// TestCheckFindsASucceededRunThatEndedDiscarded: a one-attempt run may end
// discarded when no handler call of it succeeded, never when one did,
// unless its process was killed before it could record the outcome.
func TestCheckFindsASucceededRunThatEndedDiscarded(t *testing.T) {
	h := &history{events: []Event{{Kind: KindEnqueue, Obj: "once", Run: 5}}}
	h.handle(1, 1, "once", 5, 1, 0, 10*sec)
	h.check(1, 1, 10*sec+1, 10*sec+2, true)
	h.end(1, 1, 11*sec, "context canceled")
	f := Facts{OneAttempt: []string{"once"}, Lease: 2 * time.Second, Runs: []RunRow{{ID: 5, Job: "once", State: "discarded"}}}
	require.Empty(t, violations(t, h, f))

	h.events[len(h.events)-1].Err = ""
	requireOne(t, violations(t, h, f), "run 5 (once) ended discarded although its handler succeeded: p1.0#1 (once run 5 claim 1) returned nil at 11s")
	// Killed before it had 5 s fault-free to record it, even across a cut.
	f.Spans = []Span{{Kind: FaultCut, Proc: 1, From: 11 * sec, To: 20 * sec}, {Kind: FaultKill, Proc: 1, Killed: true, From: 23 * sec, To: 24 * sec}}
	require.Empty(t, violations(t, h, f))
	// Killed long after it could have recorded it.
	f.Spans = []Span{{Kind: FaultKill, Proc: 1, Killed: true, From: 30 * sec, To: 31 * sec}}
	requireOne(t, violations(t, h, f), "run 5 (once) ended discarded although its handler succeeded")
	// A run of a job with attempts left must complete.
	f.Spans, f.OneAttempt = nil, nil
	h.events[len(h.events)-1].Err = "context canceled"
	requireOne(t, violations(t, h, f), "enqueued run 5 (once) never finished: state discarded")
}

// TestCheckFindsStrandedRunsAndSessions: an unfinished run an open
// transaction still held locked at the end says so; a stranded session
// the controller saw is a violation.
func TestCheckFindsStrandedRunsAndSessions(t *testing.T) {
	h := &history{events: []Event{{Kind: KindEnqueue, Obj: "delayed", Run: 2}}}
	f := Facts{Runs: []RunRow{{ID: 2, Job: "delayed", State: "available"}}, Locked: map[int64]bool{2: true}}
	requireOne(t, violations(t, h, f), "enqueued run 2 (delayed) never finished: state available, and an open transaction still held its row locked")
	f = Facts{Strands: []string{"p3's session 812 (transaction 99) held 5 row locks open for 94 s or more"}, StrandBound: 30 * time.Second}
	requireOne(t, violations(t, &history{}, f), "stranded session: p3's session 812")
}

// TestPlanOfAnHourHasThousandsOfFaults: an hour plans at least 1,000
// faults, long outages longer than the retention, and partitions at most
// one per PartitionGap; the short form (45 s) plans no long fault.
func TestPlanOfAnHourHasThousandsOfFaults(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		plan := Plan(seed, 5, time.Hour, true)
		require.GreaterOrEqual(t, len(plan), 1000, "seed %d", seed)
		kinds := map[string]int{}
		last := -PartitionGap
		for _, f := range plan {
			kinds[f.Kind]++
			switch f.Kind {
			case FaultOutage:
				require.Greater(t, f.Dur, 70*time.Second-1)
			case FaultPartition:
				require.GreaterOrEqual(t, f.At-last, PartitionGap)
				last = f.At
			}
		}
		for _, k := range []string{FaultOutage, FaultPartition, FaultRotate, FaultLockRows, FaultKill} {
			require.NotZero(t, kinds[k], "seed %d: no %s in %v", seed, k, kinds)
		}
		require.Equal(t, 1, kinds[FaultRestart]+kinds[FaultCrash], "seed %d: one server restart or crash in %v", seed, kinds)
	}
	for _, f := range Plan(7, 5, 45*time.Second, true) {
		require.Less(t, f.Dur, 20*time.Second, "%s", f)
	}
}
