package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// heartbeatBatch bounds the claims one heartbeat statement extends.
const heartbeatBatch = 500

// heartbeater extends the deadlines of a worker's claimed runs, so that a
// live worker's runs are not rescued, and tells a handler at once when its
// run turns out to have been rescued.
type heartbeater struct {
	w *Worker
	// failures counts the heartbeats in a row that failed, for the log.
	failures int
}

// beat extends the deadline of the running runs that are still within
// their timeout plus one lease (a run stuck past that is left to be
// rescued) and of the finished runs whose outcomes wait to be recorded
// (unrecorded), and moves the local deadline of each running run it
// extended. A batch the database extends only in part is heartbeated run
// by run: a run whose claim is gone (it was rescued) has its handler told
// at once. Each statement is bounded by statementTimeout, so a heartbeat
// stuck on a half-open connection neither freezes the worker nor outlives
// the runs' local deadlines. It returns when to heartbeat next: Lease/3,
// or sooner after a failure.
func (h *heartbeater) beat(ctx context.Context, running map[int64]*active, unrecorded []driver.Claim) (next time.Duration) {
	w := h.w
	lease := w.cfg.Lease
	now := w.jobs.clock.Now()
	claims := unrecorded
	owners := make([]*active, len(unrecorded), len(unrecorded)+len(running))
	for _, a := range running {
		if !a.gone && now.Sub(a.started) < a.run.Timeout+lease {
			claims = append(claims, driver.Claim{ID: a.run.ID, Claim: a.run.Claim})
			owners = append(owners, a)
		}
	}
	next = lease / 3
	failed := false // a batch failed
	for len(claims) > 0 && ctx.Err() == nil {
		k := min(len(claims), heartbeatBatch)
		n, err := h.extend(ctx, claims[:k], owners[:k])
		if err != nil {
			if !failed {
				failed = true
				h.failures++
			}
			if ctx.Err() == nil {
				servererr.WarnUnlessTransient(w.jobs.log, "lockgen: run heartbeat failed", err, h.failures, "queue", w.cfg.Queue, "runs", k)
			}
			next = h.retry()
		} else if int(n) < k {
			// Some claims are gone: find which, one by one.
			for i := 0; i < k && ctx.Err() == nil; i++ {
				one, err := h.extend(ctx, claims[i:i+1], owners[i:i+1])
				switch a := owners[i]; {
				case err != nil:
					next = h.retry()
				case one == 0 && a != nil:
					a.gone = true
					a.lease.lose(fmt.Errorf("%w: run %d of job %q was rescued: its deadline passed before a heartbeat reached the database", runtime.ErrLeaseLost, a.run.ID, a.run.Job), false)
				}
			}
		}
		claims, owners = claims[k:], owners[k:]
	}
	if !failed {
		h.failures = 0
	}
	return next
}

// extend heartbeats claims (owned by owners; nil for a finished run) in
// one statement and reports how many it extended. When it extended all,
// it moves the owners' local deadlines.
func (h *heartbeater) extend(ctx context.Context, claims []driver.Claim, owners []*active) (int64, error) {
	lease := h.w.cfg.Lease
	sent := h.w.jobs.clock.Now()
	sctx, cancel := context.WithTimeout(ctx, h.statementTimeout())
	defer cancel()
	n, err := h.w.jobs.store.RunsHeartbeat(sctx, claims, lease)
	if err == nil && int(n) == len(claims) {
		for _, a := range owners {
			if a != nil {
				a.lease.extend(sent, lease)
			}
		}
	}
	return n, err
}

// statementTimeout bounds each heartbeat statement: a sixth of the lease,
// so that after one stuck on a half-open connection the next, sent on a
// fresh connection, still lands before the runs' local deadlines.
func (h *heartbeater) statementTimeout() time.Duration { return h.w.cfg.Lease / 6 }

// retry is the wait before the next heartbeat after a failed one.
func (h *heartbeater) retry() time.Duration { return h.w.cfg.Lease / 12 }
