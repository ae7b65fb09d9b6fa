package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/probe"
)

// JobFunc handles one attempt of a run. Returning nil completes the run;
// an error (or a panic) fails the attempt: the run is retried after a
// backoff, or discarded when it has no attempts left. ctx is cancelled at
// the run's timeout, when the worker stops hard, and, with a cause wrapping
// ErrLeaseLost, when the run's lease may be lost: no heartbeat reached the
// database within Lease − Lease/10 of the last one (or of the claim), or a
// heartbeat found the run rescued. That happens before the run's deadline
// in the database passes, so a handler is told before another worker can
// rescue its run and start it again; a handler that goes on anyway may
// overlap with that new attempt.
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
	// without a heartbeat; heartbeats come every Lease/3 (each statement
	// bounded by Lease/6, retried after Lease/12 when it fails). A run
	// whose worker died is rescued about one Lease later; a handler whose
	// worker could not heartbeat for Lease − Lease/10 has its context
	// cancelled (ErrLeaseLost) before that. Default 30s.
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
	// finish before it cancels their contexts; default
	// DefaultShutdownGrace. Handlers that
	// still run one Lease after that are left behind: Run returns, and
	// their runs are rescued and run again.
	ShutdownGrace time.Duration
}

// WorkerOption changes a WorkerConfig: the generated RunJobs applies its
// options to NodeConfig.Worker, the template of every queue's worker.
type WorkerOption func(*WorkerConfig)

// DefaultShutdownGrace is the default of WorkerConfig.ShutdownGrace.
const DefaultShutdownGrace = 30 * time.Second

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
		cfg.ShutdownGrace = DefaultShutdownGrace
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

// recorder records outcomes: completions in batches, failures and
// give-backs one by one. add never blocks the worker loop. An outcome stays
// queued until it is recorded: while the database is unreachable, the
// recorder retries with backoff and the worker heartbeats the queued runs'
// claims (so a finished run is not rescued and run again just because its
// outcome could not be written yet) and claims no new runs once
// maxUnrecorded are queued. An outcome the server rejects (a MySQL error,
// not a lost connection) recordTries times is dropped, and so is every
// outcome still queued after close and recordTries more rounds: their runs
// stay running until their deadline passes and are rescued and run again
// (at least once).
type recorder struct {
	w      *Worker
	mu     sync.Mutex
	queue  []outcome
	closed bool
	signal chan struct{}
	// rejected counts the server's rejections per queued outcome; only
	// loop uses it.
	rejected map[*Run]int
}

func newRecorder(w *Worker) *recorder {
	return &recorder{w: w, signal: make(chan struct{}, 1), rejected: map[*Run]int{}}
}

// maxUnrecorded is how many outcomes may wait to be recorded before the
// worker stops claiming.
func (r *recorder) maxUnrecorded() int {
	return max(r.w.cfg.Concurrency, 4*r.w.cfg.CompleteBatch)
}

func (r *recorder) add(o outcome) {
	r.mu.Lock()
	r.queue = append(r.queue, o)
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) poke() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// unrecorded returns how many outcomes wait to be recorded.
func (r *recorder) unrecorded() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// claims returns the claims of the runs whose outcomes wait to be
// recorded, for the worker's heartbeat.
func (r *recorder) claims() []driver.Claim {
	r.mu.Lock()
	defer r.mu.Unlock()
	claims := make([]driver.Claim, len(r.queue))
	for i, o := range r.queue {
		claims[i] = driver.Claim{ID: o.run.ID, Claim: o.run.Claim}
	}
	return claims
}

func (r *recorder) loop() {
	cfg := r.w.cfg
	clock := r.w.jobs.client.clock
	log := r.w.jobs.client.logger
	var since time.Time // when the oldest queued outcome arrived
	failures := 0       // rounds in a row that ended on an error
	roundsClosed := 0   // failed rounds since close
	for {
		r.mu.Lock()
		items, closed := slices.Clone(r.queue), r.closed
		r.mu.Unlock()
		if len(items) == 0 {
			if closed {
				return
			}
			since = time.Time{}
			<-r.signal
			continue
		}
		if since.IsZero() {
			since = clock.Now()
		}
		// Let completions gather into a batch for up to CompleteEvery;
		// after a failure, back off.
		var wait time.Duration
		switch {
		case failures > 0:
			wait = min(time.Duration(1<<min(failures-1, 10))*50*time.Millisecond, max(cfg.Lease/4, 50*time.Millisecond))
		case !closed && len(items) < cfg.CompleteBatch:
			wait = cfg.CompleteEvery - clock.Now().Sub(since)
		}
		if wait > 0 {
			t := clock.NewTimer(wait)
			select {
			case <-t.C():
			case <-r.signal:
				if failures == 0 {
					t.Stop()
					continue // more outcomes, or closed: maybe flush now
				}
				r.poke() // backing off: keep the news for the next round
				<-t.C()
			}
		}
		done, err := r.record(items)
		r.mu.Lock()
		r.queue = slices.DeleteFunc(r.queue, func(o outcome) bool { return done[o.run] })
		left := len(r.queue)
		r.mu.Unlock()
		since = time.Time{}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		if closed {
			if roundsClosed++; roundsClosed >= recordTries {
				log.Error("lockgen: could not record the outcomes of finished runs before stopping; they will be rescued and run again", "queue", cfg.Queue, "runs", left, "error", err)
				return
			}
		}
		if failures == 1 || failures == transientTries || failures%10 == 0 {
			warnUnlessTransient(log, "lockgen: recording outcomes failed; retrying while heartbeating their runs", err, failures, "queue", cfg.Queue, "runs", left)
		}
	}
}

// recordTries is how often the server may reject an outcome, and how many
// failed rounds the recorder makes after close, before it gives up.
const recordTries = 5

// record writes items' outcomes and returns the ones it is done with
// (recorded, or given up after recordTries rejections) and the first
// error. A lost connection or a timeout ends the round at once: the
// statements after it would most likely wait as long.
func (r *recorder) record(items []outcome) (map[*Run]bool, error) {
	done := map[*Run]bool{}
	var firstErr error
	// settle notes the result of one statement for its outcomes and
	// reports whether the round may go on.
	settle := func(os []outcome, err error) bool {
		if err == nil {
			for _, o := range os {
				done[o.run] = true
				delete(r.rejected, o.run)
			}
			return true
		}
		if firstErr == nil {
			firstErr = err
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			return false
		}
		for _, o := range os {
			if r.rejected[o.run]++; r.rejected[o.run] >= recordTries {
				r.w.jobs.client.logger.Error("lockgen: the database rejects a run's outcome; the run will be rescued and run again", "job", o.run.Job, "run", o.run.ID, "error", err)
				done[o.run] = true
				delete(r.rejected, o.run)
			}
		}
		return true
	}
	var completed []outcome
	for _, o := range items {
		var err error
		switch {
		case errors.Is(o.err, errSingletonBusy):
			err = r.snooze(o)
		case o.err != nil:
			err = r.fail(o)
		default:
			completed = append(completed, o)
			continue
		}
		if !settle([]outcome{o}, err) {
			return done, firstErr
		}
	}
	for len(completed) > 0 {
		n := min(len(completed), r.w.cfg.CompleteBatch)
		if !settle(completed[:n], r.complete(completed[:n])) {
			return done, firstErr
		}
		completed = completed[n:]
	}
	return done, firstErr
}

// statement runs one recording statement, bounded by the lease.
func (r *recorder) statement(fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.w.cfg.Lease)
	defer cancel()
	return fn(ctx)
}

func (r *recorder) complete(items []outcome) error {
	claims := make([]driver.Claim, len(items))
	for i, o := range items {
		claims[i] = driver.Claim{ID: o.run.ID, Claim: o.run.Claim}
	}
	var n int64
	err := r.statement(func(ctx context.Context) (err error) {
		n, err = r.w.jobs.store.RunsComplete(ctx, claims)
		return err
	})
	if err == nil && int(n) < len(claims) {
		r.w.jobs.client.logger.Info("lockgen: runs completed after they were rescued; their new attempts go on", "runs", len(claims)-int(n))
	}
	return err
}

// snooze gives back a run whose singleton lock was held elsewhere.
func (r *recorder) snooze(o outcome) error {
	delay := SingletonRetry/2 + rand.N(SingletonRetry/2+1)
	return r.statement(func(ctx context.Context) error {
		_, err := r.w.jobs.store.RunSnooze(ctx, driver.Claim{ID: o.run.ID, Claim: o.run.Claim}, delay)
		return err
	})
}

func (r *recorder) fail(o outcome) error {
	text := errorText(o.err)
	backoff := r.w.backoff(o.run.Job, o.run.Attempt)
	err := r.statement(func(ctx context.Context) error {
		_, err := r.w.jobs.store.RunFail(ctx, driver.Claim{ID: o.run.ID, Claim: o.run.Claim}, text, backoff)
		return err
	})
	if err == nil {
		r.w.jobs.client.logger.Info("lockgen: run failed", "job", o.run.Job, "run", o.run.ID, "attempt", o.run.Attempt, "error", o.err)
	}
	return err
}

// maxErrorText bounds the error text kept with a run (the column is a TEXT).
const maxErrorText = 60000

// errorText is err's text as the runs table keeps it: valid UTF-8 (a
// strict server rejects anything else, and the outcome would never be
// recorded), cut at a character boundary to maxErrorText bytes.
func errorText(err error) string {
	text := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if len(text) > maxErrorText {
		n := maxErrorText
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n]
	}
	return text
}
