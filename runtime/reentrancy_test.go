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
