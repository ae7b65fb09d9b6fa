package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// inFlightStore tells the test when a renewal starts once armed: a lease
// renewal through the pool (which it then holds until letGo closes,
// whatever its context says: a driver or a server that does not answer a
// cancelled statement), or a session holding's check on its pinned
// connection (which the test blackholes, so the check hangs on the network
// until its own timeout).
type inFlightStore struct {
	lockgendb.Store
	armed   atomic.Bool
	entered chan struct{}
	letGo   chan struct{}
}

func (s *inFlightStore) LeaseRenew(ctx context.Context, id driver.LeaseID, ttl time.Duration) (bool, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.letGo
	}
	return s.Store.LeaseRenew(ctx, id, ttl)
}

func (s *inFlightStore) SessionConn(ctx context.Context) (driver.SessionConn, error) {
	conn, err := s.Store.SessionConn(ctx)
	if err != nil {
		return nil, err
	}
	return inFlightConn{conn, s}, nil
}

type inFlightConn struct {
	driver.SessionConn
	s *inFlightStore
}

func (c inFlightConn) HoldsLock(ctx context.Context, name string) (bool, error) {
	if c.s.armed.CompareAndSwap(true, false) {
		close(c.s.entered)
	}
	return c.SessionConn.HoldsLock(ctx, name)
}

// TestReleaseWindowStillReportsLoss: once Release has begun it waits for
// the renewal in flight; until that returns, the holding is still in force
// on the database, so a goroutine that outlives fn must still learn of a
// loss: past the local deadline, Err reports ErrLeaseLost and the lease's
// context (and every context derived from it) is done. Today both read
// nil until the renewal returns. The Client runs on a manual clock, so
// "past the local deadline" is exact (Lease.LocalDeadline), whatever the
// machine's load; the renewal is held in flight by the store (lease) or by
// a blackholed pinned connection (session).
func TestReleaseWindowStillReportsLoss(t *testing.T) {
	for _, strategy := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategySession} {
		t.Run(string(strategy), func(t *testing.T) {
			tdb := testdb.New(t)
			proxy, db := testkit.OpenViaProxy(t, tdb)
			store := &inFlightStore{Store: lockgendb.NewStore(db), entered: make(chan struct{}), letGo: make(chan struct{})}
			clock := testkit.NewManualClock(time.Now())
			c, err := runtime.NewClient(store, runtime.WithClock(clock))
			require.NoError(t, err)
			// A long TTL: the blackholed session check times out (by the
			// real clock) only after TTL - SafetyMargin - RenewEvery.
			cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: strategy, TTL: time.Minute, RenewEvery: 20 * time.Second, SafetyMargin: 6 * time.Second}
			l, err := c.Lock(cfg)
			require.NoError(t, err)
			ctx := context.Background()
			lease, err := l.Try(ctx, "")
			require.NoError(t, err)

			// The goroutine that outlives fn: it watches a context
			// derived from the lease's.
			derived, cancel := context.WithCancel(lease.Context())
			defer cancel()
			told := make(chan error, 1)
			go func() {
				<-derived.Done()
				told <- context.Cause(lease.Context())
			}()

			store.armed.Store(true)
			if strategy == runtime.StrategySession {
				proxy.Blackhole()
			}
			// The first renewal is due RenewEvery after the acquire was
			// sent, once the renewal loop has set its timer.
			due := lease.LocalDeadline().Add(-cfg.TTL + cfg.SafetyMargin + cfg.RenewEvery)
			require.Eventually(t, func() bool { return clock.SleepingUntil(due) }, 30*time.Second, time.Millisecond)
			clock.Advance(due.Sub(clock.Now()))
			select {
			case <-store.entered:
			case <-time.After(30 * time.Second):
				t.Fatal("no renewal started")
			}
			released := make(chan error, 1)
			go func() { released <- lease.Release(ctx) }()
			require.Eventually(t, func() bool { return runtime.ReleasingForTest(lease) }, 30*time.Second, time.Millisecond)
			select {
			case err := <-released:
				t.Fatalf("Release returned before the renewal in flight did: %v", err)
			default:
			}

			clock.Advance(lease.LocalDeadline().Sub(clock.Now())) // the local deadline, exactly
			assert.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost, "Err past the local deadline while Release waits for the renewal")
			assert.ErrorIs(t, lease.Context().Err(), context.Canceled)
			select {
			case cause := <-told:
				assert.ErrorIs(t, cause, runtime.ErrLeaseLost)
			case <-time.After(30 * time.Second):
				t.Fatal("the goroutine watching the lease's context was not told of the loss")
			}
			select {
			case err := <-released:
				t.Fatalf("Release returned before the renewal in flight did: %v", err)
			default:
			}

			close(store.letGo)
			if strategy == runtime.StrategySession {
				// The blackholed check fails at once. (Only then: a cut
				// that races the lease renewal let go just now could leave
				// that statement waiting out its own timeout, a minute.)
				proxy.Cut()
				proxy.Restore()
			}
			select {
			case err := <-released:
				assert.ErrorIs(t, err, runtime.ErrLeaseLost, "the lease was lost before it was released")
			case <-time.After(2 * time.Minute):
				t.Fatal("Release did not return")
			}
			assert.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost)
		})
	}
}
