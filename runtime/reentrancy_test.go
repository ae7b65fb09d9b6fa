package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

func TestWithIsReentrantForTheSameClientLockAndKey(t *testing.T) {
	tdb := testdb.New(t)
	a, b := newNode(t, tdb.Open(t)), newNode(t, tdb.Open(t))
	cfg := runtime.LockConfig{Name: "order", Keyed: true, TTL: 5 * time.Second}
	la, lb := a.lock(t, cfg), b.lock(t, cfg)
	ctx := context.Background()
	innerRan := false
	err := la.With(ctx, "1", func(ctx context.Context, outer *runtime.Lease) error {
		// Same client, lock and key: joins the holding.
		err := la.With(ctx, "1", func(ctx context.Context, inner *runtime.Lease) error {
			innerRan = true
			assert.Same(t, outer, inner)
			return nil
		})
		require.NoError(t, err)
		require.NoError(t, outer.Err(), "the inner With must not release the outer holding")
		h, err := la.Holder(ctx, "1")
		require.NoError(t, err)
		assert.True(t, h.Held)
		assert.Equal(t, outer.Token(), h.Token)

		// Another key is another lock.
		require.NoError(t, la.With(ctx, "2", func(_ context.Context, other *runtime.Lease) error {
			assert.NotEqual(t, outer.Key(), other.Key())
			return nil
		}))
		// Another client is another node: it does not join.
		err = lb.With(ctx, "1", func(context.Context, *runtime.Lease) error { return nil })
		require.ErrorIs(t, err, runtime.ErrNotAcquired)
		return nil
	})
	require.NoError(t, err)
	assert.True(t, innerRan)
	h, err := la.Holder(ctx, "1")
	require.NoError(t, err)
	assert.False(t, h.Held, "the outermost With released")
}

// TestUUIDKeys: a UUID is one lock however it is spelled; non-UUIDs are
// rejected.
func TestUUIDKeys(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	l := n.lock(t, runtime.LockConfig{Name: "tenant", Keyed: true, UUIDKeys: true, TTL: 5 * time.Second})
	ctx := context.Background()
	lease, err := l.Try(ctx, "6F9619FF-8B86-D011-B42D-00C04FC964FF")
	require.NoError(t, err)
	assert.Equal(t, "6f9619ff-8b86-d011-b42d-00c04fc964ff", lease.Key())
	_, err = l.Try(ctx, "6f9619ff-8b86-d011-b42d-00c04fc964ff")
	require.ErrorIs(t, err, runtime.ErrNotAcquired, "the same UUID in lower case is the same lock")
	for _, bad := range []string{"6f9619ff8b86d011b42d00c04fc964ff", "6f9619ff-8b86-d011-b42d-00c04fc964fg", "x", " 6f9619ff-8b86-d011-b42d-00c04fc964f"} {
		_, err = l.Try(ctx, bad)
		require.ErrorIs(t, err, runtime.ErrInvalid, bad)
	}
	require.NoError(t, l.With(ctx, "00000000-0000-0000-0000-00000000000A", func(ctx context.Context, outer *runtime.Lease) error {
		return l.With(ctx, "00000000-0000-0000-0000-00000000000a", func(_ context.Context, inner *runtime.Lease) error {
			assert.Same(t, outer, inner, "reentrancy sees the canonical key")
			return nil
		})
	}))
	require.NoError(t, lease.Release(ctx))
}

// TestReentrancyEdges: a context kept after its holding ended acquires
// anew; a joined call's context ends with the holding it joined.
func TestReentrancyEdges(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	l := n.lock(t, runtime.LockConfig{Name: "edges", TTL: 5 * time.Second})
	ctx := context.Background()
	var kept context.Context
	joinedDone := make(chan error, 1)
	var outerToken int64
	require.NoError(t, l.With(ctx, "", func(ctx context.Context, lease *runtime.Lease) error {
		kept = context.WithoutCancel(ctx) // values survive; the held lease goes stale
		outerToken = lease.Token()
		started := make(chan struct{})
		go func() { // a joined call that outlives the outer fn
			joinedDone <- l.With(context.WithoutCancel(ctx), "", func(ctx context.Context, _ *runtime.Lease) error {
				close(started)
				<-ctx.Done()
				return context.Cause(ctx)
			})
		}()
		<-started
		return nil
	}))
	select {
	case err := <-joinedDone:
		require.ErrorIs(t, err, runtime.ErrReleased, "the joined call's ctx ends with the holding")
	case <-time.After(10 * time.Second):
		t.Fatal("a joined call outlived its holding with a live context")
	}
	require.NoError(t, l.With(kept, "", func(_ context.Context, lease *runtime.Lease) error {
		assert.Greater(t, lease.Token(), outerToken, "a stale context acquires anew")
		return nil
	}))
}
