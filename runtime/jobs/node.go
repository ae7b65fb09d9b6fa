package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// QueueConfig is one queue a node works.
type QueueConfig struct {
	// Name is the queue's name; Concurrency the handlers at once on this
	// node (WorkerConfig.Concurrency).
	Name        string
	Concurrency int
}

// Retention is how long one job's finished runs are kept: the node's
// pruner deletes them Keep (at least 5 s, the scheduler's catch-up grace)
// plus 2 s after they finished, so that no scheduler can insert a tick
// again that was run and pruned (see Client.Prune).
type Retention struct {
	Job   string
	Keep  time.Duration
	Limit int // rows per prune statement; default runtime.PruneBatch
}

// NodeConfig is everything one node runs for the declared jobs.
type NodeConfig struct {
	// Queues are worked by one Worker each; every queue of Handlers' jobs
	// must be listed.
	Queues []QueueConfig
	// Handlers maps every job to its handler and the queue it is in.
	Handlers map[string]QueuedHandler
	// External are the queues worked outside Go, by consumers of the HTTP
	// API (lockgen.yaml's external: true): no worker claims their runs,
	// and the node does not warn of them as stranded. Their scheduled
	// jobs' ticks are inserted and their runs pruned all the same.
	External []string
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
// with ErrInvalid on a bad configuration. It checks the server before it
// starts anything, and returns at once the error of a server, connection
// or table the jobs cannot run on (wrapping runtime.ErrUnsupported or
// runtime.ErrInvalid; see runtime.Client.CheckServer); a server it cannot
// reach yet is logged and retried by each part. Should a part still fail
// as it starts, RunNode stops the others and returns that error: it never
// runs on with a part missing.
//
// While it runs it warns, at start and every PruneEvery, of due runs in
// queues none of its workers works (see strandedCheck): with the
// generated RunJobs, which works every queue of the spec, runs that no
// node of the application will ever claim.
func (j *Client) RunNode(ctx context.Context, cfg NodeConfig) error {
	declared := map[string]string{}
	for job, h := range cfg.Handlers {
		declared[job] = h.Queue
	}
	byQueue := map[string]map[string]JobHandler{}
	for _, q := range cfg.Queues {
		byQueue[q.Name] = map[string]JobHandler{}
	}
	for _, q := range cfg.External {
		if _, ok := byQueue[q]; ok {
			return fmt.Errorf("%w: queue %q is both worked here and external", runtime.ErrInvalid, q)
		}
	}
	for job, h := range cfg.Handlers {
		hs, ok := byQueue[h.Queue]
		if !ok {
			return fmt.Errorf("%w: job %q is in queue %q, which is not configured", runtime.ErrInvalid, job, h.Queue)
		}
		hs[job] = h.JobHandler
	}
	for _, name := range cfg.Worker.NodeQueues {
		if _, ok := byQueue[name]; !ok {
			return fmt.Errorf("%w: OnlyQueues names queue %q, which is not configured (the queues: %s)", runtime.ErrInvalid, name, queueNames(cfg.Queues))
		}
	}
	for name, n := range cfg.Worker.NodeConcurrency {
		if _, ok := byQueue[name]; !ok {
			return fmt.Errorf("%w: QueueConcurrency names queue %q, which is not configured (the queues: %s)", runtime.ErrInvalid, name, queueNames(cfg.Queues))
		}
		if n <= 0 {
			return fmt.Errorf("%w: QueueConcurrency of queue %q must be positive, got %d", runtime.ErrInvalid, name, n)
		}
	}
	var workers []*Worker
	for _, q := range cfg.Queues {
		if len(byQueue[q.Name]) == 0 {
			continue
		}
		if len(cfg.Worker.NodeQueues) > 0 && !slices.Contains(cfg.Worker.NodeQueues, q.Name) {
			continue // another node works it
		}
		wc := cfg.Worker
		wc.Queue, wc.Handlers, wc.Concurrency = q.Name, byQueue[q.Name], q.Concurrency
		if n, ok := cfg.Worker.NodeConcurrency[q.Name]; ok {
			wc.Concurrency = n
		}
		w, err := j.NewWorker(wc)
		if err != nil {
			return err
		}
		w.declared = declared
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
	if err := j.checkAtStart(ctx); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(workers)+1)
	run := func(fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				errs <- err
				stop() // no node runs on with a part missing
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
		p := pruner{jobs: j, retention: cfg.Retention, every: cfg.PruneEvery}
		run(func(ctx context.Context) error { p.run(ctx); return nil })
	}
	if len(workers) > 0 {
		sc := strandedCheck{jobs: j, every: cfg.PruneEvery}
		for _, w := range workers {
			sc.worked = append(sc.worked, w.cfg.Queue)
		}
		sc.worked = append(sc.worked, cfg.External...) // HTTP consumers claim them
		if len(cfg.Worker.NodeQueues) > 0 {
			// The configured queues this node leaves are other nodes'
			// to work: warn only of queues no configuration names.
			for _, q := range cfg.Queues {
				sc.worked = append(sc.worked, q.Name)
			}
		}
		run(func(ctx context.Context) error { sc.run(ctx); return nil })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// queueNames lists the names of qs, for an error.
func queueNames(qs []QueueConfig) string {
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name
	}
	return strings.Join(names, ", ")
}
