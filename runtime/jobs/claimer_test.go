package jobs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// claimReplyLost is a store whose first claim that takes runs commits but
// reports an error, as a claim whose COMMIT's reply was lost (or whose
// context ended during the commit) does: the generated RunsClaim returns
// the runs it read together with the error.
type claimReplyLost struct {
	lockgendb.Store
	failed atomic.Bool
	mu     sync.Mutex
	lost   []jobs.Run
}

func (s *claimReplyLost) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration) ([]jobs.Run, error) {
	runs, err := s.Store.RunsClaim(ctx, queue, worker, limit, lease)
	if err == nil && len(runs) > 0 && s.failed.CompareAndSwap(false, true) {
		s.mu.Lock()
		s.lost = runs
		s.mu.Unlock()
		return runs, errors.New("test: the claim's commit reply was lost")
	}
	return runs, err
}

// TestFailedClaimStartsNoHandler: a claim that returned an error starts no
// handler, even for the runs it returned: the worker cannot know whether
// they are claimed (by this claim) or still due, so running them could
// overlap with a worker that claims them next with the same claim number.
// The runs are rescued after their lease and run under a later claim.
func TestFailedClaimStartsNoHandler(t *testing.T) {
	tdb := testdb.New(t)
	store := &claimReplyLost{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "lossy-claim")
	id, err := j.Enqueue(context.Background(), nil, newRun("once"))
	require.NoError(t, err)
	var mu sync.Mutex
	var handled []jobs.Run
	startWorker(t, j, jobs.WorkerConfig{Lease: time.Second, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"once": {Handle: func(_ context.Context, run *jobs.Run) error {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, *run)
			return nil
		}}}})
	waitState(t, j, id, jobs.RunCompleted)
	store.mu.Lock()
	require.Len(t, store.lost, 1)
	lost := store.lost[0]
	store.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, handled, 1, "the run was handled once")
	assert.Greater(t, handled[0].Claim, lost.Claim, "the handled attempt holds a claim after the one whose reply was lost")
}
