package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
)

// active is one attempt being handled.
type active struct {
	run *Run
	// claim, job and timeout are copied from run when the handler starts:
	// the heartbeater reads them while the handler may change *run.
	claim   driver.Claim
	job     string
	timeout time.Duration
	started time.Time
	// lease ends the handler's context when the run's lease may be lost.
	lease *runLease
	// gone: a heartbeat showed the run no longer has this claim (it was
	// rescued); it is not heartbeated again. Only the heartbeater uses it.
	gone bool
}

// outcome is the result of one attempt.
type outcome struct {
	run *Run
	err error
}

// executor runs the handlers of a worker's claimed runs, each in its own
// goroutine under the run's timeout and run lease (which cancels the
// handler's context when the lease may be lost), and delivers their
// outcomes on results. Only the worker's loop calls its methods.
type executor struct {
	w       *Worker
	log     *slog.Logger
	results chan outcome
	// returned closes when the worker returns, so that a handler left
	// behind (it ignored its cancelled context) does not block on results.
	returned chan struct{}
	// mu guards running and released, which the heartbeater reads.
	mu sync.Mutex
	// running are the attempts being handled, by run ID: from the start
	// of the handler until the worker loop has handed its outcome to the
	// completer (finish).
	running map[int64]*active
	// released: the worker stopped waiting for the handlers (drain); their
	// runs are no longer heartbeated.
	released bool
	// live counts the handler goroutines that have not delivered their
	// outcome: more than len(running) when a stuck handler's run was
	// rescued and claimed again here. Free slots count live handlers.
	live     int
	handlers sync.WaitGroup
	// base is the handlers' parent context: it ends only by cancel, not
	// with the worker's context, so that shutdown can give them a grace.
	base   context.Context
	cancel context.CancelFunc
}

func newExecutor(ctx context.Context, w *Worker, log *slog.Logger) *executor {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &executor{
		w: w, log: log,
		results:  make(chan outcome, w.cfg.Concurrency),
		returned: make(chan struct{}),
		running:  map[int64]*active{},
		base:     base, cancel: cancel,
	}
}

// free is how many more handlers may start.
func (e *executor) free() int { return e.w.cfg.Concurrency - e.live }

// start starts r's handler; sent is when its claim was sent, from which
// its run lease counts.
func (e *executor) start(r *Run, sent time.Time) {
	clock := e.w.jobs.clock
	tctx, cancel := context.WithTimeout(e.base, r.Timeout)
	lease := newRunLease(tctx, clock, r, sent, e.w.cfg.Lease, func(cause error) {
		if errors.Is(cause, ErrCancelled) {
			e.log.Info("lockgen: a running run was cancelled by an operator; its handler's context is cancelled", "job", r.Job, "run_id", r.ID, "attempt", r.Attempt)
			return
		}
		e.log.Warn("lockgen: a running run's lease may be lost; its handler's context is cancelled", "job", r.Job, "run_id", r.ID, "attempt", r.Attempt, "cause", cause) // e.log says the queue
	})
	a := &active{run: r, claim: driver.Claim{ID: r.ID, Claim: r.Claim}, job: r.Job, timeout: r.Timeout, started: clock.Now(), lease: lease}
	e.mu.Lock()
	e.running[r.ID] = a
	e.mu.Unlock()
	e.live++
	e.handlers.Add(1)
	obs, queue := e.w.jobs.obs, e.w.cfg.Queue
	obs.Started(r.Job, queue, r.Attempt, a.started.Sub(r.RunAt))
	go func() {
		defer e.handlers.Done()
		defer cancel()
		defer lease.stop()
		o := outcome{run: r, err: e.w.jobs.workThrough(lease.ctx, r, func(ctx context.Context) error { return e.w.handle(ctx, r) })}
		took := clock.Now().Sub(a.started)
		obs.Finished(r.Job, queue, r.Attempt, outcomeOf(lease.ctx, r, o.err), took)
		if took > r.Timeout {
			e.log.Warn("lockgen: a handler returned after its timeout: it ignored its cancelled context", "job", r.Job,
				"run_id", r.ID, "attempt", r.Attempt, "timeout", r.Timeout, "overrun", took-r.Timeout)
		}
		select {
		case e.results <- o:
		case <-e.returned:
		}
	}()
}

// finish takes o, delivered on results, off the running attempts. The
// caller hands o to the completer first, so that the heartbeater, which
// reads the running attempts before the completer's, always finds a run
// whose outcome is not recorded yet in one of them.
func (e *executor) finish(o outcome) {
	e.live--
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.running[o.run.ID]; ok && a.claim.Claim == o.run.Claim {
		delete(e.running, o.run.ID)
	}
}

// handOff hands o, delivered on results, to comp and finishes it.
func (e *executor) handOff(o outcome, comp *completer) {
	comp.add(o)
	e.finish(o)
}

// ready returns o and every other outcome already delivered: the next
// claim then fills all the freed slots in one statement instead of one
// each. The caller hands each off.
func (e *executor) ready(o outcome) []outcome {
	done := []outcome{o}
	for {
		select {
		case o := <-e.results:
			done = append(done, o)
		default:
			return done
		}
	}
}

// held returns the attempts being handled, for the heartbeater: none once
// released.
func (e *executor) held() []*active {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.released {
		return nil
	}
	held := make([]*active, 0, len(e.running))
	for _, a := range e.running {
		held = append(held, a)
	}
	return held
}

// holds reports whether c is the claim of an attempt being handled (and
// not released).
func (e *executor) holds(c driver.Claim) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.running[c.ID]
	return ok && !e.released && a.claim == c
}

// release stops the heartbeats of the runs still being handled: the worker
// stops without them (drain), and they are rescued after their lease.
func (e *executor) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.released = true
}

// allDone closes when every handler goroutine has returned (not only the
// runs in running: a handler past its timeout whose run was rescued and
// claimed again here is no longer there).
func (e *executor) allDone() <-chan struct{} {
	ch := make(chan struct{})
	go func() { e.handlers.Wait(); close(ch) }()
	return ch
}

// close cancels the handlers still running and lets any left behind
// return without delivering their outcome.
func (e *executor) close() {
	e.cancel()
	close(e.returned)
}

// handle runs r's handler, turning a panic into an error. A singleton
// job's handler runs under its lock; errSingletonBusy when another node
// holds it.
func (w *Worker) handle(ctx context.Context, r *Run) (err error) {
	h, ok := w.cfg.Handlers[r.Job]
	if !ok {
		return w.noHandler(r)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	if l := w.singletons[r.Job]; l != nil {
		started := false
		err = l.With(ctx, "", func(ctx context.Context, _ *runtime.Lease) error {
			started = true
			return h.Handle(ctx, r)
		})
		if !started && errors.Is(err, runtime.ErrNotAcquired) {
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

// noHandler is the failure of a run whose job has no handler in this
// worker's queue: in the wrong queue when the node declares the job in
// another one (enqueued by hand or by another program, or before the job
// moved queues), else a job the node does not know.
func (w *Worker) noHandler(r *Run) error {
	if q, ok := w.declared[r.Job]; ok && q != w.cfg.Queue {
		return fmt.Errorf("run %d of job %q is in queue %q, but job %q is declared in queue %q: the run was enqueued in the wrong queue "+
			"(by hand, by another program, or before the job moved to queue %q), and the workers of queue %q have no handler for it; enqueue it again in queue %q",
			r.ID, r.Job, w.cfg.Queue, r.Job, q, q, w.cfg.Queue, q)
	}
	return fmt.Errorf("no handler for job %q in queue %q on worker %s: this node declares no such job (a run enqueued by another application on the same tables, or by another version of this one?)",
		r.Job, w.cfg.Queue, w.jobs.owner)
}
