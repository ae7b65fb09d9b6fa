package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/timing"
	"github.com/lockgen/lockgen/runtime/probe"
)

// Pruning: finished runs (completed, discarded, orphaned, cancelled,
// skipped) are deleted after their job's retention, in batches, by every
// node. A scheduled job's latest tick is never deleted: it is the position
// from which a restarted scheduler catches up. Every statement is bounded,
// so a half-open connection delays a round of pruning, never hangs it.

// pruneMargin is how much longer than its retention (at least the
// catch-up grace) the node's pruner keeps a job's finished runs: a
// scheduler inserts a tick as long as it is within the retention by its
// reading of the database clock, which is off by up to half the round trip
// of that reading (dbClockTimeout/2); the pruner's node may be off the
// other way.
const pruneMargin = dbClockTimeout

// pruneStatementTimeout bounds each DELETE of Prune (up to its limit rows,
// by primary key order of an index range), far below any retention the
// spec allows (1 m) and the default prune interval (10 m).
const pruneStatementTimeout = 10 * time.Second

// Prune deletes the runs of job that finished (completed, discarded,
// orphaned, cancelled or skipped) more than olderThan ago, limit per
// statement, until none is left or ctx ends, and returns how many it
// deleted. Like every entry point it checks the server first (see
// Client.Enqueue).
//
// The run of the job's newest scheduled tick is kept: it anchors catch-up
// after a restart (pruning it would make a restarted scheduler run that
// tick again). For a scheduled job, olderThan should exceed the
// scheduler's retention (ScheduledJob.Retention, at least 5 s) by
// pruneMargin (2 s), as the node's pruner does: a shorter one deletes
// ticks that a scheduler catching up, or inserting a late live tick, may
// insert and run again.
//
// The read of the newest tick is bounded by 2 s, and each DELETE by 10 s:
// on a connection that stopped answering it fails (with the statement's
// context.DeadlineExceeded) instead of hanging.
func (j *Client) Prune(ctx context.Context, job string, olderThan time.Duration, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: prune limit must be positive", runtime.ErrInvalid)
	}
	if err := j.locks.CheckFeature(ctx, nil, probe.Jobs); err != nil {
		return 0, err
	}
	keep, _, err := lastTick(ctx, j.store, job)
	if err != nil {
		return 0, fmt.Errorf("lockgen: prune runs: %w", err)
	}
	var total int64
	for {
		sctx, cancel := context.WithTimeout(ctx, pruneStatementTimeout)
		n, err := j.store.RunsPrune(sctx, job, keep, olderThan, limit)
		cancel()
		total += n
		if err != nil {
			return total, fmt.Errorf("lockgen: prune runs: %w", err)
		}
		if n < int64(limit) {
			return total, nil
		}
	}
}

// retentionOf is the shortest positive Keep of job in rs; zero when none.
func retentionOf(rs []Retention, job string) time.Duration {
	var keep time.Duration
	for _, r := range rs {
		if r.Job == job && r.Keep > 0 && (keep == 0 || r.Keep < keep) {
			keep = r.Keep
		}
	}
	return keep
}

// pruner prunes each job's finished runs after its Retention (at least
// catchUpGrace) plus pruneMargin, every `every` (default 10m), until its
// context ends. A failed prune is logged and tried again at the next
// round.
type pruner struct {
	jobs      *Client
	retention []Retention
	every     time.Duration
}

// run prunes every p.every until ctx ends.
func (p pruner) run(ctx context.Context) {
	every := p.every
	if every <= 0 {
		every = 10 * time.Minute
	}
	for timing.SleepOrWake(ctx, p.jobs.clock.NewTimer, every, nil) == nil {
		for _, r := range p.retention {
			limit := r.Limit
			if limit <= 0 {
				limit = runtime.PruneBatch
			}
			olderThan := max(r.Keep, catchUpGrace) + pruneMargin
			if _, err := p.jobs.Prune(ctx, r.Job, olderThan, limit); err != nil && ctx.Err() == nil {
				p.jobs.log.Warn("lockgen: pruning runs failed", "job", r.Job, "error", err)
			}
		}
	}
}
