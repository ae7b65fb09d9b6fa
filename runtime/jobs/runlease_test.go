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
