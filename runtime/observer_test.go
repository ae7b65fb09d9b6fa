package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// recorder is an Observer that counts events by kind and lock.
type recorder struct {
	mu     sync.Mutex
	events map[string]int
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = map[string]int{}
	}
	r.events[e]++
}

func (r *recorder) count(e string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[e]
}

func (r *recorder) Acquired(lock string, strategy runtime.Strategy, res runtime.AcquireResult, _ time.Duration) {
	r.add("acquired " + lock + " " + string(strategy) + " " + string(res))
}
func (r *recorder) Released(lock string, strategy runtime.Strategy, _ time.Duration) {
	r.add("released " + lock)
}
func (r *recorder) RenewFailed(lock string, _ runtime.Strategy) { r.add("renew-failed " + lock) }
func (r *recorder) LeaseLost(lock string, _ runtime.Strategy)   { r.add("lost " + lock) }
func (r *recorder) LeaderChanged(lock string, leader bool) {
	if leader {
		r.add("leader " + lock)
	} else {
		r.add("follower " + lock)
	}
}

func TestObserverSeesAcquisitionsReleasesAndLosses(t *testing.T) {
	tdb := testdb.New(t)
	rec := &recorder{}
	faulty := &faultStore{Store: lockgendb.NewStore(tdb.Open(t))}
	c, err := runtime.NewClient(faulty, runtime.WithObserver(rec))
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "seen", TTL: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()

	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	_, err = l.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	require.NoError(t, lease.Release(ctx))
	assert.Equal(t, 1, rec.count("acquired seen lease acquired"))
	assert.Equal(t, 1, rec.count("acquired seen lease busy"))
	assert.Equal(t, 1, rec.count("released seen"))

	lease, err = l.Try(ctx, "")
	require.NoError(t, err)
	faulty.partitioned.Store(true)
	<-lease.Done()
	// The observer hears of the loss just after the lease's context ends.
	require.Eventually(t, func() bool { return rec.count("lost seen") == 1 }, 5*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, rec.count("renew-failed seen"), 1)
	faulty.partitioned.Store(false)
	require.ErrorIs(t, lease.Release(ctx), runtime.ErrLeaseLost)
	assert.Equal(t, 2, rec.count("acquired seen lease acquired"))
	assert.Equal(t, 2, rec.count("released seen"))
}
