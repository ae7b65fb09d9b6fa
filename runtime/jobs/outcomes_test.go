package jobs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// fastWorker is a worker config that polls often, with the given lease.
func fastWorker(lease time.Duration, handlers map[string]jobs.JobHandler) jobs.WorkerConfig {
	return jobs.WorkerConfig{Lease: lease, Concurrency: 4, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond, Handlers: handlers}
}

// TestHandlerPermanentErrorDiscardsAtOnce: a handler that returns
// jobs.Permanent(err) on the first of five attempts has its run discarded
// at once, with err's text; a plain error is retried.
func TestHandlerPermanentErrorDiscardsAtOnce(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "node")
	var calls atomic.Int32
	startWorker(t, j, fastWorker(2*time.Second, map[string]jobs.JobHandler{
		"charge": {Handle: func(context.Context, *jobs.Run) error {
			calls.Add(1)
			return jobs.Permanent(errors.New("card number rejected by the bank"))
		}},
	}))
	r := newRun("charge")
	r.MaxAttempts = 5
	id, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info := waitState(t, j, id, jobs.RunDiscarded)
	assert.Equal(t, 1, info.Attempt, "no further attempt")
	assert.Equal(t, "card number rejected by the bank", info.LastError)
	assert.Equal(t, int32(1), calls.Load())
	assert.True(t, jobs.IsPermanent(jobs.Permanent(context.Canceled)))
	assert.ErrorIs(t, jobs.Permanent(context.Canceled), context.Canceled, "errors.Is sees through it")
	assert.NoError(t, jobs.Permanent(nil))
}

// TestHandleArgsThatDoNotDecodeDiscardAtOnce: arguments that do not decode
// as the handler's type fail the run for good on its first attempt.
func TestHandleArgsThatDoNotDecodeDiscardAtOnce(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "node")
	type order struct{ ID int64 }
	startWorker(t, j, fastWorker(2*time.Second, map[string]jobs.JobHandler{
		"ship": {Handle: jobs.HandleArgs(func(context.Context, *jobs.Run, order) error { return nil })},
	}))
	r := newRun("ship")
	r.MaxAttempts = 5
	r.Args = []byte(`{"ID": "not a number"}`)
	id, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info := waitState(t, j, id, jobs.RunDiscarded)
	assert.Equal(t, 1, info.Attempt)
	assert.Contains(t, info.LastError, `decode args of job "ship"`)
}

// TestHandlerSnoozeUsesNoAttempt: a handler that snoozes its run has it
// back after the delay, on the same attempt number: three snoozes and a
// success on a job with one attempt complete it.
func TestHandlerSnoozeUsesNoAttempt(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "node")
	var mu sync.Mutex
	var starts []time.Time
	var attempts []int
	startWorker(t, j, fastWorker(2*time.Second, map[string]jobs.JobHandler{
		"wait_for_stock": {Handle: func(_ context.Context, run *jobs.Run) error {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, time.Now())
			attempts = append(attempts, run.Attempt)
			if len(starts) <= 3 {
				return jobs.Snooze(300 * time.Millisecond)
			}
			return nil
		}},
	}))
	r := newRun("wait_for_stock")
	r.MaxAttempts = 1
	id, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	info := waitState(t, j, id, jobs.RunCompleted)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{1, 1, 1, 1}, attempts, "a snooze uses no attempt")
	assert.Equal(t, 1, info.Attempt)
	for i := 1; i < len(starts); i++ {
		assert.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), 250*time.Millisecond, "due again after the delay (the database clock's)")
	}
}

// TestOperatorCancelsARunningRun: Cancel on a running run cancels its
// handler's context within one heartbeat (a third of the lease) with the
// cause jobs.ErrCancelled; the run stays cancelled although the handler
// then returns nil; another run of the worker is not disturbed; Retry is
// refused until the attempt's deadline has passed, then the run runs once
// more.
func TestOperatorCancelsARunningRun(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "node")
	const lease = 3 * time.Second
	started := make(chan int64, 4)
	causes := make(chan error, 4)
	release := make(chan struct{})
	var runs atomic.Int32
	startWorker(t, j, fastWorker(lease, map[string]jobs.JobHandler{
		"export": {Handle: func(ctx context.Context, run *jobs.Run) error {
			if runs.Add(1) > 2 {
				return nil // the retried run
			}
			started <- run.ID
			select {
			case <-ctx.Done():
				causes <- context.Cause(ctx)
			case <-release:
			}
			return nil // a handler that ignores its cancellation
		}},
	}))
	victim, err := j.Enqueue(ctx, nil, newRun("export"))
	require.NoError(t, err)
	other, err := j.Enqueue(ctx, nil, newRun("export"))
	require.NoError(t, err)
	<-started
	<-started

	ok, err := j.Cancel(ctx, victim)
	require.NoError(t, err)
	require.True(t, ok, "a running run is cancelled")
	cancelled := time.Now()
	select {
	case cause := <-causes:
		assert.ErrorIs(t, cause, jobs.ErrCancelled)
		assert.Less(t, time.Since(cancelled), lease/3+time.Second, "told within one heartbeat")
	case <-time.After(2 * lease):
		t.Fatal("the handler of the cancelled run was never told")
	}
	ok, err = j.Retry(ctx, victim)
	require.NoError(t, err)
	assert.False(t, ok, "not retried before the attempt's deadline has passed")

	close(release) // the other run completes; nothing told it to stop
	assert.Equal(t, jobs.RunCompleted, waitState(t, j, other, jobs.RunCompleted).State)
	info := waitState(t, j, victim, jobs.RunCancelled)
	assert.Equal(t, 1, info.Attempt)
	select {
	case cause := <-causes:
		t.Fatalf("the other run's handler was cancelled too: %v", cause)
	default:
	}

	require.Eventually(t, func() bool {
		ok, err := j.Retry(ctx, victim)
		require.NoError(t, err)
		return ok
	}, 2*lease, 100*time.Millisecond, "retried once the deadline has passed")
	assert.Equal(t, jobs.RunCompleted, waitState(t, j, victim, jobs.RunCompleted).State)
	assert.Equal(t, int32(3), runs.Load(), "the retry ran it once more")
}

// TestNodesWorkTheQueuesTheyAreGiven: of two nodes with the same
// configuration (queues mail and default), one given OnlyQueues("mail")
// and QueueConcurrency("mail", 1) handles only mail runs, one at a time,
// and the other, given OnlyQueues("default"), only default runs; a node
// given a queue that is not configured, or a concurrency that is not
// positive, does not start.
func TestNodesWorkTheQueuesTheyAreGiven(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := lockgendb.NewStore(tdb.Open(t))
	var mu sync.Mutex
	handled := map[string][]string{} // node -> queues of the runs it handled
	var inMail, mostMail atomic.Int32
	node := func(name string, opts ...jobs.WorkerOption) (*jobs.Client, jobs.NodeConfig) {
		handle := func(ctx context.Context, run *jobs.Run) error {
			if run.Queue == "mail" {
				n := inMail.Add(1)
				defer inMail.Add(-1)
				for m := mostMail.Load(); n > m && !mostMail.CompareAndSwap(m, n); m = mostMail.Load() {
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			handled[name] = append(handled[name], run.Queue)
			return nil
		}
		cfg := jobs.NodeConfig{
			Queues: []jobs.QueueConfig{{Name: "mail", Concurrency: 8}, {Name: jobs.DefaultQueue, Concurrency: 8}},
			Handlers: map[string]jobs.QueuedHandler{
				"send": {Queue: "mail", JobHandler: jobs.JobHandler{Handle: handle}},
				"work": {Queue: jobs.DefaultQueue, JobHandler: jobs.JobHandler{Handle: handle}},
			},
			Worker: jobs.WorkerConfig{Lease: 3 * time.Second, PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond},
		}
		for _, opt := range opts {
			opt(&cfg.Worker)
		}
		return jobsOn(t, store, name), cfg
	}
	a, cfgA := node("a", jobs.OnlyQueues("mail"), jobs.QueueConcurrency("mail", 1))
	b, cfgB := node("b", jobs.OnlyQueues(jobs.DefaultQueue))
	startNode(t, a, cfgA)
	startNode(t, b, cfgB)
	var ids []int64
	for i := range 20 {
		r := jobs.NewRun{Job: "work", Queue: jobs.DefaultQueue, MaxAttempts: 1, Timeout: time.Minute}
		if i%2 == 0 {
			r.Job, r.Queue = "send", "mail"
		}
		id, err := a.Enqueue(ctx, nil, r)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		waitState(t, a, id, jobs.RunCompleted)
	}
	mu.Lock()
	assert.Equal(t, slices.Repeat([]string{"mail"}, 10), handled["a"], "node a works mail only")
	assert.Equal(t, slices.Repeat([]string{jobs.DefaultQueue}, 10), handled["b"], "node b works default only")
	mu.Unlock()
	assert.Equal(t, int32(1), mostMail.Load(), "one mail handler at a time on node a")

	for opt, want := range map[*jobs.WorkerOption]string{
		ptr(jobs.OnlyQueues("reports")):          `OnlyQueues names queue "reports", which is not configured (the queues: mail, default)`,
		ptr(jobs.QueueConcurrency("reports", 2)): `QueueConcurrency names queue "reports", which is not configured (the queues: mail, default)`,
		ptr(jobs.QueueConcurrency("mail", 0)):    `QueueConcurrency of queue "mail" must be positive, got 0`,
	} {
		c, cfg := node("c", *opt)
		err := c.RunNode(ctx, cfg)
		require.ErrorIs(t, err, runtime.ErrInvalid)
		assert.ErrorContains(t, err, want)
	}
}

func ptr[T any](v T) *T { return &v }
