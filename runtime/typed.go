package runtime

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// EnqueueOption changes one enqueued run (generated Enqueue<Job> methods
// take them).
type EnqueueOption func(*NewRun)

// Delay makes the run due d after the database clock's now.
func Delay(d time.Duration) EnqueueOption { return func(r *NewRun) { r.Delay = d } }

// RunAt makes the run due at t, read by the client's clock (a run at a
// past t is due at once).
func RunAt(t time.Time) EnqueueOption {
	return func(r *NewRun) { r.Delay = max(time.Until(t), 0) }
}

// WithPriority sets the run's priority (-100 to 100, higher runs first).
func WithPriority(p int) EnqueueOption { return func(r *NewRun) { r.Priority = p } }

// WithUniqueKey makes the enqueue return the existing run while an
// unfinished run of the job has key.
func WithUniqueKey(key string) EnqueueOption { return func(r *NewRun) { r.UniqueKey = key } }

// WithMaxAttempts overrides the job's declared max attempts.
func WithMaxAttempts(n int) EnqueueOption { return func(r *NewRun) { r.MaxAttempts = n } }

// EnqueueArgs enqueues a run of base's job with args as its JSON arguments
// and opts applied (in tx when not nil); see Jobs.Enqueue.
func EnqueueArgs[T any](ctx context.Context, j *Jobs, tx *sql.Tx, base NewRun, args T, opts ...EnqueueOption) (int64, error) {
	r, err := withArgs(base, args, opts)
	if err != nil {
		return 0, err
	}
	return j.Enqueue(ctx, tx, r)
}

// EnqueueArgsMany enqueues one run of base's job per element of args, with
// opts applied to each; see Jobs.EnqueueMany.
func EnqueueArgsMany[T any](ctx context.Context, j *Jobs, tx *sql.Tx, base NewRun, args []T, opts ...EnqueueOption) error {
	runs := make([]NewRun, len(args))
	for i, a := range args {
		var err error
		if runs[i], err = withArgs(base, a, opts); err != nil {
			return err
		}
	}
	return j.EnqueueMany(ctx, tx, runs)
}

func withArgs[T any](base NewRun, args T, opts []EnqueueOption) (NewRun, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return NewRun{}, fmt.Errorf("%w: job %q: encode args: %w", ErrInvalid, base.Job, err)
	}
	if err := checkEncodedArgs(b); err != nil {
		return NewRun{}, fmt.Errorf("%w: job %q: %w", ErrInvalid, base.Job, err)
	}
	base.Args = b
	for _, o := range opts {
		if o != nil {
			o(&base)
		}
	}
	return base, nil
}

// checkEncodedArgs refuses arguments that encoding/json did not encode as
// they are: a string that is not valid UTF-8 comes out with \ufffd in
// place of each bad byte (the handler would get other bytes than were
// enqueued), and raw JSON (json.RawMessage, a MarshalJSON method) is passed
// on as it is, bad bytes included, which a server in strict mode rejects
// and one without cuts short. The encoder writes a valid U+FFFD as itself,
// so an escaped one comes from a bad byte (or from raw JSON that spells
// it so, which is refused too).
func checkEncodedArgs(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("the arguments' JSON is not valid UTF-8")
	}
	// In JSON, a backslash only ever starts an escape inside a string.
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+6 <= len(b) && b[i+1] == 'u' && strings.EqualFold(string(b[i+2:i+6]), "fffd") {
			return errors.New("an argument holds a string that is not valid UTF-8 (JSON would carry U+FFFD in place of its bytes)")
		}
		i++ // the escaped character
	}
	return nil
}

// HandleArgs adapts a handler that takes typed arguments: it decodes the
// run's JSON arguments into T. Arguments that do not decode as T (written
// by another version of the application, or by hand) fail the attempt
// without running fn, with an error naming the job and the run; the run is
// retried like any failed attempt (a node that decodes them may claim it)
// and discarded, with that error kept, once out of attempts.
func HandleArgs[T any](fn func(ctx context.Context, run *Run, args T) error) JobFunc {
	return func(ctx context.Context, run *Run) error {
		var args T
		if len(run.Args) > 0 {
			if err := json.Unmarshal(run.Args, &args); err != nil {
				return fmt.Errorf("decode args of job %q run %d: %w", run.Job, run.ID, err)
			}
		}
		return fn(ctx, run, args)
	}
}

// QueueConfig is one queue a node works.
type QueueConfig struct {
	// Name is the queue's name; Concurrency the handlers at once on this
	// node (WorkerConfig.Concurrency).
	Name        string
	Concurrency int
}

// Retention is how long one job's finished runs are kept.
type Retention struct {
	Job   string
	Keep  time.Duration
	Limit int // rows per prune statement; default 1000
}

// NodeConfig is everything one node runs for the declared jobs.
type NodeConfig struct {
	// Queues are worked by one Worker each; every queue of Handlers' jobs
	// must be listed.
	Queues []QueueConfig
	// Handlers maps every job to its handler and the queue it is in.
	Handlers map[string]QueuedHandler
	// Scheduled are the scheduled jobs. A job's Retention, when zero, is
	// taken from its entry in Retention (the shortest Keep if several).
	Scheduled []ScheduledJob
	// Retention prunes finished runs, every PruneEvery (default 10m).
	Retention  []Retention
	PruneEvery time.Duration
	// Worker is the template of every queue's WorkerConfig (Queue,
	// Handlers and Concurrency are set per queue).
	Worker WorkerConfig
}

// QueuedHandler is a JobHandler and its job's queue.
type QueuedHandler struct {
	Queue string
	JobHandler
}

// RunNode runs cfg's workers, scheduler and pruning until ctx ends, then
// stops them gracefully (see Worker.Run) and returns nil; it fails at once
// with ErrInvalid on a bad configuration.
func (j *Jobs) RunNode(ctx context.Context, cfg NodeConfig) error {
	byQueue := map[string]map[string]JobHandler{}
	for _, q := range cfg.Queues {
		byQueue[q.Name] = map[string]JobHandler{}
	}
	for job, h := range cfg.Handlers {
		hs, ok := byQueue[h.Queue]
		if !ok {
			return fmt.Errorf("%w: job %q is in queue %q, which is not configured", ErrInvalid, job, h.Queue)
		}
		hs[job] = h.JobHandler
	}
	var workers []*Worker
	for _, q := range cfg.Queues {
		if len(byQueue[q.Name]) == 0 {
			continue
		}
		wc := cfg.Worker
		wc.Queue, wc.Handlers, wc.Concurrency = q.Name, byQueue[q.Name], q.Concurrency
		w, err := j.NewWorker(wc)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	var sched *Scheduler
	if len(cfg.Scheduled) > 0 {
		scheduled := slices.Clone(cfg.Scheduled)
		for i := range scheduled {
			if scheduled[i].Retention == 0 {
				scheduled[i].Retention = retentionOf(cfg.Retention, scheduled[i].Name)
			}
		}
		var err error
		if sched, err = j.NewScheduler(scheduled); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(workers)+1)
	run := func(fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				errs <- err
			}
		}()
	}
	for _, w := range workers {
		run(w.Run)
	}
	if sched != nil {
		run(sched.Run)
	}
	if len(cfg.Retention) > 0 {
		run(func(ctx context.Context) error { j.pruneLoop(ctx, cfg.Retention, cfg.PruneEvery); return nil })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
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

// pruneLoop prunes each job's finished runs every `every` until ctx ends.
func (j *Jobs) pruneLoop(ctx context.Context, rs []Retention, every time.Duration) {
	if every <= 0 {
		every = 10 * time.Minute
	}
	for sleepOrWake(ctx, j.client.clock, every, nil) == nil {
		for _, r := range rs {
			limit := r.Limit
			if limit <= 0 {
				limit = 1000
			}
			if _, err := j.Prune(ctx, r.Job, r.Keep, limit); err != nil && ctx.Err() == nil {
				j.client.logger.Warn("lockgen: pruning runs failed", "job", r.Job, "error", err)
			}
		}
	}
}
