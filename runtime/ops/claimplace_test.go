package ops_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/ops"
)

// placeStore records the place each claim was given.
type placeStore struct {
	lockgendb.Store
	mu     sync.Mutex
	afters []*driver.RunCursor
}

func (s *placeStore) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration, after *driver.RunCursor) ([]driver.Run, error) {
	s.mu.Lock()
	s.afters = append(s.afters, after)
	s.mu.Unlock()
	return s.Store.RunsClaim(ctx, queue, worker, limit, lease, after)
}

// TestConsumeClaimsGoOnFromTheLastRun: a consumer's claim that follows a
// full batch goes on from that batch's last run (claimplace.Place), as the
// Go workers' claims do, so that a backlog's drain over HTTP reads none of
// the index entries of the runs claimed before; one that finds nothing
// after the place claims from the first at once (here a run of higher
// priority enqueued meanwhile).
func TestConsumeClaimsGoOnFromTheLastRun(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)
	store := &placeStore{Store: lockgendb.NewStore(f.tdb.Open(t))}
	cfg := deployment
	cfg.Store = store
	o, err := ops.New(f.tdb.Open(t), cfg)
	require.NoError(t, err)
	ops.SetClaimFromFirstEveryForTest(o, time.Hour) // however slow the machine
	var backlog []int64
	for range 5 {
		backlog = append(backlog, f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"}))
	}
	claim := func() []int64 {
		got, err := o.Claim(ctx, "mail", ops.ClaimRequest{Worker: "py", Limit: 2, Lease: "1m"})
		require.NoError(t, err)
		ids := []int64{}
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		return ids
	}
	require.Equal(t, backlog[:2], claim())
	require.Equal(t, backlog[2:4], claim())
	urgent := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail", Priority: 5})
	require.Equal(t, backlog[4:], claim(), "after the place: the last of the backlog, not the run of higher priority before it")
	assert.Equal(t, []int64{urgent}, claim(), "a claim from the first: the last claim took less than a batch")

	store.mu.Lock()
	afters := store.afters
	store.mu.Unlock()
	require.Len(t, afters, 4)
	assert.Nil(t, afters[0])
	require.NotNil(t, afters[1])
	assert.Equal(t, backlog[1], afters[1].ID)
	require.NotNil(t, afters[2])
	assert.Equal(t, backlog[3], afters[2].ID)
	assert.Nil(t, afters[3])

	// A claim from a place that finds nothing claims from the first in
	// the same call.
	more := []int64{f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"}), f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})}
	require.Equal(t, more, claim())
	late := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail", Priority: 9})
	assert.Equal(t, []int64{late}, claim(), "nothing after the place: the run before it, in the same claim")
	store.mu.Lock()
	afters = store.afters[4:]
	store.mu.Unlock()
	require.Len(t, afters, 3)
	assert.Nil(t, afters[0])
	require.NotNil(t, afters[1])
	assert.Equal(t, more[1], afters[1].ID)
	assert.Nil(t, afters[2])
}
