package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
	"github.com/lockgen/lockgen/runtime/probe"
)

// Run states, as stored in the runs table (see RunState).
const (
	RunAvailable = driver.RunAvailable
	RunRunning   = driver.RunRunning
	RunCompleted = driver.RunCompleted
	RunDiscarded = driver.RunDiscarded
	RunCancelled = driver.RunCancelled
	RunSkipped   = driver.RunSkipped
	RunOrphaned  = driver.RunOrphaned
)

// RunState is the state of a run: one of the Run* constants.
type RunState = driver.RunState

// DefaultQueue is the queue of a job that declares none.
const DefaultQueue = "default"

// Errors of the job API.
var (
	// ErrRunNotFound: no run has that ID (it may have been pruned).
	ErrRunNotFound = errors.New("lockgen: run not found")
	// ErrUniqueKeyTaken: Retry cannot restore a run because an unfinished
	// run of its job has the same unique key.
	ErrUniqueKeyTaken = errors.New("lockgen: an unfinished run has the same unique key")
)

// NewRun is a run to enqueue: its job, queue, priority, delay or tick,
// JSON arguments, attempts and timeout (see the fields' docs).
type NewRun = driver.NewRun

// Run is one claimed attempt of a run, as its handler sees it: the run's ID
// (the same across attempts), job, arguments, attempt number and claim.
type Run = driver.Run

// RunInfo is a run as stored: the Run and its state, worker, last error,
// deadline and finish time.
type RunInfo = driver.RunInfo

// Client enqueues and manages runs and starts workers and schedulers. It
// is safe for concurrent use.
type Client struct {
	// locks is the lock client of the same node: it checks the server and
	// takes the singleton jobs' locks.
	locks *runtime.Client
	store driver.JobStore
	owner string
	clock runtime.Clock
	log   *slog.Logger
	mu    sync.Mutex
	// workers are the local workers' wake-up channels per queue: a local
	// enqueue wakes them at once instead of waiting for their next poll.
	workers map[string][]chan struct{}
	// gates are the claim gates per queue of this node's workers.
	gates map[string]*claimGate
	// declared are the queues of WithQueues, sorted; empty: any queue.
	declared []string
	// pauses is the node's view of the paused queues.
	pauses pauses
	// obs hears of enqueues, claims, attempts and rescues.
	obs Observer
	// middleware wraps enqueues and attempts, outermost first.
	middleware []Middleware
}

// NewClient returns the job client of the node whose lock client is locks,
// over store, the runs table's statements (the generated code passes its
// store, which implements driver.JobStore). It takes its owner identity,
// clock, logger, Observer and Middleware (its Observer and Tracer, when they
// implement those) from locks. Workers started through one Client wake each
// other on local enqueues and share claim gates; a second Client on the same
// lock client behaves like another node. It fails with runtime.ErrInvalid
// on a nil locks or store, or a queue name of WithQueues that PauseQueue
// would refuse.
func NewClient(locks *runtime.Client, store driver.JobStore, opts ...ClientOption) (*Client, error) {
	if locks == nil || store == nil {
		return nil, fmt.Errorf("%w: jobs.NewClient needs a lock client and a job store", runtime.ErrInvalid)
	}
	j := &Client{
		locks: locks, store: store,
		owner: locks.Owner(), clock: locks.Clock(), log: locks.Logger(),
		workers: map[string][]chan struct{}{}, gates: map[string]*claimGate{},
		obs: NopObserver{},
	}
	if obs, ok := locks.Observer().(Observer); ok {
		j.obs = obs
	}
	if mw, ok := locks.Tracer().(Middleware); ok {
		j.middleware = append(j.middleware, mw)
	}
	for _, opt := range opts {
		opt(j)
	}
	declared := j.declared
	j.declared = nil
	for _, q := range declared {
		if err := j.checkQueue(q); err != nil {
			return nil, fmt.Errorf("jobs.WithQueues: %w", err)
		}
	}
	j.declared = declared
	return j, nil
}

// checkAtStart checks the server for jobs before a loop that runs until ctx
// ends (a worker, the scheduler): a refusal ends it at once, while a probe
// that could not reach the server is only logged, since those loops retry
// database errors anyway.
func (j *Client) checkAtStart(ctx context.Context) error {
	err := j.locks.CheckFeature(ctx, nil, probe.Jobs)
	if err == nil || errors.Is(err, runtime.ErrUnsupported) || errors.Is(err, runtime.ErrInvalid) {
		return err
	}
	if ctx.Err() == nil {
		j.log.Warn("lockgen: could not check the server; going on", "error", err)
	}
	return nil
}

// Limits of a run.
const (
	MaxPriority  = 100
	MaxJobName   = 191
	MaxQueue     = 64
	MaxUniqueKey = 191
)

// Enqueue inserts r (in tx when tx is not nil, so that the run exists only
// if tx commits) and returns the run's ID. Local workers of r's queue are
// woken at once. It fails with ErrInvalid on a bad NewRun; an error from
// the database means the run may or may not exist (with tx: it does not,
// once tx rolls back).
//
// Every entry point of the Client (Enqueue, EnqueueMany, Get, Cancel,
// Retry, Prune, and the workers and scheduler as they start) first checks
// the server through the lock client (runtime.Client.CheckFeature, once
// per Client, then a map lookup): an error wrapping runtime.ErrUnsupported
// or runtime.ErrInvalid, the same for each, when the server or the
// connection (a DSN without parseTime=true, say) cannot run jobs, or a
// table is missing or unlike its migration.
func (j *Client) Enqueue(ctx context.Context, tx *sql.Tx, r NewRun) (int64, error) {
	r, err := checkNewRun(r)
	if err != nil {
		return 0, err
	}
	if err := j.locks.CheckFeature(ctx, tx, probe.Jobs); err != nil {
		return 0, err
	}
	var id int64
	runs := []NewRun{r}
	err = j.enqueueThrough(ctx, runs, func(ctx context.Context) error {
		if err := checkHeaders(runs); err != nil {
			return err
		}
		var err error
		id, err = j.store.RunInsert(ctx, tx, runs[0])
		return err
	})
	if errors.Is(err, runtime.ErrInvalid) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("lockgen: enqueue job %q: %w", r.Job, err)
	}
	j.obs.Enqueued(r.Job, r.Queue, 1)
	j.wake(r.Queue)
	return id, nil
}

// checkNewRun applies r's defaults and fails with ErrInvalid when r is bad.
func checkNewRun(r NewRun) (NewRun, error) {
	if r.Queue == "" {
		r.Queue = DefaultQueue
	}
	if len(r.Args) == 0 {
		r.Args = []byte("{}")
	}
	switch {
	case r.Job == "" || len(r.Job) > MaxJobName:
		return r, fmt.Errorf("%w: job name must be 1 to %d bytes", runtime.ErrInvalid, MaxJobName)
	case len(r.Queue) > MaxQueue:
		return r, fmt.Errorf("%w: queue name is longer than %d bytes", runtime.ErrInvalid, MaxQueue)
	case r.Priority < -MaxPriority || r.Priority > MaxPriority:
		return r, fmt.Errorf("%w: job %q: priority %d is outside [-%d, %d]", runtime.ErrInvalid, r.Job, r.Priority, MaxPriority, MaxPriority)
	case r.MaxAttempts < 1 || r.MaxAttempts > math.MaxInt32:
		return r, fmt.Errorf("%w: job %q: max attempts must be 1 to %d, got %d", runtime.ErrInvalid, r.Job, math.MaxInt32, r.MaxAttempts)
	case !utf8.ValidString(r.Job) || !utf8.ValidString(r.Queue) || !utf8.ValidString(r.UniqueKey):
		// A server without strict mode would cut them at the first bad
		// byte, so two unique keys could collapse onto one.
		return r, fmt.Errorf("%w: job %q: job, queue and unique key must be valid UTF-8", runtime.ErrInvalid, r.Job)
	case r.Timeout <= 0:
		return r, fmt.Errorf("%w: job %q: timeout must be positive", runtime.ErrInvalid, r.Job)
	case r.Delay < 0:
		return r, fmt.Errorf("%w: job %q: negative delay", runtime.ErrInvalid, r.Job)
	case len(r.UniqueKey) > MaxUniqueKey:
		return r, fmt.Errorf("%w: job %q: unique key is longer than %d bytes", runtime.ErrInvalid, r.Job, MaxUniqueKey)
	case strings.HasSuffix(r.UniqueKey, " "):
		// The runs table's collation ignores trailing spaces: "k" and
		// "k " would be one unique key, and the second enqueue would
		// return the first one's run.
		return r, fmt.Errorf("%w: job %q: unique key %q ends in a space", runtime.ErrInvalid, r.Job, r.UniqueKey)
	case !utf8.Valid(r.Args):
		// A strict server rejects it; one without strict mode cuts it.
		return r, fmt.Errorf("%w: job %q: args are not valid UTF-8", runtime.ErrInvalid, r.Job)
	case r.UniqueKey != "" && !r.ScheduledAt.IsZero():
		return r, fmt.Errorf("%w: job %q: a run has a scheduled tick or a unique key, not both", runtime.ErrInvalid, r.Job)
	}
	if err := driver.CheckHeaders(r.Headers); err != nil {
		return r, fmt.Errorf("%w: job %q: %w", runtime.ErrInvalid, r.Job, err)
	}
	r.Headers = maps.Clone(r.Headers) // the middleware may set headers
	return r, nil
}

// checkHeaders checks the headers the middleware left on runs: ErrInvalid
// naming the run when one's are bad.
func checkHeaders(runs []NewRun) error {
	for i, r := range runs {
		if err := driver.CheckHeaders(r.Headers); err != nil {
			return fmt.Errorf("%w: job %q (run %d of the batch): headers set by the middleware: %w", runtime.ErrInvalid, r.Job, i, err)
		}
	}
	return nil
}

// MaxEnqueueBatch is the most runs EnqueueMany inserts per statement.
const MaxEnqueueBatch = 500

// EnqueueMany inserts runs, MaxEnqueueBatch per statement (all in tx when
// tx is not nil), and wakes local workers. Runs that repeat a tick or an
// active unique key are left out. It validates every run before inserting
// any; an error from the database means the runs of the failing statement
// and later ones may not exist (with tx: none does once tx rolls back).
func (j *Client) EnqueueMany(ctx context.Context, tx *sql.Tx, runs []NewRun) error {
	checked := make([]NewRun, len(runs))
	queues := map[string]bool{}
	for i, r := range runs {
		var err error
		if checked[i], err = checkNewRun(r); err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		queues[checked[i].Queue] = true
	}
	if err := j.locks.CheckFeature(ctx, tx, probe.Jobs); err != nil {
		return err
	}
	for len(checked) > 0 {
		n := min(len(checked), MaxEnqueueBatch)
		batch := checked[:n]
		err := j.enqueueThrough(ctx, batch, func(ctx context.Context) error {
			if err := checkHeaders(batch); err != nil {
				return err
			}
			return j.store.RunInsertMany(ctx, tx, batch)
		})
		if errors.Is(err, runtime.ErrInvalid) {
			return err
		}
		if err != nil {
			return fmt.Errorf("lockgen: enqueue %d runs: %w", n, err)
		}
		j.observeEnqueued(checked[:n])
		checked = checked[n:]
	}
	for q := range queues {
		j.wake(q)
	}
	return nil
}

// observeEnqueued reports runs to the observer, one call per job and queue.
func (j *Client) observeEnqueued(runs []NewRun) {
	type jobQueue struct{ job, queue string }
	n := map[jobQueue]int{}
	var order []jobQueue
	for _, r := range runs {
		k := jobQueue{r.Job, r.Queue}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	for _, k := range order {
		j.obs.Enqueued(k.job, k.queue, n[k])
	}
}

// Cancel cancels run id if it is due or running; false when it has
// finished. A running run's handler has its context cancelled (cause
// ErrCancelled) at its worker's next heartbeat, and the run stays
// cancelled whatever the handler returns; Retry restores it only once that
// attempt's deadline has passed. Like every entry point it checks the
// server first (see Enqueue).
func (j *Client) Cancel(ctx context.Context, id int64) (bool, error) {
	if err := j.locks.CheckFeature(ctx, nil, probe.Jobs); err != nil {
		return false, err
	}
	ok, err := j.store.RunCancel(ctx, id)
	if err != nil {
		return false, fmt.Errorf("lockgen: cancel run %d: %w", id, err)
	}
	return ok, nil
}

// Retry restores a discarded, orphaned or cancelled run: due now, with its
// attempts counted from zero. False when the run is in another state; an
// error wrapping ErrUniqueKeyTaken when an unfinished run has its unique
// key. An orphaned run's last attempt may still have succeeded: once it is
// retried, a late outcome of that attempt matches nothing, so retrying it
// before its worker can no longer report may run a success twice. Like
// every entry point it checks the server first (see Enqueue).
func (j *Client) Retry(ctx context.Context, id int64) (bool, error) {
	if err := j.locks.CheckFeature(ctx, nil, probe.Jobs); err != nil {
		return false, err
	}
	ok, err := j.store.RunRetry(ctx, id)
	if servererr.IsDuplicateKey(err) {
		return false, fmt.Errorf("%w: retry run %d", ErrUniqueKeyTaken, id)
	}
	if err != nil {
		return false, fmt.Errorf("lockgen: retry run %d: %w", id, err)
	}
	if ok {
		if info, found, err := j.store.RunGet(ctx, id); err == nil && found {
			j.wake(info.Queue)
		}
	}
	return ok, nil
}

// Get reads run id; ErrRunNotFound when there is none. Like every entry
// point it checks the server first (see Enqueue).
func (j *Client) Get(ctx context.Context, id int64) (RunInfo, error) {
	if err := j.locks.CheckFeature(ctx, nil, probe.Jobs); err != nil {
		return RunInfo{}, err
	}
	info, found, err := j.store.RunGet(ctx, id)
	switch {
	case err != nil:
		return RunInfo{}, fmt.Errorf("lockgen: read run %d: %w", id, err)
	case !found:
		return RunInfo{}, fmt.Errorf("%w: %d", ErrRunNotFound, id)
	}
	return info, nil
}

func (j *Client) listen(queue string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	j.mu.Lock()
	j.workers[queue] = append(j.workers[queue], ch)
	j.mu.Unlock()
	return ch, func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		list := j.workers[queue]
		for i, c := range list {
			if c == ch {
				j.workers[queue] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
	}
}

func (j *Client) wake(queue string) { j.wakeOthers(queue, nil) }

// wakeOthers wakes the local workers of queue but self.
func (j *Client) wakeOthers(queue string, self chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, ch := range j.workers[queue] {
		if ch == self {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
