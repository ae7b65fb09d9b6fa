package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"time"
)

// JobFunc handles one attempt of a run. Returning nil completes the run;
// an error (or a panic) fails the attempt: the run is retried after a
// backoff, or discarded when it has no attempts left. ctx is cancelled at
// the run's timeout and when the worker stops hard.
type JobFunc func(ctx context.Context, run *Run) error

// JobHandler is how a worker runs one job.
type JobHandler struct {
	// Handle runs an attempt. Required.
	Handle JobFunc
	// BackoffInitial and BackoffMax bound the retry delay: attempt n
	// waits BackoffInitial·2^(n-1), at most BackoffMax, with jitter (in
	// [d/2, d]). Defaults 1s and 1h.
	BackoffInitial, BackoffMax time.Duration
	// Singleton makes at most one run of the job run at a time across the
	// cluster: each attempt holds the lease lock "lockgen_job:<job>" (TTL
	// the worker's Lease, renewed while it runs; the handler's ctx is
	// cancelled if it is lost). A run claimed while another holds the lock
	// is given back, due again after SingletonRetry, without counting the
	// attempt.
	Singleton bool
}

// SingletonRetry is how long a singleton job's run waits when its lock was
// held elsewhere when it was claimed.
const SingletonRetry = 500 * time.Millisecond

// errSingletonBusy marks an attempt that did not start: the job's
// singleton lock is held elsewhere.
var errSingletonBusy = errors.New("lockgen: the singleton job runs elsewhere")

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Queue is the queue the worker claims from; default DefaultQueue.
	Queue string
	// Handlers maps job names to handlers. A claimed run of a job without
	// a handler fails (and is retried, in case a node that has it claims
	// it next).
	Handlers map[string]JobHandler
	// Concurrency is how many handlers run at once; default 100.
	Concurrency int
	// ClaimBatch is the most runs one claim statement takes; default
	// min(Concurrency, 100).
	ClaimBatch int
	// Lease is how long a claimed run stays claimed by the database clock
	// without a heartbeat; heartbeats come every Lease/3. A run whose
	// worker died is rescued about one Lease later. Default 30s.
	Lease time.Duration
	// PollMin and PollMax bound the idle poll interval, which doubles
	// while the queue is empty; a local enqueue wakes the worker at once.
	// Defaults 50ms and 2s.
	PollMin, PollMax time.Duration
	// CompleteBatch is the most completions one statement records, and
	// CompleteEvery the longest a completion waits to be batched.
	// Defaults 100 and 20ms.
	CompleteBatch int
	CompleteEvery time.Duration
	// RescueEvery is how often the worker rescues runs of dead workers
	// (any node's); default Lease/2. Negative: never.
	RescueEvery time.Duration
	// ShutdownGrace is how long Run, once ctx ends, lets running handlers
	// finish before it cancels their contexts; default 30s.
	ShutdownGrace time.Duration
}

// Worker claims and runs due runs of one queue. Start it with Run.
type Worker struct {
	jobs *Jobs
	cfg  WorkerConfig
	// singletons are the locks of the Singleton jobs, by job.
	singletons map[string]*Lock
}

// NewWorker validates cfg, applies its defaults and returns the worker.
func (j *Jobs) NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if len(cfg.Handlers) == 0 {
		return nil, fmt.Errorf("%w: worker of queue %q has no handlers", ErrInvalid, cfg.Queue)
	}
	for name, h := range cfg.Handlers {
		if h.Handle == nil {
			return nil, fmt.Errorf("%w: job %q has a nil handler", ErrInvalid, name)
		}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 100
	}
	if cfg.ClaimBatch <= 0 {
		cfg.ClaimBatch = min(cfg.Concurrency, 100)
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.PollMin <= 0 {
		cfg.PollMin = 50 * time.Millisecond
	}
	if cfg.PollMax < cfg.PollMin {
		cfg.PollMax = max(2*time.Second, cfg.PollMin)
	}
	if cfg.CompleteBatch <= 0 {
		cfg.CompleteBatch = 100
	}
	if cfg.CompleteEvery <= 0 {
		cfg.CompleteEvery = 20 * time.Millisecond
	}
	if cfg.RescueEvery == 0 {
		cfg.RescueEvery = cfg.Lease / 2
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	w := &Worker{jobs: j, cfg: cfg, singletons: map[string]*Lock{}}
	for name, h := range cfg.Handlers {
		if !h.Singleton {
			continue
		}
		l, err := j.client.Lock(LockConfig{Name: "lockgen_job:" + name, TTL: max(cfg.Lease, MinTTL)})
		if err != nil {
			return nil, fmt.Errorf("job %q: singleton lock: %w", name, err)
		}
		w.singletons[name] = l
	}
	return w, nil
}

// active is one attempt being handled.
type active struct {
	run     *Run
	started time.Time
	cancel  context.CancelFunc
}

// outcome is the result of one attempt.
type outcome struct {
	run *Run
	err error
}

// rescueLimit bounds the runs one rescue statement changes.
const rescueLimit = 1000

// Run claims and handles runs until ctx ends, then stops claiming, lets
// running handlers finish for up to ShutdownGrace, cancels the rest,
// records every outcome it has and returns nil. Database errors are logged
// and retried with backoff, never fatal: a run whose outcome could not be
// recorded stays claimed until its lease passes and is then rescued and run
// again (at least once).
func (w *Worker) Run(ctx context.Context) error {
	cfg := w.cfg
	client := w.jobs.client
	clock := client.clock
	log := client.logger.With("queue", cfg.Queue)
	wake, unlisten := w.jobs.listen(cfg.Queue)
	gate := w.jobs.gate(cfg.Queue)
	defer unlisten()

	results := make(chan outcome, cfg.Concurrency)
	rec := newRecorder(w)
	recDone := make(chan struct{})
	go func() { defer close(recDone); rec.loop() }()

	running := map[int64]*active{}
	var handlers sync.WaitGroup
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()

	start := func(r *Run) {
		hctx, cancel := context.WithTimeout(handlerCtx, r.Timeout)
		running[r.ID] = &active{run: r, started: clock.Now(), cancel: cancel}
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer cancel()
			results <- outcome{run: r, err: w.handle(hctx, r)}
		}()
	}
	finish := func(o outcome) {
		if a, ok := running[o.run.ID]; ok && a.run.Claim == o.run.Claim {
			delete(running, o.run.ID)
		}
		rec.add(o)
	}

	poll := cfg.PollMin
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
		claimed, gateBusy := 0, false
		if free := cfg.Concurrency - len(running); free > 0 && !gate.tryEnter() {
			gateBusy = true // another worker here is claiming; it wakes us
		} else if free > 0 {
			limit := min(free, cfg.ClaimBatch)
			// Not cut by ctx: a claim committed after a cut would leave
			// its runs running without a handler until their lease passed.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Lease)
			runs, err := w.jobs.store.RunsClaim(cctx, cfg.Queue, client.owner, limit, cfg.Lease)
			cancel()
			if gate.leave() {
				w.jobs.wake(cfg.Queue)
			}
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("lockgen: claiming runs failed", "error", err)
				poll = min(poll*2, cfg.PollMax)
			case err == nil:
				for i := range runs {
					start(&runs[i])
				}
				claimed = len(runs)
				if claimed > 0 {
					poll = cfg.PollMin
				}
			}
		}
		if claimed > 0 && cfg.Concurrency-len(running) > 0 {
			continue
		}
		var idle Timer
		var idleC <-chan time.Time
		if claimed == 0 {
			idle = clock.NewTimer(poll + rand.N(poll/4+1))
			idleC = idle.C()
			if !gateBusy {
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
			w.heartbeat(ctx, running)
			heartbeat.Reset(cfg.Lease / 3)
		case <-rescueC:
			w.rescue(ctx)
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
	for len(running) > 0 {
		select {
		case o := <-results:
			finish(o)
		case <-grace.C():
			log.Warn("lockgen: shutdown grace passed; cancelling running handlers", "running", len(running))
			cancelHandlers()
		case <-hb.C():
			w.heartbeat(context.WithoutCancel(ctx), running)
			hb.Reset(cfg.Lease / 3)
		}
	}
	<-allDone
	rec.close()
	<-recDone
	return nil
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
// their timeout plus one lease; a run stuck past that is left to be
// rescued.
func (w *Worker) heartbeat(ctx context.Context, running map[int64]*active) {
	if len(running) == 0 {
		return
	}
	now := w.jobs.client.clock.Now()
	claims := make([]Claim, 0, len(running))
	for _, a := range running {
		if now.Sub(a.started) < a.run.Timeout+w.cfg.Lease {
			claims = append(claims, Claim{ID: a.run.ID, Claim: a.run.Claim})
		}
	}
	for len(claims) > 0 {
		n := min(len(claims), 500)
		if _, err := w.jobs.store.RunsHeartbeat(ctx, claims[:n], w.cfg.Lease); err != nil && ctx.Err() == nil {
			w.jobs.client.logger.Warn("lockgen: run heartbeat failed", "queue", w.cfg.Queue, "runs", n, "error", err)
		}
		claims = claims[n:]
	}
}

// rescue makes the runs of dead workers due again.
func (w *Worker) rescue(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := w.jobs.store.RunsRescue(ctx, rescueLimit)
		if err != nil {
			if ctx.Err() == nil {
				w.jobs.client.logger.Warn("lockgen: rescuing runs failed", "error", err)
			}
			return
		}
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

// recorder records outcomes: completions in batches, failures one by one,
// each retried with backoff while the database fails (a run whose outcome
// cannot be recorded is rescued later, never lost).
type recorder struct {
	w  *Worker
	in chan outcome
}

func newRecorder(w *Worker) *recorder {
	return &recorder{w: w, in: make(chan outcome, w.cfg.CompleteBatch*4)}
}

func (r *recorder) add(o outcome) { r.in <- o }
func (r *recorder) close()        { close(r.in) }

func (r *recorder) loop() {
	cfg := r.w.cfg
	clock := r.w.jobs.client.clock
	var batch []Claim
	var flushC <-chan time.Time
	var flushT Timer
	flush := func() {
		if len(batch) > 0 {
			r.complete(batch)
			batch = batch[:0]
		}
		if flushT != nil {
			flushT.Stop()
			flushT, flushC = nil, nil
		}
	}
	for {
		select {
		case o, ok := <-r.in:
			if !ok {
				flush()
				return
			}
			if errors.Is(o.err, errSingletonBusy) {
				r.snooze(o)
				continue
			}
			if o.err != nil {
				r.fail(o)
				continue
			}
			batch = append(batch, Claim{ID: o.run.ID, Claim: o.run.Claim})
			if len(batch) >= cfg.CompleteBatch {
				flush()
			} else if flushT == nil {
				flushT = clock.NewTimer(cfg.CompleteEvery)
				flushC = flushT.C()
			}
		case <-flushC:
			flushT, flushC = nil, nil
			flush()
		}
	}
}

// recordTries bounds the attempts to record one outcome.
const recordTries = 5

func (r *recorder) complete(claims []Claim) {
	log := r.w.jobs.client.logger
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.w.cfg.Lease)
		n, err := r.w.jobs.store.RunsComplete(ctx, claims)
		cancel()
		if err == nil {
			if int(n) < len(claims) {
				log.Info("lockgen: runs completed after they were rescued; their new attempts go on", "runs", len(claims)-int(n))
			}
			return
		}
		if try == recordTries {
			log.Error("lockgen: could not record completed runs; they will be rescued and run again", "runs", len(claims), "error", err)
			return
		}
		time.Sleep(time.Duration(try) * 50 * time.Millisecond)
	}
}

// snooze gives back a run whose singleton lock was held elsewhere.
func (r *recorder) snooze(o outcome) {
	c := Claim{ID: o.run.ID, Claim: o.run.Claim}
	delay := SingletonRetry/2 + rand.N(SingletonRetry/2+1)
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.w.cfg.Lease)
		_, err := r.w.jobs.store.RunSnooze(ctx, c, delay)
		cancel()
		if err == nil || try == recordTries {
			if err != nil {
				r.w.jobs.client.logger.Error("lockgen: could not give back a singleton run; it will be rescued", "run", o.run.ID, "error", err)
			}
			return
		}
		time.Sleep(time.Duration(try) * 50 * time.Millisecond)
	}
}

func (r *recorder) fail(o outcome) {
	log := r.w.jobs.client.logger
	text := o.err.Error()
	if len(text) > 60000 {
		text = text[:60000]
	}
	c := Claim{ID: o.run.ID, Claim: o.run.Claim}
	backoff := r.w.backoff(o.run.Job, o.run.Attempt)
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.w.cfg.Lease)
		_, err := r.w.jobs.store.RunFail(ctx, c, text, backoff)
		cancel()
		if err == nil {
			log.Info("lockgen: run failed", "job", o.run.Job, "run", o.run.ID, "attempt", o.run.Attempt, "error", o.err)
			return
		}
		if try == recordTries {
			log.Error("lockgen: could not record a failed run; it will be rescued and run again", "run", o.run.ID, "error", err)
			return
		}
		time.Sleep(time.Duration(try) * 50 * time.Millisecond)
	}
}

// ClaimRef is the "<id>:<claim>" form of c that the runs table's claim_ref
// column holds.
func (c Claim) ClaimRef() string {
	return strconv.FormatInt(c.ID, 10) + ":" + strconv.FormatInt(c.Claim, 10)
}
