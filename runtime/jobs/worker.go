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
// Run is the loop that ties the worker's parts together: the claimer, the
// executor, the heartbeater, the rescuer and the completer (see the
// package documentation).
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
	hb := &heartbeater{w: w}

	w.work(ctx, newClaimer(w, log, wake), ex, comp, hb, wake)
	w.drain(ctx, log, ex, comp, compDone, hb)
	return nil
}

// work claims runs into the executor's free slots and hands their
// outcomes to the completer until ctx ends, heartbeating and rescuing on
// their timers in between.
func (w *Worker) work(ctx context.Context, cl *claimer, ex *executor, comp *completer, hb *heartbeater, wake <-chan struct{}) {
	cfg := w.cfg
	clock := w.jobs.clock
	heartbeat := clock.NewTimer(cfg.Lease / 3)
	defer heartbeat.Stop()
	rs := &rescuer{w: w}
	var rescue runtime.Timer
	var rescueC <-chan time.Time
	if cfg.RescueEvery > 0 {
		rescue = clock.NewTimer(cfg.RescueEvery)
		defer rescue.Stop()
		rescueC = rescue.C()
	}
	for ctx.Err() == nil {
		free := ex.free()
		// backlog: the database does not keep up with the outcomes.
		backlog := comp.unrecorded() >= comp.maxUnrecorded()
		if backlog {
			free = 0
		}
		runs, sent, keepPoll := cl.claim(ctx, free)
		keepPoll = keepPoll || backlog
		for i := range runs {
			ex.start(&runs[i], sent)
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
				comp.add(o)
			}
			cl.busy()
		case <-wake:
			cl.busy()
		case <-idleC:
		case <-heartbeat.C():
			heartbeat.Reset(hb.beat(ctx, ex.running, comp.claims()))
		case <-rescueC:
			rs.rescue(ctx)
			rescue.Reset(cfg.RescueEvery)
		}
		if idle != nil {
			idle.Stop()
		}
	}
}

// drain stops the worker after ctx ended: no more claims; it lets the
// handlers finish for up to ShutdownGrace, then cancels them and waits one
// more Lease for those that ignore the cancel, hands every outcome to the
// completer, and keeps the unrecorded runs heartbeated until the
// completer's last rounds are done.
func (w *Worker) drain(ctx context.Context, log *slog.Logger, ex *executor, comp *completer, compDone <-chan struct{}, hb *heartbeater) {
	cfg := w.cfg
	clock := w.jobs.clock
	bg := context.WithoutCancel(ctx)
	grace := clock.NewTimer(cfg.ShutdownGrace)
	defer grace.Stop()
	allDone := ex.allDone()
	beat := clock.NewTimer(cfg.Lease / 3)
	defer beat.Stop()
	var abandonC <-chan time.Time // after the grace: the handlers' last lease
	for waiting := true; waiting; {
		select {
		case o := <-ex.results:
			ex.finish(o)
			comp.add(o)
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
		case <-beat.C():
			beat.Reset(hb.beat(bg, ex.running, comp.claims()))
		}
	}
	for drained := false; !drained; { // outcomes already delivered
		select {
		case o := <-ex.results:
			ex.finish(o)
			comp.add(o)
		default:
			drained = true
		}
	}
	comp.close()
	// Keep the unrecorded runs claimed while the completer's last rounds go.
	for recording := true; recording; {
		select {
		case <-compDone:
			recording = false
		case <-beat.C():
			beat.Reset(hb.beat(bg, nil, comp.claims()))
		}
	}
}
