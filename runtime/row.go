package runtime

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// abortOnRelease makes the release of a row holding roll its transaction
// back instead of committing it.
func (ls *Lease) abortOnRelease() {
	ls.mu.Lock()
	ls.abort = true
	ls.mu.Unlock()
}

// rowHolding is what a Lease of the row strategy holds besides its row: the
// transaction that keeps the row lock.
type rowHolding struct {
	rtx driver.RowTx
}

// rowSentinel is the expires_at of a row-strategy holding (see RowTake):
// in the past, so a holding committed by mistake looks free.
var rowSentinel = time.Date(1970, 1, 1, 0, 0, 2, 0, time.UTC)

// rowReleaseTimeout bounds the statements that end a row holding (a row
// lock has no ttl to bound them by).
const rowReleaseTimeout = 30 * time.Second

// errDisarmed is tryRowOnce's error after it disarmed a session
// reservation of the row (see driver.SessionArmed): tryRow tries again.
var errDisarmed = errors.New("lockgen: session reservation disarmed")

// tryRow acquires a row lock: with NOWAIT when wait is 0, else waiting up
// to wait on the server (InnoDB serves row lock waiters in arrival order).
func (l *Lock) tryRow(ctx context.Context, key string, wait time.Duration) (*Lease, error) {
	if err := l.client.refuseGalera(ctx, StrategyRow); err != nil {
		return nil, err
	}
	start := l.client.clock.Now()
	for attempt := 0; ; attempt++ {
		left := wait - l.client.clock.Now().Sub(start)
		lease, err := l.tryRowOnce(ctx, key, max(left, 0))
		if !servererr.IsDeadlock(err) && !errors.Is(err, errDisarmed) || attempt == maxRetries || ctx.Err() != nil {
			if errors.Is(err, errDisarmed) { // re-armed by session holdings each time: busy
				return nil, fmt.Errorf("%w: %s: session holdings keep its row", ErrNotAcquired, l.describe(key))
			}
			return lease, err
		}
		// A deadlock while creating the row (two first acquirers): the
		// server rolled back; or a session reservation was disarmed:
		// try again while the wait lasts.
		if wait > 0 && left <= 0 {
			return nil, ErrNotAcquired
		}
	}
}

func (l *Lock) tryRowOnce(ctx context.Context, key string, wait time.Duration) (*Lease, error) {
	rs := l.client.store
	lockWait := max(wait, time.Second) // Try's Take waits only for a first insert
	// The statements of the acquisition are bounded, whatever ctx allows
	// (see bounded): the server-side lock wait and the session's idle
	// bound. The holding's lease context is ctx itself.
	idle := l.cfg.IdleTimeout
	if idle <= 0 {
		idle = driver.RowIdleBound
	}
	holdCtx := ctx
	ctx, cancel := bounded(ctx, lockWait+idle)
	defer cancel()
	rtx, err := rs.RowBegin(ctx, lockWait, l.cfg.IdleTimeout)
	if err != nil {
		return nil, fmt.Errorf("lockgen: acquire %s: begin: %w", l.describe(key), err)
	}
	fail := func(err error) (*Lease, error) {
		_ = rtx.Rollback()
		if servererr.IsLockWaitFailure(err) {
			return nil, ErrNotAcquired
		}
		// A deadlock is wrapped too: tryRow retries it.
		return nil, fmt.Errorf("lockgen: acquire %s: %w", l.describe(key), err)
	}
	found := false
	if wait == 0 {
		if found, err = rtx.LockNowait(ctx, l.cfg.Name, key); err != nil {
			return fail(err)
		}
	}
	if !found {
		if err := rtx.LockWait(ctx, l.cfg.Name, key); err != nil {
			return fail(err)
		}
	}
	// A separate statement, so that its clock reads after the grant.
	token, err := rtx.Take(ctx, l.cfg.Name, key, l.client.owner)
	if err == nil && token == driver.SessionHeld {
		// The row shows a session holding: take it only if that holding's
		// server-side lock is free (see Lock.acquireRow).
		token, err = rtx.Takeover(ctx, l.cfg.Name, key, l.client.owner, sessionLockName(rs.SessionNamespace(), l.cfg.Name, key))
		if err == nil && token == driver.SessionArmed {
			// Its session reservation is still armed: this holding may be
			// rolled back, which would leave the reservation issuing
			// tokens below this one. End it durably first, then again.
			_ = rtx.Rollback()
			if err := rs.SessionDisarm(ctx, l.cfg.Name, key); err != nil {
				return nil, fmt.Errorf("lockgen: acquire %s: disarm the session reservation: %w", l.describe(key), err)
			}
			return nil, errDisarmed
		}
	}
	if err != nil {
		return fail(err)
	}
	if token == 0 {
		_ = rtx.Rollback()
		return nil, fmt.Errorf("%w: %s is held by a lease-strategy holder", ErrNotAcquired, l.describe(key))
	}
	if err := rtx.RestoreLockWait(ctx); err != nil {
		return fail(err)
	}
	return newLease(holdCtx, l, key, token, l.client.clock.Now(), &rowHolding{rtx: rtx}), nil
}

// Tx returns the transaction of a row-strategy holding, which keeps the lock
// row locked until the holding ends: writes made in it commit atomically
// with the release, and roll back with the lock when the holder dies. It is
// nil for the other strategies. Do not Commit or Rollback it: the release
// does (a holding whose transaction ended early reports ErrLeaseLost).
func (ls *Lease) Tx() *sql.Tx { return ls.held.tx() }

// start leaves the holding without a local deadline or renewals: the server
// keeps its row lock as long as its transaction.
func (h *rowHolding) start(ls *Lease) {
	ls.deadline = time.Time{}
	close(ls.renewDone)
}

func (h *rowHolding) tx() *sql.Tx { return h.rtx.Tx() }

// guard checks that the holding's own transaction, tx, still holds the row
// lock; another transaction would wait for that lock.
func (h *rowHolding) guard(ctx context.Context, ls *Lease, tx *sql.Tx) error {
	if tx != h.rtx.Tx() {
		return fmt.Errorf("%w: %s uses strategy row: write in the holding's own transaction (Lease.Tx)", ErrInvalid, ls.describe())
	}
	ok, err := h.rtx.Holds(ctx, ls.id)
	return ls.guardResult(ok, err)
}

// release ends a row holding: it marks the row free and commits (writes
// made in the transaction commit with it), or, when abort is set, rolls
// everything back.
func (h *rowHolding) release(ctx context.Context, ls *Lease, abort bool) error {
	rtx := h.rtx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rowReleaseTimeout)
	defer cancel()
	if abort {
		// Everything rolls back; still tell the caller if the holding had
		// already ended under fn.
		held, herr := rtx.Holds(ctx, ls.id)
		rerr := rtx.Rollback()
		switch {
		case errors.Is(herr, sql.ErrTxDone):
			// fn ended the transaction itself (a Commit would have kept
			// its writes, and the holding, committed): free the row.
			_, _ = ls.lock.client.store.LeaseRelease(ctx, ls.id)
			return fmt.Errorf("%w: %s token %d: its transaction ended before the release (fn must not Commit or Rollback Lease.Tx)", ErrLeaseLost, ls.describe(), ls.id.Token)
		case herr == nil && !held:
			return fmt.Errorf("%w: %s token %d: the server ended the holding's transaction before the release (a deadlock or a killed connection rolls back the lock too)", ErrLeaseLost, ls.describe(), ls.id.Token)
		case herr != nil && !errors.Is(herr, sql.ErrTxDone):
			return fmt.Errorf("%w: %s token %d: %w", ErrLeaseLost, ls.describe(), ls.id.Token, herr)
		case rerr != nil && !errors.Is(rerr, sql.ErrTxDone):
			return fmt.Errorf("lockgen: release %s token %d: rollback: %w", ls.describe(), ls.id.Token, rerr)
		}
		return nil
	}
	ok, err := rtx.Free(ctx, ls.id)
	switch {
	case errors.Is(err, sql.ErrTxDone):
		// The holding's transaction ended before the release: fn ended it,
		// or the context it began with did. The row lock ended then.
		_ = rtx.Rollback() // returns (discards) the pinned connection
		// Had fn committed, the row would show this holding: free it.
		_, _ = ls.lock.client.store.LeaseRelease(ctx, ls.id)
		return fmt.Errorf("%w: %s token %d: its transaction ended before the release (fn must not Commit or Rollback Lease.Tx)", ErrLeaseLost, ls.describe(), ls.id.Token)
	case err != nil:
		_ = rtx.Rollback()
		return fmt.Errorf("%w: %s token %d: the release failed and the transaction's writes were rolled back: %w", ErrLeaseLost, ls.describe(), ls.id.Token, err)
	case !ok:
		// The server rolled the transaction back under fn (a deadlock in
		// fn's own statements, or a killed connection): the lock was free
		// before fn ended, and fn's writes after that were not guarded.
		_ = rtx.Rollback()
		return fmt.Errorf("%w: %s token %d: the server ended the holding's transaction before the release (a deadlock or a killed connection rolls back the lock too)", ErrLeaseLost, ls.describe(), ls.id.Token)
	}
	if err := rtx.Commit(); err != nil {
		return fmt.Errorf("%w: %s token %d: commit failed, the transaction's writes may not be committed: %w", ErrLeaseLost, ls.describe(), ls.id.Token, err)
	}
	return nil
}

// rowHolder reads a row lock's holder as a READ UNCOMMITTED reader sees
// the row: a live holding is not committed until it ends.
func (l *Lock) rowHolder(ctx context.Context, key string) (Holder, error) {
	row, found, err := l.client.store.RowPeek(ctx, l.cfg.Name, key)
	if err != nil {
		return Holder{}, fmt.Errorf("lockgen: read holder of %s: %w", l.describe(key), err)
	}
	if !found {
		return Holder{}, nil
	}
	// A live row holding shows its owner and the row sentinel expiry.
	held := row.Owner != "" && row.ExpiresAt.Equal(rowSentinel)
	return Holder{Held: held, Owner: row.Owner, Token: row.Token}, nil
}

// WithTx is With for the row strategy, with fn also given the holding's
// transaction: fn's writes in tx commit atomically with the release when
// fn returns nil, and roll back (with the lock) when fn returns an error or
// panics. fn must not Commit or Rollback tx. On other strategies WithTx
// fails with ErrInvalid. It is reentrant like With: a nested call with fn's
// context joins the holding and gets the same tx.
//
// If a statement of fn fails with a deadlock (1213), the server has rolled
// back the whole transaction, lock included: fn must return that error;
// WithTx then reports ErrLeaseLost.
func (l *Lock) WithTx(ctx context.Context, key string, fn func(ctx context.Context, tx *sql.Tx, lease *Lease) error) error {
	if l.cfg.Strategy != StrategyRow {
		return fmt.Errorf("%w: lock %q: WithTx needs strategy row, not %s", ErrInvalid, l.cfg.Name, l.cfg.Strategy)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil fn for lock %q", ErrInvalid, l.cfg.Name)
	}
	key, err := l.checkKey(key)
	if err != nil {
		return err
	}
	// With commits the holding's transaction when fn returns nil and rolls
	// it back when fn fails or panics; a nested call joins the holding, and
	// the outermost call decides.
	return l.With(ctx, key, func(ctx context.Context, lease *Lease) error { return fn(ctx, lease.Tx(), lease) })
}
