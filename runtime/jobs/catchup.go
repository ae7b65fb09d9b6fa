package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// The catch-up rule. A node's own idea of the ticks it has not handled (at
// start, none; the first tick it reached more than catchUpGrace late; the
// first tick whose insert failed) is never enough to insert them: while it
// could not, the other nodes may have run those ticks and Prune deleted
// them (all but the newest), and inserting them again runs them twice.
// So every path that inserts or records a tick other than the live one
// goes through catchUpFrom, which handles only the ticks after the latest
// of
//
//   - the node's own position,
//   - the newest tick in the database, read first (Prune keeps it, so no
//     tick up to it can be inserted again), and
//   - now − the job's retention (no tick older than that is inserted or
//     recorded: it may have run and been pruned, and the newest tick may
//     be older still when every node missed ticks).
//
// When the newest tick cannot be read, nothing is caught up: not from the
// node's own position; and a node with ticks to catch up inserts no live
// tick until it has caught them up, nor a missed tick after one whose
// insert failed. Otherwise a tick after the gap would become the newest,
// and every node's catch-up would start after it: the gap's ticks, which
// nobody inserted when every node's inserts failed (a server restart),
// would never run.
//
// A live tick (at most catchUpGrace old) is inserted without that read: the
// node's pruner keeps every finished run for its retention, at least
// catchUpGrace, plus pruneMargin (see pruner), so a live tick that another
// node already ran is still there and the insert is a no-op.

// catchUpGrace is how old a tick must be, by this node's clock, to count as
// missed: a younger one may still be inserted by a live node whose timer
// fires late or whose clock is behind, so it is inserted as a live tick
// (the unique key makes that harmless) instead of being skipped.
const catchUpGrace = 5 * time.Second

// schedulerStatementTimeout bounds every statement of the scheduler (a
// tick's insert, a skipped record, the read of the newest tick), well
// below catchUpGrace and the shortest retention honoured: a statement on a
// half-open connection gives up after it instead of waiting for the kernel
// (~15 min); the tick follows the catch-up rule.
const schedulerStatementTimeout = 2 * time.Second

// keepOf is how far back job's catch-up goes: its Retention, at least
// catchUpGrace; zero (only MaxCatchUp bounds it) when it has none.
func keepOf(sj ScheduledJob) time.Duration {
	if sj.Retention <= 0 {
		return 0
	}
	return max(sj.Retention, catchUpGrace)
}

// readValidity is how long after the newest tick was read catch-up may go
// on inserting ticks on the strength of that read: a tick another node
// inserts after the read is pruned a retention after it ran at the
// earliest, so half of it (of catchUpGrace for a job without retention)
// leaves room for the statements in flight; past it, the tick is read
// again.
func readValidity(sj ScheduledJob) time.Duration {
	if keep := keepOf(sj); keep > 0 {
		return keep / 2
	}
	return catchUpGrace / 2
}

// catchUpFrom applies the catch-up rule: it handles, per the job's policy,
// the missed ticks after own (zero at start: the node has no position)
// that are older than catchUpGrace, and returns the first tick to insert
// live and the latest tick known to have a run (the newest in the
// database or one it inserted; zero when none). It fails when the newest
// tick cannot be read (having inserted nothing) or when the insert of a
// missed tick to run fails (having inserted the ticks before it).
//
// A job that has no tick in the database and a node with no position (the
// job's first start) has nothing to catch up. A newest tick ahead of the
// database's clock (which stepped back after ticks were inserted by its
// time) leaves nothing to catch up and a next tick far ahead, which
// runJob's clock check takes back to the clock's time.
func (s *Scheduler) catchUpFrom(ctx context.Context, ts driver.JobStore, sj ScheduledJob, own time.Time) (next, last time.Time, err error) {
	for {
		s.now.Now(ctx) // a fresh reading of the database clock first, if due
		read := s.jobs.clock.Now()
		newest, ok, err := lastTick(ctx, ts, sj.Name)
		if err != nil {
			return time.Time{}, last, err
		}
		now := s.now.Now(ctx)
		if !ok && own.IsZero() {
			return sj.Schedule.Next(now), last, nil
		}
		last = latest(last, newest)
		from := latest(own, newest) // the ticks after from are missed
		if keep := keepOf(sj); keep > 0 {
			if oldest := now.Add(-keep); from.Before(oldest) {
				if t := sj.Schedule.Next(from); !t.IsZero() && t.Before(oldest) {
					s.jobs.log.Warn("lockgen: missed ticks older than the job's retention are neither run nor recorded",
						"job", sj.Name, "after", from, "before", oldest)
				}
				from = oldest.Add(-time.Nanosecond)
			}
		}
		cutoff := now.Add(-catchUpGrace) // the ticks after it run live
		if !from.Before(cutoff) {
			return sj.Schedule.Next(from), last, nil
		}
		handled, inserted, done, err := s.catchUp(ctx, ts, sj, from, cutoff, read.Add(readValidity(sj)))
		last = latest(last, inserted)
		if err != nil {
			return time.Time{}, last, err
		}
		if done {
			return sj.Schedule.Next(cutoff), last, nil
		}
		own = handled // the read is too old to go on: read again
	}
}

// catchUp handles the ticks after after up to until, per the job's policy
// (of more than MaxCatchUp, only the latest; the others are logged), until
// the local clock passes validUntil (it tries one at least). It returns the latest tick it handled
// and the latest it inserted a run for (zero when none), and whether it
// handled them all. It stops at the first tick to run whose insert fails,
// with that error: the ticks from it on are handled at the next attempt
// (recording it as skipped instead would drop a tick to run, and inserting
// the ticks after it would leave a gap behind the newest tick, which no
// catch-up goes back to).
func (s *Scheduler) catchUp(ctx context.Context, ts driver.JobStore, sj ScheduledJob, after, until, validUntil time.Time) (handled, inserted time.Time, done bool, err error) {
	var missed []time.Time
	dropped := 0
	for t := sj.Schedule.Next(after); !t.IsZero() && !t.After(until); t = sj.Schedule.Next(t) {
		missed = append(missed, t)
		if len(missed) > MaxCatchUp {
			missed = missed[1:]
			dropped++
		}
	}
	if dropped > 0 {
		s.jobs.log.Warn("lockgen: missed ticks beyond the catch-up bound are not recorded", "job", sj.Name, "ticks", dropped)
	}
	handled = after
	for i, t := range missed {
		if i > 0 && s.jobs.clock.Now().After(validUntil) {
			return handled, inserted, false, nil
		}
		if sj.CatchUp == CatchUpAll || (sj.CatchUp == CatchUpOne && i == len(missed)-1) {
			if !s.insert(ctx, sj, t) {
				return handled, inserted, false, fmt.Errorf("lockgen: inserting the missed tick %v of job %q failed", t, sj.Name)
			}
			inserted = t
		} else {
			s.skip(ctx, ts, sj, t, "missed while no scheduler ran (catch_up "+string(sj.CatchUp)+")")
		}
		handled = t
	}
	return handled, inserted, true, nil
}

// lastTick reads job's newest tick with a run, within
// schedulerStatementTimeout.
func lastTick(ctx context.Context, ts driver.JobStore, job string) (time.Time, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, schedulerStatementTimeout)
	defer cancel()
	t, ok, err := ts.RunLastTick(ctx, job)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("lockgen: read the last tick of job %q: %w", job, err)
	}
	return t, ok, nil
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
