package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/probe"
)

// active is one attempt being handled.
type active struct {
	run     *Run
	started time.Time
	// lease ends the handler's context when the run's lease may be lost.
	lease *runLease
	// gone: a heartbeat showed the run no longer has this claim (it was
	// rescued); it is not heartbeated again.
	gone bool
}

// outcome is the result of one attempt.
type outcome struct {
	run *Run
	err error
}

// rescueLimit bounds the runs one rescue statement changes.
const rescueLimit = 1000

// Run claims and handles runs until ctx ends, then stops claiming, lets
// running handlers finish for up to ShutdownGrace, cancels the rest (and
// stops waiting for those that ignore the cancel one Lease later), records
// every outcome it has and returns nil. Database errors are logged and
// retried with backoff, never fatal: an outcome that cannot be recorded yet
// is kept (its run heartbeated) and retried while Run runs; one still
// unrecorded when Run returns leaves its run claimed until its lease
// passes, and the run is then rescued and run again (at least once).
// It fails at once, before claiming, when the server cannot run jobs or the
// connection lacks parseTime=true (see Client.CheckServer).
func (w *Worker) Run(ctx context.Context) error {
	cfg := w.cfg
	client := w.jobs.client
	if err := client.checkServerAtStart(ctx, probe.Jobs); err != nil {
		return err
	}
	clock := client.clock
	log := client.logger.With("queue", cfg.Queue)
	wake, unlisten := w.jobs.listen(cfg.Queue)
	gate := w.jobs.gate(cfg.Queue)
	defer unlisten()

	results := make(chan outcome, cfg.Concurrency)
	// returned closes when Run returns, so that a handler left behind
	// (it ignored its cancelled context) does not block on results.
	returned := make(chan struct{})
	defer close(returned)
	rec := newRecorder(w)
	recDone := make(chan struct{})
	go func() { defer close(recDone); rec.loop() }()

	running := map[int64]*active{}
	// live counts the handler goroutines that have not delivered their
	// outcome: more than len(running) when a stuck handler's run was
	// rescued and claimed again here. Free slots count live handlers.
	live := 0
	var handlers sync.WaitGroup
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()

	// start starts r's handler; sent is when the claim was sent.
	start := func(r *Run, sent time.Time) {
		tctx, cancel := context.WithTimeout(handlerCtx, r.Timeout)
		lease := newRunLease(tctx, clock, r, sent, cfg.Lease, func(cause error) {
			log.Warn("lockgen: a running run's lease may be lost; its handler's context is cancelled", "job", r.Job, "run", r.ID, "attempt", r.Attempt, "cause", cause)
		})
		running[r.ID] = &active{run: r, started: clock.Now(), lease: lease}
		live++
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer cancel()
			defer lease.stop()
			o := outcome{run: r, err: w.handle(lease.ctx, r)}
			select {
			case results <- o:
			case <-returned:
			}
		}()
	}
	finish := func(o outcome) {
		live--
		if a, ok := running[o.run.ID]; ok && a.run.Claim == o.run.Claim {
			delete(running, o.run.ID)
		}
		rec.add(o)
	}

	poll := cfg.PollMin
	// Failures in a row of the claim, heartbeat and rescue statements.
	var claimFailures, heartbeatFailures, rescueFailures int
	heartbeat := clock.NewTimer(cfg.Lease / 3)
	defer heartbeat.Stop()
	var rescue Timer
	var rescueC <-chan time.Time
	if cfg.RescueEvery > 0 {
		rescue = clock.NewTimer(cfg.RescueEvery)
		defer rescue.Stop()
		rescueC = rescue.C()
	}
	for ctx.Err() == nil {
		// keepPoll: no claim for a reason other than an empty queue, so
		// the idle poll does not back off.
		claimed, keepPoll := 0, false
		free := cfg.Concurrency - live
		if rec.unrecorded() >= rec.maxUnrecorded() {
			free, keepPoll = 0, true // the database does not keep up with the outcomes
		}
		if free > 0 && !gate.tryEnter() {
			keepPoll = true // another worker here is claiming; it wakes us
		} else if free > 0 {
			limit := min(free, cfg.ClaimBatch)
			sent := clock.Now()
			runs, othersSkipped, err := w.claim(ctx, gate, limit)
			if othersSkipped && len(runs) == limit {
				// Others skipped their claims, and there may be more
				// due runs than this claim took.
				w.jobs.wakeOthers(cfg.Queue, wake)
			}
			switch {
			case err != nil && ctx.Err() == nil:
				claimFailures++
				warnUnlessTransient(log, "lockgen: claiming runs failed", err, claimFailures)
				poll = min(poll*2, cfg.PollMax)
			case err == nil:
				claimFailures = 0
				for i := range runs {
					start(&runs[i], sent)
				}
				claimed = len(runs)
				if claimed > 0 {
					poll = cfg.PollMin
				}
			}
		}
		if claimed > 0 && free > claimed {
			continue
		}
		var idle Timer
		var idleC <-chan time.Time
		if claimed == 0 {
			idle = clock.NewTimer(poll + rand.N(poll/4+1))
			idleC = idle.C()
			if !keepPoll {
				poll = min(poll*2, cfg.PollMax)
			}
		}
		select {
		case <-ctx.Done():
		case o := <-results:
			finish(o)
			// Take every result already there, so the next claim fills
			// all the freed slots in one statement instead of one each.
			for drained := false; !drained; {
				select {
				case o := <-results:
					finish(o)
				default:
					drained = true
				}
			}
			poll = cfg.PollMin
		case <-wake:
			poll = cfg.PollMin
		case <-idleC:
		case <-heartbeat.C():
			heartbeat.Reset(w.heartbeat(ctx, running, rec.claims(), &heartbeatFailures))
		case <-rescueC:
			w.rescue(ctx, &rescueFailures)
			rescue.Reset(cfg.RescueEvery)
		}
		if idle != nil {
			idle.Stop()
		}
	}

	// Stop: no more claims; let handlers finish, then cancel them.
	grace := clock.NewTimer(cfg.ShutdownGrace)
	defer grace.Stop()
	allDone := make(chan struct{})
	go func() { handlers.Wait(); close(allDone) }()
	hb := clock.NewTimer(cfg.Lease / 3)
	defer hb.Stop()
	// Wait for every handler goroutine (not only the runs in running: a
	// handler past its timeout whose run was rescued and claimed again
	// here is no longer there).
	var abandonC <-chan time.Time // after the grace: the handlers' last lease
	for waiting := true; waiting; {
		select {
		case o := <-results:
			finish(o)
		case <-allDone:
			waiting = false
		case <-grace.C():
			log.Warn("lockgen: shutdown grace passed; cancelling running handlers", "running", live)
			cancelHandlers()
			abandon := clock.NewTimer(cfg.Lease)
			defer abandon.Stop()
			abandonC = abandon.C()
		case <-abandonC:
			log.Error("lockgen: handlers ignore their cancelled context; stopping without them, their runs will be rescued and run again", "running", live)
			waiting = false
		case <-hb.C():
			hb.Reset(w.heartbeat(context.WithoutCancel(ctx), running, rec.claims(), &heartbeatFailures))
		}
	}
	for drained := false; !drained; { // outcomes already delivered
		select {
		case o := <-results:
			finish(o)
		default:
			drained = true
		}
	}
	rec.close()
	// Keep the unrecorded runs claimed while the recorder's last rounds go.
	for recording := true; recording; {
		select {
		case <-recDone:
			recording = false
		case <-hb.C():
			hb.Reset(w.heartbeat(context.WithoutCancel(ctx), nil, rec.claims(), &heartbeatFailures))
		}
	}
	return nil
}

// claim claims up to limit runs. It is not cut by ctx: a claim committed
// after a cut would leave its runs running without a handler until their
// lease passed.
// The caller holds gate; claim gives it back (also on a panic) and
// reports whether other workers skipped their claims meanwhile.
func (w *Worker) claim(ctx context.Context, gate *claimGate, limit int) (runs []Run, othersSkipped bool, err error) {
	defer func() { othersSkipped = gate.leave() }()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Lease)
	defer cancel()
	runs, err = w.jobs.store.RunsClaim(cctx, w.cfg.Queue, w.jobs.client.owner, limit, w.cfg.Lease)
	return runs, false, err
}

// handle runs r's handler, turning a panic into an error.
func (w *Worker) handle(ctx context.Context, r *Run) (err error) {
	h, ok := w.cfg.Handlers[r.Job]
	if !ok {
		return fmt.Errorf("no handler for job %q on worker %s", r.Job, w.jobs.client.owner)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	if l := w.singletons[r.Job]; l != nil {
		started := false
		err = l.With(ctx, "", func(ctx context.Context, _ *Lease) error {
			started = true
			return h.Handle(ctx, r)
		})
		if !started && errors.Is(err, ErrNotAcquired) {
			return errSingletonBusy // the handler's own errors are failures
		}
	} else {
		err = h.Handle(ctx, r)
	}
	if err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Finished, but past its timeout: count it (the handler may have
		// ignored its context).
		return nil
	}
	return err
}

// heartbeat extends the deadline of the running runs that are still within
// their timeout plus one lease (a run stuck past that is left to be
// rescued) and of the finished runs whose outcomes wait to be recorded
// (unrecorded), and moves the local deadline of each running run it
// extended. A batch the database extends only in part is heartbeated run
// by run: a run whose claim is gone (it was rescued) has its handler told
// at once. Each statement is bounded by statementTimeout, so a heartbeat
// stuck on a half-open connection neither freezes the worker nor outlives
// the runs' local deadlines. It returns when to heartbeat next: Lease/3,
// or sooner after a failure. failures counts the heartbeats in a row that
// failed, for the log.
func (w *Worker) heartbeat(ctx context.Context, running map[int64]*active, unrecorded []driver.Claim, failures *int) (next time.Duration) {
	clock := w.jobs.client.clock
	lease := w.cfg.Lease
	now := clock.Now()
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
	// beat heartbeats claims (owned by owners) in one statement and
	// reports how many it extended.
	beat := func(claims []driver.Claim, owners []*active) (int64, error) {
		sent := clock.Now()
		sctx, cancel := context.WithTimeout(ctx, w.statementTimeout())
		defer cancel()
		n, err := w.jobs.store.RunsHeartbeat(sctx, claims, lease)
		if err == nil && int(n) == len(claims) {
			for _, a := range owners {
				if a != nil {
					a.lease.extend(sent, lease)
				}
			}
		}
		return n, err
	}
	for len(claims) > 0 && ctx.Err() == nil {
		k := min(len(claims), 500)
		n, err := beat(claims[:k], owners[:k])
		if err != nil {
			if !failed {
				failed = true
				*failures++
			}
			if ctx.Err() == nil {
				warnUnlessTransient(w.jobs.client.logger, "lockgen: run heartbeat failed", err, *failures, "queue", w.cfg.Queue, "runs", k)
			}
			next = w.heartbeatRetry()
		} else if int(n) < k {
			// Some claims are gone: find which, one by one.
			for i := 0; i < k && ctx.Err() == nil; i++ {
				one, err := beat(claims[i:i+1], owners[i:i+1])
				switch a := owners[i]; {
				case err != nil:
					next = w.heartbeatRetry()
				case one == 0 && a != nil:
					a.gone = true
					a.lease.lose(fmt.Errorf("%w: run %d of job %q was rescued: its deadline passed before a heartbeat reached the database", ErrLeaseLost, a.run.ID, a.run.Job), false)
				}
			}
		}
		claims, owners = claims[k:], owners[k:]
	}
	if !failed {
		*failures = 0
	}
	return next
}

// statementTimeout bounds each heartbeat statement: a sixth of the lease,
// so that after one stuck on a half-open connection the next, sent on a
// fresh connection, still lands before the runs' local deadlines.
func (w *Worker) statementTimeout() time.Duration { return w.cfg.Lease / 6 }

// heartbeatRetry is the wait before the next heartbeat after a failed one.
func (w *Worker) heartbeatRetry() time.Duration { return w.cfg.Lease / 12 }

// rescue makes the runs of dead workers due again. Each round is bounded by
// the lease. failures counts the rescues in a row that failed, for the log.
func (w *Worker) rescue(ctx context.Context, failures *int) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, w.cfg.Lease)
		n, err := w.jobs.store.RunsRescue(sctx, rescueLimit)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				*failures++
				warnUnlessTransient(w.jobs.client.logger, "lockgen: rescuing runs failed", err, *failures)
			}
			return
		}
		*failures = 0
		if n > 0 {
			w.jobs.client.logger.Info("lockgen: rescued runs of stopped workers", "runs", n)
		}
		if n < rescueLimit {
			return
		}
	}
}

// backoff is the delay before attempt+1 of a run of job.
func (w *Worker) backoff(job string, attempt int) time.Duration {
	h := w.cfg.Handlers[job]
	initial, maxD := h.BackoffInitial, h.BackoffMax
	if initial <= 0 {
		initial = time.Second
	}
	if maxD <= 0 {
		maxD = time.Hour
	}
	d := initial
	for i := 1; i < attempt && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	half := d / 2
	return half + rand.N(half+1)
}
