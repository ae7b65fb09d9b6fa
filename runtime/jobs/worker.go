package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// Run claims and handles runs until ctx ends, then stops claiming, lets
// running handlers finish for up to ShutdownGrace, cancels the rest (and
// stops waiting for those that ignore the cancel one Lease later), records
// every outcome it has and returns nil. Database errors are logged and
// retried with backoff, never fatal: an outcome that cannot be recorded yet
// is kept (its run heartbeated) and retried while Run runs; one still
// unrecorded when Run returns leaves its run claimed until its lease
// passes, and the run is then rescued and run again (at least once), or
// orphaned when on its last attempt (see RunOrphaned).
// It fails at once, before claiming, when the server cannot run jobs or the
// connection lacks parseTime=true (see runtime.Client.CheckServer).
//
// Run ties the worker's parts together (see the package documentation):
// its loop claims runs into the executor, hands outcomes to the completer
// and rescues on its timer; the heartbeater and the completer each run in
// a goroutine of their own, so that a claim, a rescue or a recording stuck
// on a dead connection or a row lock never delays a heartbeat.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.jobs.checkAtStart(ctx); err != nil {
		return err
	}
	log := w.jobs.log.With("queue", w.cfg.Queue)
	wake, unlisten := w.jobs.listen(w.cfg.Queue)
	defer unlisten()

	comp := newCompleter(w)
	compDone := make(chan struct{})
	go func() { defer close(compDone); comp.loop() }()
	ex := newExecutor(ctx, w, log)
	defer ex.close()
	// The heartbeater outlives ctx: the drain heartbeats the runs whose
	// handlers it waits for and the outcomes the completer has yet to
	// record.
	hb := newHeartbeater(w, ex, comp)
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); hb.run(hbCtx) }()
	defer func() { stopHB(); <-hbDone }()

	w.work(ctx, newClaimer(w, log, wake), ex, comp, hb, wake)
	w.drain(log, ex, comp, compDone)
	return nil
}

// claimTimeout bounds each claim: half the lease. A claim that takes
// longer is abandoned (its runs, if its COMMIT landed, are rescued after
// their lease, and run then). The runs of a claim that took more than a
// heartbeat statement's bound are heartbeated at once, so that even after
// a claim of half a lease they get a heartbeat and a retry before their
// local deadline (Lease − Lease/10 after the claim was sent). A tighter
// bound would cut more claims of a merely slow server, each of which
// costs its runs an attempt.
func (w *Worker) claimTimeout() time.Duration { return w.cfg.Lease / 2 }

// rescueTimeout bounds each rescue statement: a third of the lease, so
// that a rescue waiting on a row lock (an admin transaction holding a
// run) holds up the loop's claims for a fraction of each RescueEvery.
func (w *Worker) rescueTimeout() time.Duration { return w.cfg.Lease / 3 }

// work claims runs into the executor's free slots and hands their
// outcomes to the completer until ctx ends, rescuing on its timer in
// between.
func (w *Worker) work(ctx context.Context, cl *claimer, ex *executor, comp *completer, hb *heartbeater, wake <-chan struct{}) {
	cfg := w.cfg
	clock := w.jobs.clock
	rs := &rescuer{w: w}
	var rescue runtime.Timer
	var rescueC <-chan time.Time
	if cfg.RescueEvery > 0 {
		rescue = clock.NewTimer(cfg.RescueEvery)
		defer rescue.Stop()
		rescueC = rescue.C()
	}
	// full: the last claim took its whole limit, so more runs are likely
	// due, and the worker gathers free slots before its next claim.
	full := false
	for ctx.Err() == nil {
		free := ex.free()
		// backlog: the database does not keep up with the outcomes.
		backlog := comp.unrecorded() >= comp.maxUnrecorded()
		if backlog {
			free = 0
		}
		runs, sent, keepPoll := cl.claim(ctx, free)
		switch {
		case len(runs) > 0:
			full = len(runs) == min(free, cfg.ClaimBatch)
		case free > 0 && !keepPoll:
			full = false // the claim found nothing, failed or the queue is paused
		}
		keepPoll = keepPoll || backlog
		for i := range runs {
			ex.start(&runs[i], sent)
		}
		if len(runs) > 0 && clock.Now().Sub(sent) > hb.statementTimeout() {
			// A slow claim: its runs' leases have less left than a
			// heartbeat period.
			hb.soon()
		}
		if len(runs) > 0 && free > len(runs) {
			continue
		}
		var idle runtime.Timer
		var idleC <-chan time.Time
		if len(runs) == 0 {
			idle = clock.NewTimer(cl.idle(keepPoll))
			idleC = idle.C()
		}
		select {
		case <-ctx.Done():
		case o := <-ex.results:
			for _, o := range ex.ready(o) {
				ex.handOff(o, comp)
			}
			cl.busy()
			if full {
				w.gather(ctx, ex, comp)
			}
		case <-wake:
			cl.busy()
		case <-idleC:
		case <-rescueC:
			rs.rescue(ctx)
			rescue.Reset(cfg.RescueEvery)
		}
		if idle != nil {
			idle.Stop()
		}
	}
}

// gather waits, after a claim that took its whole limit, for more
// handlers to finish while fewer than half of min(ClaimBatch, Concurrency)
// slots are free, for up to ClaimGather (at most PollMin; see
// WorkerConfig.ClaimGather), handing their outcomes to the completer as
// they come.
func (w *Worker) gather(ctx context.Context, ex *executor, comp *completer) {
	want := min(w.cfg.ClaimBatch, w.cfg.Concurrency) / 2
	if w.cfg.ClaimGather <= 0 || ex.free() >= want {
		return
	}
	t := w.jobs.clock.NewTimer(min(w.cfg.ClaimGather, w.cfg.PollMin))
	defer t.Stop()
	for ex.free() < want {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			return
		case o := <-ex.results:
			for _, o := range ex.ready(o) {
				ex.handOff(o, comp)
			}
		}
	}
}

// drain stops the worker after ctx ended: no more claims; it lets the
// handlers finish for up to ShutdownGrace, then cancels them and waits one
// more Lease for those that ignore the cancel, hands every outcome to the
// completer, and returns once the completer's last rounds are done. The
// heartbeater goes on meanwhile: for the runs being handled until the
// handlers are done or left behind, and for the unrecorded outcomes to the
// end.
func (w *Worker) drain(log *slog.Logger, ex *executor, comp *completer, compDone <-chan struct{}) {
	cfg := w.cfg
	clock := w.jobs.clock
	grace := clock.NewTimer(cfg.ShutdownGrace)
	defer grace.Stop()
	allDone := ex.allDone()
	var abandonC <-chan time.Time // after the grace: the handlers' last lease
	for waiting := true; waiting; {
		select {
		case o := <-ex.results:
			ex.handOff(o, comp)
		case <-allDone:
			waiting = false
		case <-grace.C():
			log.Warn("lockgen: shutdown grace passed; cancelling running handlers", "running", ex.live)
			ex.cancel()
			abandon := clock.NewTimer(cfg.Lease)
			defer abandon.Stop()
			abandonC = abandon.C()
		case <-abandonC:
			log.Error("lockgen: handlers ignore their cancelled context; stopping without them, their runs will be rescued: run again, or orphaned on their last attempt", "running", ex.live)
			waiting = false
		}
	}
	for drained := false; !drained; { // outcomes already delivered
		select {
		case o := <-ex.results:
			ex.handOff(o, comp)
		default:
			drained = true
		}
	}
	// Handlers left behind are not heartbeated any more; the unrecorded
	// outcomes are, while the completer's last rounds go.
	ex.release()
	comp.close()
	<-compDone
}
