package runtime

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// Strategy is how a lock is held, as declared in lockgen.yaml (strategy)
// and reported to Observers. docs/strategies.md compares them.
type Strategy string

// Strategies.
const (
	// StrategyLease is a lease row renewed while held (the default): one
	// autocommit statement to acquire, renew or release, expiry by the
	// database clock, safe on Galera.
	StrategyLease Strategy = "lease"
	// StrategySession holds a server-side named lock (GET_LOCK) on a pinned
	// connection: waiting happens on the server, without polling, and the
	// server frees the lock when the connection dies, or when it has heard
	// nothing on it for the TTL (rounded up to seconds) plus one second
	// (a partition), which is after the holder's local deadline.
	StrategySession Strategy = "session"
	// StrategyRow holds the lock row's exclusive row lock (SELECT ... FOR
	// UPDATE) in a transaction that lasts the critical section: the server
	// itself excludes other holders and serves waiters in arrival order,
	// and a holder's writes in that transaction commit atomically with its
	// release.
	StrategyRow Strategy = "row"
)

// lockStrategy is what differs between strategies at the lock: its
// configuration, taking a holding, waiting for one, and reading the holder.
// Client.Lock picks one by LockConfig.Strategy; Lock never switches on the
// strategy's name. What differs at a holding is a Lease's holding.
type lockStrategy interface {
	// configure checks cfg for the strategy and applies its defaults; it
	// fails with ErrInvalid, never "fixing" a setting.
	configure(cfg LockConfig) (LockConfig, error)
	// attach sets up what a new Lock of the strategy needs.
	attach(l *Lock)
	// try makes one attempt to take key, without waiting.
	try(ctx context.Context, l *Lock, key string) (*Lease, error)
	// acquire takes key, waiting until the lock's Wait from start.
	acquire(ctx context.Context, l *Lock, key string, start time.Time) (*Lease, error)
	// holder reads who holds key.
	holder(ctx context.Context, l *Lock, key string) (Holder, error)
}

// strategies maps each Strategy to its implementation.
var strategies = map[Strategy]lockStrategy{
	StrategyLease:   leaseStrategy{},
	StrategySession: sessionStrategy{},
	StrategyRow:     rowStrategy{},
}

// leaseStrategy: a row with a TTL, renewed while held (lock.go, lease.go,
// batch.go, wakeserver.go).
type leaseStrategy struct{}

func (leaseStrategy) configure(cfg LockConfig) (LockConfig, error) { return leaseConfig(cfg) }

// attach gives a keyed lease lock its batcher, which renews its holdings
// of many keys in batches.
func (leaseStrategy) attach(l *Lock) {
	if l.cfg.Keyed {
		l.batcher = newBatcher(l, l.client.store)
	}
}

func (leaseStrategy) try(ctx context.Context, l *Lock, key string) (*Lease, error) {
	return l.tryLease(ctx, key, nil)
}

func (leaseStrategy) acquire(ctx context.Context, l *Lock, key string, start time.Time) (*Lease, error) {
	if l.cfg.Wait == 0 {
		return l.tryLease(ctx, key, nil) // try once: no queue, no waiting
	}
	return l.queued(ctx, key, start, func(w *waiter) (*Lease, error) { return l.acquireLease(ctx, key, start, w) })
}

func (leaseStrategy) holder(ctx context.Context, l *Lock, key string) (Holder, error) {
	return l.leaseHolder(ctx, key)
}

// sessionStrategy: GET_LOCK on a pinned connection, and a row for the
// fencing token (session.go).
type sessionStrategy struct{}

func (sessionStrategy) configure(cfg LockConfig) (LockConfig, error) {
	if cfg.WaitOnServer {
		return cfg, fmt.Errorf("%w: lock %q: WaitOnServer is for strategy lease; session locks always wait on the server", ErrInvalid, cfg.Name)
	}
	return leaseConfig(cfg)
}

func (sessionStrategy) attach(*Lock) {}

func (sessionStrategy) try(ctx context.Context, l *Lock, key string) (*Lease, error) {
	return l.trySession(ctx, key, 0)
}

// acquire waits on the server (GET_LOCK's own queue), not in the local one.
func (sessionStrategy) acquire(ctx context.Context, l *Lock, key string, _ time.Time) (*Lease, error) {
	return l.trySession(ctx, key, l.cfg.Wait)
}

func (sessionStrategy) holder(ctx context.Context, l *Lock, key string) (Holder, error) {
	return l.sessionHolder(ctx, key)
}

// rowStrategy: the row's exclusive row lock in a transaction that lasts the
// holding (row.go).
type rowStrategy struct{}

func (rowStrategy) configure(cfg LockConfig) (LockConfig, error) {
	switch {
	case cfg.WaitOnServer:
		return cfg, fmt.Errorf("%w: lock %q: WaitOnServer is for strategy lease; row locks always wait on the server", ErrInvalid, cfg.Name)
	case cfg.RenewEvery != 0 || cfg.SafetyMargin != 0:
		return cfg, fmt.Errorf("%w: lock %q: strategy row is not renewed; leave RenewEvery and SafetyMargin zero", ErrInvalid, cfg.Name)
	case cfg.Wait < 0:
		return cfg, fmt.Errorf("%w: lock %q: negative wait %v", ErrInvalid, cfg.Name, cfg.Wait)
	case strings.HasSuffix(cfg.Name, " "):
		return cfg, fmt.Errorf("%w: lock name %q ends in a space", ErrInvalid, cfg.Name)
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = driver.RowIdleBound
	case cfg.IdleTimeout < time.Second || cfg.IdleTimeout > 24*time.Hour:
		return cfg, fmt.Errorf("%w: lock %q: idle timeout %v must be from 1s to 24h", ErrInvalid, cfg.Name, cfg.IdleTimeout)
	}
	return cfg, nil
}

func (rowStrategy) attach(*Lock) {}

func (rowStrategy) try(ctx context.Context, l *Lock, key string) (*Lease, error) {
	return l.tryRow(ctx, key, 0)
}

// acquire queues locally, then the first local waiter waits in the
// server's row lock queue for what is left of the lock's Wait.
func (rowStrategy) acquire(ctx context.Context, l *Lock, key string, start time.Time) (*Lease, error) {
	if l.cfg.Wait == 0 {
		return l.tryRow(ctx, key, 0)
	}
	return l.queued(ctx, key, start, func(*waiter) (*Lease, error) {
		return l.tryRow(ctx, key, max(l.cfg.Wait-l.client.clock.Now().Sub(start), 0))
	})
}

func (rowStrategy) holder(ctx context.Context, l *Lock, key string) (Holder, error) {
	return l.rowHolder(ctx, key)
}
