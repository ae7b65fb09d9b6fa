package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// heartbeatBatch bounds the claims one heartbeat statement extends.
const heartbeatBatch = 500

// heartbeater extends the deadlines of a worker's claimed runs, so that a
// live worker's runs are not rescued, and tells a handler at once when its
// run turns out to have been rescued. It runs in a goroutine of its own,
// from before the first claim until the completer's last round, so that
// nothing else the worker does (a claim or a rescue stuck on a dead pooled
// connection or on a row lock, a slow completion) stands between two
// heartbeats. It reads the runs it heartbeats from the executor (the
// attempts being handled) and the completer (the outcomes not recorded
// yet), both safe for concurrent use.
type heartbeater struct {
	w    *Worker
	ex   *executor
	comp *completer
	// now asks for a heartbeat at once: runs were claimed by a slow claim,
	// and their leases have less left than a heartbeat period.
	now chan struct{}
	// failures counts the heartbeats in a row that failed, for the log;
	// only the heartbeater's goroutine uses it.
	failures int
}

func newHeartbeater(w *Worker, ex *executor, comp *completer) *heartbeater {
	return &heartbeater{w: w, ex: ex, comp: comp, now: make(chan struct{}, 1)}
}

// run heartbeats every Lease/3 (sooner after a failure, or when asked by
// soon) until ctx ends; ctx also cuts the heartbeat in flight.
func (h *heartbeater) run(ctx context.Context) {
	clock := h.w.jobs.clock
	next := h.w.cfg.Lease / 3
	for {
		t := clock.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-h.now:
			t.Stop()
		}
		next = h.beat(ctx)
	}
}

// soon asks for a heartbeat at once (it never blocks).
func (h *heartbeater) soon() {
	select {
	case h.now <- struct{}{}:
	default:
	}
}

// beat extends the deadline of the running runs that are still within
// their timeout plus one lease (a run stuck past that is left to be
// rescued) and of the finished runs whose outcomes wait to be recorded,
// and moves the local deadline of each running run it extended. A run
// whose claim is gone (it was rescued) has its handler told at once, and
// so has one an operator cancelled (ErrCancelled). A
// run whose row another transaction holds is skipped, not waited for (it
// keeps its local deadline and is tried again at the next heartbeat), so
// it delays no other run. Each batch is bounded by statementTimeout, so a
// heartbeat stuck on a half-open connection does not outlive the runs'
// local deadlines. It returns when to heartbeat next: Lease/3, or sooner
// after a failure or a skipped run.
func (h *heartbeater) beat(ctx context.Context) (next time.Duration) {
	w := h.w
	lease := w.cfg.Lease
	// The running attempts first, then the completer's: an outcome is
	// handed to the completer before it leaves the running attempts, so
	// it is in one of the two (or recorded).
	running := h.ex.held()
	unrecorded := h.comp.claims()
	now := w.jobs.clock.Now()
	claims := unrecorded
	owners := make(map[driver.Claim]*active, len(running))
	queued := make(map[driver.Claim]bool, len(unrecorded))
	for _, c := range unrecorded {
		queued[c] = true
	}
	for _, a := range running {
		if !a.gone && !queued[a.claim] && now.Sub(a.started) < a.timeout+lease {
			claims = append(claims, a.claim)
			owners[a.claim] = a
		}
	}
	next = lease / 3
	failed := false // a batch failed
	for len(claims) > 0 && ctx.Err() == nil {
		k := min(len(claims), heartbeatBatch)
		sent := w.jobs.clock.Now()
		sctx, cancel := context.WithTimeout(ctx, h.statementTimeout())
		hb, err := w.jobs.store.RunsHeartbeat(sctx, claims[:k], lease)
		cancel()
		switch {
		case err != nil:
			if !failed {
				failed = true
				h.failures++
			}
			if ctx.Err() == nil {
				servererr.WarnUnlessTransient(w.jobs.log, "lockgen: run heartbeat failed", err, h.failures, "queue", w.cfg.Queue, "runs", k)
			}
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				// The statement hung: its connection is likely dead, and
				// so are the pool's other idle ones after a network fault
				// healed. Drop them all within one bound, so that the retry
				// finds a live connection instead of the next dead one.
				pctx, cancel := context.WithTimeout(ctx, h.statementTimeout())
				if n := driver.ProbeIdle(pctx, w.jobs.store.Server().DB); n > 0 {
					w.jobs.log.Debug("lockgen: dropped idle connections that did not answer after a heartbeat timed out", "queue", w.cfg.Queue, "connections", n)
				}
				cancel()
			}
			next = h.retry(sent)
		default:
			for _, c := range hb.Extended {
				if a := owners[c]; a != nil {
					a.lease.extend(sent, lease)
				}
			}
			for _, c := range hb.Gone {
				// A run recorded since the heartbeat read it is gone
				// because its outcome landed: nobody to tell.
				if a := owners[c]; a != nil && h.ex.holds(c) {
					a.gone = true
					a.lease.lose(fmt.Errorf("%w: run %d of job %q was rescued: its deadline passed before a heartbeat reached the database", runtime.ErrLeaseLost, c.ID, a.job), false)
				}
			}
			for _, c := range hb.Cancelled {
				if a := owners[c]; a != nil && h.ex.holds(c) {
					a.gone = true
					a.lease.lose(fmt.Errorf("%w: run %d of job %q", ErrCancelled, c.ID, a.job), false)
				}
			}
			if len(hb.Busy) > 0 {
				if w.jobs.log.Enabled(ctx, slog.LevelDebug) {
					busy := make([]int64, 0, min(len(hb.Busy), 20))
					for _, c := range hb.Busy[:cap(busy)] {
						busy = append(busy, c.ID)
					}
					w.jobs.log.Debug("lockgen: run heartbeat skipped runs whose rows another transaction holds", "queue", w.cfg.Queue, "runs", len(hb.Busy), "run_ids", busy)
				}
				next = min(next, h.retry(sent))
			}
		}
		claims = claims[k:]
	}
	if !failed {
		h.failures = 0
	}
	return next
}

// statementTimeout bounds each heartbeat transaction: a sixth of the
// lease, so that after one stuck on a half-open connection the next, sent
// on a fresh connection, still lands before the runs' local deadlines. A
// heartbeat stranded between its SELECT and its COMMIT keeps the batch's
// rows locked on the server for about a second more (the session's
// wait_timeout), during which the next heartbeats skip them: with a lease
// of 3 s or more, a retry still lands in time.
func (h *heartbeater) statementTimeout() time.Duration { return h.w.cfg.Lease / 6 }

// retry is the wait before the next heartbeat after a failed one sent at
// sent: until Lease/12 after it was sent, so at once after one that timed
// out (its connection is discarded, and the pool's idle connections that do
// not answer a ping were dropped with it: the next finds a live one) and
// not in a busy loop after one that failed fast.
func (h *heartbeater) retry(sent time.Time) time.Duration {
	return max(h.w.cfg.Lease/12-h.w.jobs.clock.Now().Sub(sent), 0)
}
