package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// traceLog is a Tracer that writes what it hears as lines.
type traceLog struct {
	mu    sync.Mutex
	lines []string
}

type holdingKey struct{}

func (l *traceLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *traceLog) Acquiring(_ context.Context, lock, key string, s runtime.Strategy) func(int64, error) {
	l.add("acquiring %s/%s %s", lock, key, s)
	return func(token int64, err error) {
		switch {
		case err == nil:
			l.add("acquired %s/%s token>0=%v", lock, key, token > 0)
		case errors.Is(err, runtime.ErrNotAcquired):
			l.add("busy %s/%s", lock, key)
		default:
			l.add("error %s/%s", lock, key)
		}
	}
}

func (l *traceLog) Holding(ctx context.Context, lock, key string, _ runtime.Strategy, token int64) (context.Context, func(error)) {
	l.add("holding %s/%s", lock, key)
	return context.WithValue(ctx, holdingKey{}, token), func(err error) {
		l.add("held %s/%s lost=%v", lock, key, errors.Is(err, runtime.ErrLeaseLost))
	}
}

func (l *traceLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestTracerSeesWaitsAndHoldings: the Tracer hears each acquisition with
// its end (acquired with a token, or busy), each holding with its end at
// Release (lost when the lease was lost first), and With runs fn in the
// holding's context.
func TestTracerSeesWaitsAndHoldings(t *testing.T) {
	tdb := testdb.New(t)
	log := &traceLog{}
	faulty := &faultStore{Store: lockgendb.NewStore(tdb.Open(t))}
	c, err := runtime.NewClient(faulty, runtime.WithTracer(log))
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "traced", TTL: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()

	require.NoError(t, l.With(ctx, "", func(ctx context.Context, lease *runtime.Lease) error {
		assert.Equal(t, lease.Token(), ctx.Value(holdingKey{}), "fn runs in the holding's context")
		_, err := l.Try(ctx, "")
		assert.ErrorIs(t, err, runtime.ErrNotAcquired)
		return nil
	}))
	assert.Equal(t, []string{"acquiring traced/ lease", "acquired traced/ token>0=true", "holding traced/",
		"acquiring traced/ lease", "busy traced/", "held traced/ lost=false"}, log.get())

	log.lines = nil
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	faulty.partitioned.Store(true)
	<-lease.Done()
	faulty.partitioned.Store(false)
	require.ErrorIs(t, lease.Release(ctx), runtime.ErrLeaseLost)
	assert.Equal(t, []string{"acquiring traced/ lease", "acquired traced/ token>0=true", "holding traced/", "held traced/ lost=true"}, log.get())

	_, err = runtime.NewClient(faulty, runtime.WithTracer(nil))
	assert.ErrorIs(t, err, runtime.ErrInvalid)
}
