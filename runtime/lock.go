package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/probe"
)

// Limits of a lock's configuration.
const (
	// MinTTL is the shortest lease a lock may declare.
	MinTTL = 100 * time.Millisecond
	// MinSafetyMargin is the smallest safety margin a lock may set: it
	// absorbs late timers, GC pauses and the microsecond truncation of TTLs.
	MinSafetyMargin = 5 * time.Millisecond
	// MaxNameLen and MaxKeyLen are the longest lock name and key the lock
	// table stores.
	MaxNameLen = 191
	MaxKeyLen  = 191
)

// LockConfig declares one lock. Generated code fills it from lockgen.yaml.
type LockConfig struct {
	// Name identifies the lock's rows. Required, at most MaxNameLen bytes.
	Name string
	// Strategy is StrategyLease (the default, also ""), StrategySession or
	// StrategyRow; both of the latter refuse Galera clusters.
	Strategy Strategy
	// Keyed locks hold one lease per key; With/Try/Acquire then need a
	// non-empty key. Unkeyed locks take the empty key only.
	Keyed bool
	// UUIDKeys makes keys UUIDs: any case is accepted and stored in
	// canonical lower-case form, so one UUID is one lock however it is
	// spelled; anything else fails with ErrInvalid.
	UUIDKeys bool
	// TTL is how long a lease lasts by the database clock without renewal.
	// Required, at least MinTTL, except for StrategyRow, which has no TTL
	// (the server holds a row lock as long as its transaction) and ignores
	// TTL, RenewEvery and SafetyMargin.
	TTL time.Duration
	// RenewEvery is the renewal period. Default TTL/3. It must leave room
	// for the safety margin: RenewEvery < TTL - SafetyMargin.
	RenewEvery time.Duration
	// SafetyMargin is subtracted from every local deadline to absorb timer
	// and scheduling delays on the client. Default TTL/10; at least
	// MinSafetyMargin.
	SafetyMargin time.Duration
	// Wait is how long With and Acquire wait for a busy lock before
	// returning ErrNotAcquired. Default 0: try once.
	Wait time.Duration
	// WaitOnServer makes a lease lock's waiters in other processes wait on
	// the server instead of polling the row: each holding also holds a
	// server-side named lock (GET_LOCK, on a connection pinned for the
	// holding, two more statements per holding) that the holder gives back
	// right after freeing the row, and the server wakes one waiter, in
	// arrival order. The holding renews and frees its row on that pinned
	// connection, so a small pool (even one connection) cannot starve its
	// renewals; a keyed lock's holdings with a wake lock are therefore
	// renewed one statement each, not in batches. The row stays the source of truth and of fencing
	// tokens; where the server cannot help (a proxy, a refused GET_LOCK)
	// waiters poll. It applies to StrategyLease only (session and row locks always wait on the server).
	WaitOnServer bool
	// IdleTimeout applies to StrategyRow only: how long the server keeps a
	// holding's session when nothing arrives on it (its wait_timeout, in
	// whole seconds, rounded up). A holder cut off by a partition frees the
	// row this long after its last statement; a live holding whose fn
	// leaves its transaction idle this long is ended by the server (fn's
	// writes roll back, and the release reports ErrLeaseLost). Default
	// driver.RowIdleBound (20 s); at least 1 s, at most 24 h.
	IdleTimeout time.Duration
}

// Lock is a declared lock bound to a Client. It is safe for concurrent use.
type Lock struct {
	client *Client
	cfg    LockConfig
	// batcher renews this keyed lease lock's leases in batches; nil for
	// other locks.
	batcher *batcher
	// strategy is how this lock is held (lease.go, session.go, row.go).
	strategy lockStrategy
	// leader is the lease of the current term of a RunAsLeader call on
	// this Lock, nil between terms.
	leader atomic.Pointer[Lease]
	// reserved are the keys of a session lock whose last holding here
	// took its token from the row's reservation (see sessionToken).
	reserved reservedKeys
}

// Lock validates cfg, applies its defaults and returns the lock. It fails
// with ErrInvalid when the configuration cannot be safe (for example a
// renewal period that does not fit in the TTL); it never "fixes" it.
func (c *Client) Lock(cfg LockConfig) (*Lock, error) {
	if cfg.Name == "" || len(cfg.Name) > MaxNameLen {
		return nil, fmt.Errorf("%w: lock name must be 1 to %d bytes", ErrInvalid, MaxNameLen)
	}
	if !utf8.ValidString(cfg.Name) {
		return nil, fmt.Errorf("%w: lock name %q is not valid UTF-8", ErrInvalid, cfg.Name)
	}
	if cfg.UUIDKeys && !cfg.Keyed {
		return nil, fmt.Errorf("%w: lock %q: UUIDKeys needs Keyed", ErrInvalid, cfg.Name)
	}
	if cfg.Strategy == "" {
		cfg.Strategy = StrategyLease
	}
	s, ok := strategies[cfg.Strategy]
	if !ok {
		return nil, fmt.Errorf("%w: lock %q: unknown strategy %q (lease, session or row)", ErrInvalid, cfg.Name, cfg.Strategy)
	}
	cfg, err := s.configure(cfg)
	if err != nil {
		return nil, err
	}
	l := &Lock{client: c, cfg: cfg, strategy: s}
	s.attach(l)
	return l, nil
}

// leaseConfig checks the timing of a lock whose holdings have a lease (a
// TTL renewed before a local deadline) and applies its defaults.
func leaseConfig(cfg LockConfig) (LockConfig, error) {
	if cfg.TTL < MinTTL {
		return cfg, fmt.Errorf("%w: lock %q: ttl %v is below the minimum %v", ErrInvalid, cfg.Name, cfg.TTL, MinTTL)
	}
	if cfg.SafetyMargin == 0 {
		cfg.SafetyMargin = cfg.TTL / 10
	}
	if cfg.RenewEvery == 0 {
		cfg.RenewEvery = cfg.TTL / 3
	}
	if cfg.SafetyMargin < MinSafetyMargin || cfg.SafetyMargin >= cfg.TTL/2 {
		return cfg, fmt.Errorf("%w: lock %q: safety margin %v must be in [%v, ttl/2)", ErrInvalid, cfg.Name, cfg.SafetyMargin, MinSafetyMargin)
	}
	if strings.HasSuffix(cfg.Name, " ") {
		return cfg, fmt.Errorf("%w: lock name %q ends in a space", ErrInvalid, cfg.Name)
	}
	if cfg.RenewEvery < 0 || cfg.RenewEvery >= cfg.TTL-cfg.SafetyMargin {
		return cfg, fmt.Errorf("%w: lock %q: renew_every %v must be below ttl - safety margin (%v)", ErrInvalid, cfg.Name, cfg.RenewEvery, cfg.TTL-cfg.SafetyMargin)
	}
	if cfg.Wait < 0 {
		return cfg, fmt.Errorf("%w: lock %q: negative wait %v", ErrInvalid, cfg.Name, cfg.Wait)
	}
	if cfg.IdleTimeout != 0 {
		return cfg, fmt.Errorf("%w: lock %q: IdleTimeout is for strategy row; a lease ends with its TTL", ErrInvalid, cfg.Name)
	}
	return cfg, nil
}

// Config returns the lock's configuration with defaults applied.
func (l *Lock) Config() LockConfig { return l.cfg }

// checkKey validates key for this lock and returns it in the form stored in
// the lock row (UUID keys in canonical lower-case form).
func (l *Lock) checkKey(key string) (string, error) {
	if l.cfg.UUIDKeys && key != "" {
		canonical, ok := canonicalUUID(key)
		if !ok {
			return "", fmt.Errorf("%w: lock %q: key %q is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", ErrInvalid, l.cfg.Name, key)
		}
		key = canonical
	}
	switch {
	case l.cfg.Keyed && key == "":
		return "", fmt.Errorf("%w: lock %q needs a non-empty key", ErrInvalid, l.cfg.Name)
	case !l.cfg.Keyed && key != "":
		return "", fmt.Errorf("%w: lock %q is not keyed; got key %q", ErrInvalid, l.cfg.Name, key)
	case len(key) > MaxKeyLen:
		return "", fmt.Errorf("%w: lock %q: key is %d bytes, the limit is %d", ErrInvalid, l.cfg.Name, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		// A server without strict mode would cut the key at the first bad
		// byte: two keys could share one row, and renewals by the
		// original key would never match it.
		return "", fmt.Errorf("%w: lock %q: key %q is not valid UTF-8", ErrInvalid, l.cfg.Name, key)
	case strings.HasSuffix(key, " "):
		// The lock table's collation ignores trailing spaces: "a" and
		// "a " would share one row.
		return "", fmt.Errorf("%w: lock %q: key %q ends in a space", ErrInvalid, l.cfg.Name, key)
	}
	return key, nil
}

// Try makes one attempt to acquire the lock for key. It returns
// ErrNotAcquired when someone else holds it. The returned lease is renewed
// in the background until Release; its Context ends when it is lost or
// released. An error other than ErrNotAcquired means the outcome is not
// known; the lock is then at worst held, unused, until its TTL expires.
func (l *Lock) Try(ctx context.Context, key string) (*Lease, error) {
	key, err := l.admit(ctx, key)
	if err != nil {
		return nil, err
	}
	start, traced := l.client.clock.Now(), l.traceAcquire(ctx, key)
	lease, err := l.tryOnce(ctx, key)
	l.observeAcquire(start, err)
	traced(lease, err)
	return lease, err
}

// admit checks key and, once per Client, that the server can run the
// lock's strategy, before an acquisition; it returns the key to use.
func (l *Lock) admit(ctx context.Context, key string) (string, error) {
	key, err := l.checkKey(key)
	if err != nil {
		return "", err
	}
	if err := l.client.checkServer(ctx, nil, probe.Feature(l.cfg.Strategy)); err != nil {
		return "", err
	}
	return key, nil
}

// observeAcquire reports an acquisition that started at start to the
// client's Observer.
func (l *Lock) observeAcquire(start time.Time, err error) {
	result := AcquireAcquired
	switch {
	case errors.Is(err, ErrNotAcquired):
		result = AcquireBusy
	case err != nil:
		result = AcquireError
	}
	l.client.observer.Acquired(l.cfg.Name, l.cfg.Strategy, result, l.client.clock.Now().Sub(start))
}

// maxRetries bounds the retries of a statement that failed with a
// transient server error (deadlock, lock wait timeout); they back off from
// retryBackoff.
const (
	maxRetries   = 5
	retryBackoff = 5 * time.Millisecond
)

// errBusyTransient marks an acquire that kept failing with transient server
// errors: Acquire treats it as a busy lock and goes on waiting. The error
// is ErrNotAcquired too: on a multi-primary cluster every retry can lose
// certification to another member's holder (a Group Replication group of
// three, two clients per member on one lock: one acquire in about 1,100
// lost six times in a row), and a Try that could not take the lock is
// busy, whatever the server said.
var errBusyTransient = errors.New("lockgen: transient server errors")

func (l *Lock) tryOnce(ctx context.Context, key string) (*Lease, error) {
	return l.strategy.try(ctx, l, key)
}

// tryLease makes one attempt at a lease lock's row. The new holding takes
// wake, a wake lock its waiter already holds (see WaitOnServer), or gets
// its own; on failure wake stays the caller's.
func (l *Lock) tryLease(ctx context.Context, key string, wake *wakeHolding) (*Lease, error) {
	clock := l.client.clock
	b := backoff{next: retryBackoff, max: 20 * retryBackoff}
	for attempt := 0; ; attempt++ {
		sent := clock.Now()
		token, err := l.acquireRow(ctx, key)
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				// No answer within the TTL (a dead connection, or a row
				// lock held that long): busy, as an answer that late
				// would have been, so that a waiter goes on waiting.
				return nil, fmt.Errorf("%w: acquiring %s did not answer within its TTL (%v): %w", ErrNotAcquired, l.describe(key), l.cfg.TTL, err)
			}
			if !IsTransient(err) || ctx.Err() != nil {
				return nil, fmt.Errorf("lockgen: acquire %s: %w", l.describe(key), err)
			}
			if attempt == maxRetries {
				return nil, fmt.Errorf("%w: acquire %s: %w: %w", ErrNotAcquired, l.describe(key), errBusyTransient, err)
			}
			if err := sleepOrWake(ctx, clock, b.step(), nil); err != nil {
				return nil, err
			}
			continue
		}
		if token == 0 {
			return nil, ErrNotAcquired
		}
		if took := clock.Now().Sub(sent); took >= l.cfg.TTL-l.cfg.SafetyMargin {
			// The lease may already have expired when the answer arrived
			// (a stalled commit): give the row back and count it as busy.
			id := driver.LeaseID{Name: l.cfg.Name, Key: key, Owner: l.client.owner, Token: token}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.TTL)
			_, _ = l.client.store.LeaseRelease(rctx, id)
			cancel()
			return nil, fmt.Errorf("%w: acquiring %s took %v, longer than its lease", ErrNotAcquired, l.describe(key), took)
		}
		return newLease(ctx, l, key, token, sent, &leaseHolding{wake: l.holdWake(ctx, key, wake, sent)}), nil
	}
}

// acquireRow runs the acquire statement for key: LeaseAcquire, then, for a
// row that shows a session holding (a node on strategy session, as during a
// rolling change), LeaseTakeover, which takes it only if that holding's
// server-side lock is free. It returns the new token, or 0.
//
// Each statement is bounded by one TTL, whatever ctx allows: an answer that
// late is given back unused anyway (tryLease), and a statement on a dead
// connection (after a blackhole, on a half-open connection) must not hold
// the caller, and a connection of the pool, until readTimeout or the
// kernel's retransmission timeout ends it.
func (l *Lock) acquireRow(ctx context.Context, key string) (int64, error) {
	ctx, cancel := bounded(ctx, l.cfg.TTL)
	defer cancel()
	store := l.client.store
	token, err := store.LeaseAcquire(ctx, l.cfg.Name, key, l.client.owner, l.cfg.TTL)
	if err != nil || token != driver.SessionHeld {
		return token, err
	}
	return store.LeaseTakeover(ctx, l.cfg.Name, key, l.client.owner, sessionLockName(store.SessionNamespace(), l.cfg.Name, key), l.cfg.TTL)
}

// Acquire acquires the lock for key, waiting up to the lock's Wait (and
// while ctx lasts). Waiters of one process queue first come, first served,
// and only the first one waits on the database: on the server for session
// and row locks and for lease locks with WaitOnServer, otherwise polling
// with exponential backoff and jitter; a release in this process wakes it
// at once.
// It returns ErrNotAcquired when the wait ends, or ctx's error.
func (l *Lock) Acquire(ctx context.Context, key string) (*Lease, error) {
	key, err := l.admit(ctx, key)
	if err != nil {
		return nil, err
	}
	start, traced := l.client.clock.Now(), l.traceAcquire(ctx, key)
	lease, err := l.acquire(ctx, key, start)
	l.observeAcquire(start, err)
	traced(lease, err)
	return lease, err
}

func (l *Lock) acquire(ctx context.Context, key string, start time.Time) (*Lease, error) {
	return l.strategy.acquire(ctx, l, key, start)
}

// queued runs take for the first local waiter for key: waiters of one
// process queue first come, first served, and only the first one waits on
// the database.
func (l *Lock) queued(ctx context.Context, key string, start time.Time, take func(w *waiter) (*Lease, error)) (*Lease, error) {
	k := rowKey{l.cfg.Name, key}
	w := l.client.wake.join(k)
	defer l.client.wake.leave(k, w)
	if err := l.waitTurn(ctx, w, start, key); err != nil {
		return nil, err
	}
	return take(w)
}

// acquireLease is a lease lock's wait for key, as the first local waiter:
// polling the row with backoff (or waiting on the server for its wake lock,
// WaitOnServer) until the lock's Wait from start has passed.
func (l *Lock) acquireLease(ctx context.Context, key string, start time.Time, w *waiter) (*Lease, error) {
	clock := l.client.clock
	lw := l.newLeaseWaiter(key, w.wake, min(500*time.Millisecond, l.cfg.TTL/2))
	defer lw.close(ctx)
	for {
		lease, err := lw.try(ctx)
		if !errors.Is(err, ErrNotAcquired) && !errors.Is(err, errBusyTransient) {
			return lease, err
		}
		left := l.cfg.Wait - clock.Now().Sub(start)
		if left <= 0 {
			if errors.Is(err, errBusyTransient) {
				return nil, err
			}
			return nil, ErrNotAcquired
		}
		if err := lw.pause(ctx, left); err != nil {
			return nil, fmt.Errorf("lockgen: waiting for %s: %w", l.describe(key), err)
		}
	}
}

// waitTurn waits until w is the first local waiter, the lock's Wait has
// passed since start (ErrNotAcquired), or ctx ends.
func (l *Lock) waitTurn(ctx context.Context, w *waiter, start time.Time, key string) error {
	select {
	case <-w.turn:
		return nil
	default:
	}
	t := l.client.clock.NewTimer(max(l.cfg.Wait-l.client.clock.Now().Sub(start), 0))
	defer t.Stop()
	select {
	case <-w.turn:
		return nil
	case <-t.C():
		return ErrNotAcquired
	case <-ctx.Done():
		return fmt.Errorf("lockgen: waiting for %s: %w", l.describe(key), context.Cause(ctx))
	}
}

func (l *Lock) describe(key string) string {
	if !l.cfg.Keyed {
		return fmt.Sprintf("lock %q", l.cfg.Name)
	}
	return fmt.Sprintf("lock %q key %q", l.cfg.Name, key)
}

// canonicalUUID returns s as a lower-case 8-4-4-4-12 UUID, or false.
func canonicalUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return "", false
			}
		}
	}
	return string(b), true
}
