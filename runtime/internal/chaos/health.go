package chaos

import (
	"slices"
	"time"
)

// recordWithin is how long a process, fault-free, is given to record a
// finished run's outcome: completions are batched every 20 ms and retried
// while the database is unreachable.
const recordWithin = 5 * time.Second

// timeline is the faults of a run by process, to tell a process hit by a
// fault from a healthy one.
type timeline struct {
	spans []Span
	// grace is how long a process counts as hit after a fault healed:
	// its pool may still hold connections the fault killed, a statement
	// on one of which waits for its bound.
	grace int64
	// began is when the faults began (the report's base): calls entered
	// before, while every worker was starting, are not checked.
	began int64
}

func newTimeline(f Facts) timeline {
	spans := slices.Clone(f.Spans)
	slices.SortFunc(spans, func(a, b Span) int { return int(a.From - b.From) })
	return timeline{spans: spans, grace: int64(f.Lease), began: f.Began}
}

// hits reports whether sp hit proc (a server restart or crash hits every process;
// so does a fault of one node of a cluster: the cluster's commits wait
// while its membership changes, and a node that rejoins with a full state
// transfer blocks its donor; a lockrows fault only the runs it tried to
// lock: a heartbeat skips a row another transaction holds, so their
// processes' other runs go on).
func (tl timeline) hits(sp Span, proc int, run int64) bool {
	switch sp.Kind {
	case FaultRestart, FaultCrash, FaultNodeKill, FaultNodePause, FaultNodeIsolate:
		return true
	case FaultLockRows:
		return slices.Contains(sp.Runs, run)
	}
	return sp.Proc == proc
}

// faulted returns the first fault that hit proc (or run) at some instant
// in [from, to], counting each fault as lasting its grace after it healed.
func (tl timeline) faulted(proc int, run, from, to int64) *Span {
	for i := range tl.spans {
		sp := &tl.spans[i]
		if sp.From <= to && sp.To+tl.grace >= from && tl.hits(*sp, proc, run) {
			return sp
		}
	}
	return nil
}

// killedBeforeRecording reports whether the process of handler call s was
// killed after s returned but before it had recordWithin fault-free to
// record the outcome: the outcome died with it, and the run is rightly
// not completed by that call.
func (tl timeline) killedBeforeRecording(s *section) bool {
	settled := s.endT
	for {
		sp := tl.faulted(s.proc, s.run, settled, settled+int64(recordWithin))
		if sp == nil {
			break
		}
		settled = sp.To + tl.grace + 1
	}
	for _, sp := range tl.spans {
		if sp.Killed && sp.Proc == s.proc && sp.From >= s.endT && sp.From < settled+int64(recordWithin) {
			return true
		}
	}
	return false
}

// checkHandlers finds the handler calls told their lease was lost
// although neither their process nor the server had a fault from one
// lease before the call to then (calls entered before the faults began
// are not checked: every worker was starting up): a healthy worker whose heartbeats were
// held up by something else it did (a stuck claim or rescue), which
// cancels a healthy handler and runs its run again.
func (tl timeline) checkHandlers(order []*section, f Facts, r *Report, at func(int64) string, add func(string, ...any)) {
	again := map[int64][]*section{}
	for _, s := range order {
		if s.run != 0 {
			again[s.run] = append(again[s.run], s)
		}
	}
	for _, s := range order {
		if s.run == 0 || s.lost == nil {
			continue
		}
		if s.entry < tl.began {
			continue // the workers were starting up
		}
		r.Counts["handler calls told their lease was lost"]++
		if tl.faulted(s.proc, s.run, s.entry-int64(f.Lease), s.lost.T0) != nil {
			continue
		}
		msg := ""
		for _, o := range again[s.run] {
			if o.token > s.token {
				msg = "; the run was executed again by " + o.name() + " at " + at(o.entry)
				break
			}
		}
		add("healthy handler cancelled: %s, entered at %s, was told at %s that its lease was lost (%s), though neither p%d nor the server had a fault from %s before it%s",
			s.name(), at(s.entry), at(s.lost.T0), s.lost.Err, s.proc, time.Duration(f.Lease), msg)
	}
}
