package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime"
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
	// without a heartbeat; heartbeats come every Lease/3, from a goroutine
	// of their own that no claim, rescue or recording holds up (each
	// statement bounded by Lease/6, retried Lease/12 after the failed one
	// was sent). Each rescue statement is bounded by Lease/3, each claim
	// by Lease/2 (a claim from a place and the claim from the first that
	// follows it when it found nothing, together). A run whose worker died is rescued about one Lease later; a
	// handler whose worker could not heartbeat for Lease − Lease/10 has its
	// context cancelled (ErrLeaseLost) before that. Default 30s.
	Lease time.Duration
	// PollMin and PollMax bound the idle poll interval, which doubles
	// while the queue is empty; a local enqueue wakes the worker at once.
	// Defaults 50ms and 2s. While a backlog drains, a node's claims go on
	// from the last run its previous claim took (driver.RunCursor) and
	// claim from the first due run at least every 4·PollMin: a due run of
	// a higher priority than the backlog waits up to that much longer.
	PollMin, PollMax time.Duration
	// ClaimGather is how long, while a backlog drains, a worker waits for
	// more of its handlers to finish before its next claim when fewer
	// than half of min(ClaimBatch, Concurrency) of its slots are free:
	// after a claim that took its whole limit (more runs are likely due),
	// it claims once that half is free or ClaimGather has passed,
	// whichever comes first. Fewer, larger claims cost the database less
	// per run: 3 nodes × 8 workers draining no-op runs made claims of
	// 91–97 runs instead of 73–80, and worked 1.07× as many runs per
	// second on MariaDB (medians of 10 runs in turn); on MySQL, and with
	// one worker per node, the change was within the noise. The price is
	// up to ClaimGather more wait for a due run while the worker is partly
	// busy, and for its local wake-ups and rescues, once per finished
	// handler at most. No claim waits after
	// one that found fewer runs than its limit (the queue ran dry), and
	// heartbeats and outcomes never wait. Default 2ms, at most PollMin;
	// negative: never wait.
	ClaimGather time.Duration
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
	// their runs are rescued and run again (orphaned on their last
	// attempt).
	ShutdownGrace time.Duration

	// NodeQueues and NodeConcurrency are read by RunNode (and so by the
	// generated RunJobs) from NodeConfig.Worker, and ignored by a Worker:
	// this node works only the queues in NodeQueues (every configured
	// queue when empty), with NodeConcurrency[queue] handlers at once
	// where set instead of the queue's configured concurrency. Set them
	// with OnlyQueues and QueueConcurrency.
	NodeQueues      []string
	NodeConcurrency map[string]int
}

// WorkerOption changes a WorkerConfig: the generated RunJobs applies its
// options to NodeConfig.Worker, the template of every queue's worker.
type WorkerOption func(*WorkerConfig)

// OnlyQueues makes RunNode (the generated RunJobs) work only the named
// queues on this node, so that, say, one pool of nodes works "mail" and
// another "reports". A name that is not a configured queue is ErrInvalid
// when the node starts. Runs of the other queues wait for a node that
// works them: if no node does, they are never claimed.
func OnlyQueues(queues ...string) WorkerOption {
	return func(c *WorkerConfig) { c.NodeQueues = append(c.NodeQueues, queues...) }
}

// QueueConcurrency sets how many handlers of queue run at once on this
// node (RunNode, the generated RunJobs), instead of the queue's
// configured concurrency. n must be positive and queue configured, or the
// node does not start (ErrInvalid).
func QueueConcurrency(queue string, n int) WorkerOption {
	return func(c *WorkerConfig) {
		if c.NodeConcurrency == nil {
			c.NodeConcurrency = map[string]int{}
		}
		c.NodeConcurrency[queue] = n
	}
}

// DefaultShutdownGrace is the default of WorkerConfig.ShutdownGrace.
const DefaultShutdownGrace = 30 * time.Second

// Worker claims and runs due runs of one queue. Start it with Run.
type Worker struct {
	jobs *Client
	cfg  WorkerConfig
	// singletons are the locks of the Singleton jobs, by job.
	singletons map[string]*runtime.Lock
	// declared maps every job of the node (RunNode) to its queue, so that
	// a run claimed from the wrong queue says where its job is worked.
	declared map[string]string
}

// NewWorker validates cfg, applies its defaults and returns the worker.
func (j *Client) NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if len(cfg.Handlers) == 0 {
		return nil, fmt.Errorf("%w: worker of queue %q has no handlers", runtime.ErrInvalid, cfg.Queue)
	}
	for name, h := range cfg.Handlers {
		if h.Handle == nil {
			return nil, fmt.Errorf("%w: job %q has a nil handler", runtime.ErrInvalid, name)
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
	if cfg.ClaimGather == 0 {
		cfg.ClaimGather = 2 * time.Millisecond
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
	w := &Worker{jobs: j, cfg: cfg, singletons: map[string]*runtime.Lock{}}
	for name, h := range cfg.Handlers {
		if !h.Singleton {
			continue
		}
		l, err := j.locks.Lock(runtime.LockConfig{Name: "lockgen_job:" + name, TTL: max(cfg.Lease, runtime.MinTTL)})
		if err != nil {
			return nil, fmt.Errorf("job %q: singleton lock: %w", name, err)
		}
		w.singletons[name] = l
	}
	return w, nil
}
