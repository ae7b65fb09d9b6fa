package jobs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// TestJobsHandlerIsToldBeforeItsRunIsRescued: a worker whose connection is
// cut, or blackholed (half-open: accepted, never answered), while its
// handler runs cannot heartbeat, and another node rescues the run and runs
// it again. The first handler's context must have ended, with a cause
// wrapping ErrLeaseLost, when the second attempt starts; and once the
// network is back the cut worker goes on working (no statement of its hung
// for good).
func TestJobsHandlerIsToldBeforeItsRunIsRescued(t *testing.T) {
	for _, fault := range []string{"cut", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			tdb := testdb.New(t)
			proxy, pdb := testkit.OpenViaProxy(t, tdb)
			cut := jobsNode(t, pdb, "cut")
			rescuer := jobsNode(t, tdb.Open(t), "rescuer")
			ctx := context.Background()
			id, err := rescuer.Enqueue(ctx, nil, jobs.NewRun{Job: "long", MaxAttempts: 3, Timeout: time.Minute})
			require.NoError(t, err)

			var first atomic.Pointer[context.Context]
			started := make(chan struct{})
			var once sync.Once
			stopCut := startWorker(t, cut, jobs.WorkerConfig{Lease: time.Second, RescueEvery: -1, PollMin: 10 * time.Millisecond,
				Handlers: map[string]jobs.JobHandler{"long": {Handle: func(ctx context.Context, run *jobs.Run) error {
					if run.ID != id {
						return nil
					}
					first.Store(&ctx)
					once.Do(func() { close(started) })
					<-ctx.Done()
					return ctx.Err()
				}}}})
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the first attempt never started")
			}
			if fault == "cut" {
				proxy.Cut()
			} else {
				proxy.Blackhole()
			}

			type seen struct {
				attempt   int
				firstErr  error
				firstWhy  error
				firstDone bool
			}
			second := make(chan seen, 1)
			stopRescuer := startWorker(t, rescuer, jobs.WorkerConfig{Lease: time.Second, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond,
				Handlers: map[string]jobs.JobHandler{"long": {Handle: func(_ context.Context, run *jobs.Run) error {
					fctx := *first.Load()
					s := seen{attempt: run.Attempt, firstErr: fctx.Err(), firstWhy: context.Cause(fctx)}
					select {
					case <-fctx.Done():
						s.firstDone = true
					default:
					}
					select {
					case second <- s:
					default:
					}
					return nil
				}}}})
			var s seen
			select {
			case s = <-second:
			case <-time.After(20 * time.Second):
				t.Fatal("the run was never rescued and run again")
			}
			assert.Equal(t, 2, s.attempt)
			require.Error(t, s.firstErr, "the first handler's context still said nil when the second attempt started")
			assert.True(t, s.firstDone, "Done must be closed once Err is non-nil")
			assert.ErrorIs(t, s.firstWhy, runtime.ErrLeaseLost)
			info := waitState(t, rescuer, id, jobs.RunCompleted)
			assert.Equal(t, "rescuer", info.Worker)

			// The network is back: the cut worker, alone now, claims and
			// completes a new run, and stops promptly.
			stopRescuer()
			proxy.Restore()
			id2, err := rescuer.Enqueue(ctx, nil, jobs.NewRun{Job: "long", MaxAttempts: 3, Timeout: time.Minute})
			require.NoError(t, err)
			assert.Equal(t, "cut", waitState(t, rescuer, id2, jobs.RunCompleted).Worker)
			stopWithin(t, stopCut, 15*time.Second)
		})
	}
}

// TestHeartbeatAfterABlackholeDropsTheDeadIdleConnections (the hour-long
// MySQL chaos run of 2026-11-27, session 4: every statement of a worker
// timed out for 7.6 s after a 1.9 s blackhole healed): a blackhole leaves
// every connection that was idle in the pool dead for good, and the pool
// hands idle connections out first, so each is found dead only by a
// statement that times out on it, one after the other. A worker with 30
// idle connections, blackholed for 600 ms, must keep its handler's lease:
// its heartbeat drops the dead idle connections together after its first
// timeout. Before, the heartbeat and the worker's other loops went through
// them one timeout each, for longer than the lease, and the healthy
// handler was cancelled.
func TestHeartbeatAfterABlackholeDropsTheDeadIdleConnections(t *testing.T) {
	tdb := testdb.New(t)
	proxy, pdb := testkit.OpenViaProxy(t, tdb)
	const idle = 30
	pdb.SetMaxOpenConns(idle + 10)
	pdb.SetMaxIdleConns(idle + 10)
	node := jobsNode(t, pdb, "node")
	ctx := context.Background()
	id, err := jobsNode(t, tdb.Open(t), "producer").Enqueue(ctx, nil, jobs.NewRun{Job: "long", MaxAttempts: 1, Timeout: time.Minute})
	require.NoError(t, err)

	const hold = 6 * time.Second
	started := make(chan struct{})
	lost := make(chan error, 1)
	startWorker(t, node, jobs.WorkerConfig{Lease: 4 * time.Second, RescueEvery: -1, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"long": {Handle: func(ctx context.Context, run *jobs.Run) error {
			close(started)
			select {
			case <-ctx.Done():
				lost <- context.Cause(ctx)
				return ctx.Err()
			case <-time.After(hold):
				lost <- nil
				return nil
			}
		}}}})
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never started")
	}
	testkit.FillIdle(t, pdb, idle)

	proxy.Blackhole()
	time.Sleep(600 * time.Millisecond)
	proxy.Restore()

	select {
	case cause := <-lost:
		require.NoError(t, cause, "the healthy handler kept its lease")
	case <-time.After(hold + 10*time.Second):
		t.Fatal("the handler never returned")
	}
	waitState(t, node, id, jobs.RunCompleted)
}
