package jobs

import (
	"context"

	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// rescueLimit bounds the runs one rescue statement changes.
const rescueLimit = 1000

// rescuer makes the runs of dead workers due again, or orphans them when
// they were on their last attempt (and its timeout passed too): runs whose
// deadline, which their worker's heartbeats extend, has passed by the
// database clock. A late outcome of an orphaned run's claim is still
// recorded; nothing claims it again unless an operator retries it. Every
// worker with a RescueEvery rescues, in its loop between claims (the
// heartbeats go on apart from it). A rescue locks the runs it changes by
// primary key with SKIP LOCKED, in a short READ COMMITTED transaction, so
// rescuers and the runs' workers never both change a run, and a rescue
// never waits on a row that another rescue, a heartbeat, a completion or an
// operator's transaction holds: that run is left for a later round.
type rescuer struct {
	w *Worker
	// failures counts the rescues in a row that failed, for the log.
	failures int
}

// rescue runs rescue statements until one changes fewer than rescueLimit
// runs, or fails (logged; the next round retries). Each statement is
// bounded by rescueTimeout, and cut when ctx ends.
func (r *rescuer) rescue(ctx context.Context) {
	w := r.w
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, w.rescueTimeout())
		n, err := w.jobs.store.RunsRescue(sctx, rescueLimit)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.failures++
				servererr.WarnUnlessTransient(w.jobs.log, "lockgen: rescuing runs failed", err, r.failures)
			}
			return
		}
		r.failures = 0
		if n > 0 {
			w.jobs.obs.Rescued(int(n))
			w.jobs.log.Info("lockgen: rescued runs of stopped workers", "runs", n)
		}
		if n < rescueLimit {
			return
		}
	}
}
