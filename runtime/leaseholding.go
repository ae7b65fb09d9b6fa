package runtime

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// leaseHolding is what a Lease of the lease strategy holds besides its
// row: nothing, or the wake lock of a lock with WaitOnServer.
type leaseHolding struct {
	poolChecked
	// wake is the wake lock; nil without WaitOnServer, when the server did
	// not grant it, or once its connection failed. The holding renews and
	// frees its row on wake's pinned connection. Only the renewal loop
	// changes it, and Release reads it after that loop ended.
	wake *wakeHolding
}

// start arms the watchdog and renews in the Lock's batches (a keyed lock's
// holding without a wake lock) or in a loop of its own.
func (h *leaseHolding) start(ls *Lease) {
	ls.startWatchdog()
	if b := ls.lock.batcher; b != nil && h.wake == nil {
		ls.batched = true
		b.add(ls)
	} else {
		go ls.renewLoop(h.renew)
	}
}

// renew renews through the pool, or on the wake lock's pinned connection
// when there is one, so that its renewals never wait for a pool its own
// wake lock may have exhausted; through the pool too when that connection
// fails or is slow (hedge), and then the wake lock is dropped (the server
// frees it with the connection).
func (h *leaseHolding) renew(ls *Lease, left time.Duration) bool {
	if h.wake == nil {
		renewed, _ := ls.renewRow(left, nil)
		return renewed
	}
	wake := h.wake
	renewed, wakeLost := ls.renewRow(left, func(ctx context.Context) (bool, error) {
		return wake.conn.Renew(ctx, ls.id, ls.lock.cfg.TTL)
	})
	if wakeLost {
		ls.lock.client.logger.Debug("lockgen: renewal on the wake lock's connection failed or was slow; dropping the wake lock", "lock", ls.id.Name, "key", ls.id.Key)
		_ = wake.conn.Discard()
		h.wake = nil
		ls.lock.client.wake.unhold(rowKey{ls.id.Name, ls.id.Key})
	}
	return renewed
}

// release frees the row, on the wake lock's connection when there is one.
func (h *leaseHolding) release(ctx context.Context, ls *Lease, _ bool) error {
	if h.wake != nil {
		return h.releaseOnWake(ctx, ls)
	}
	return ls.releaseRow(ctx, false)
}

// renewRow renews the lease row, with onWake (the wake lock's pinned
// connection) first when it is not nil, and through the pool when onWake
// fails or is slow, or from the start without it (hedge: a second attempt
// through the pool when the first is slow). It reports whether the lease
// was extended by a full TTL, and whether the answer did not come from
// onWake (the caller then drops the wake lock: its connection failed or
// was closed by the hedge). When the renewal renewed nothing or its
// outcome is unknown, it re-reads the row and decides by owner and token,
// which stay the same for the whole holding.
func (ls *Lease) renewRow(left time.Duration, onWake func(context.Context) (bool, error)) (renewed, wakeLost bool) {
	cfg := ls.lock.cfg
	store := ls.lock.client.store
	pool := func(ctx context.Context) (bool, error) {
		// Ends at Release too, where onWake does not (see below).
		ctx, cancel := context.WithCancel(ctx)
		defer context.AfterFunc(ls.renewCtx, cancel)()
		defer cancel()
		return store.LeaseRenew(ctx, ls.id, cfg.TTL)
	}
	first := pool
	parent := ls.renewCtx
	if onWake != nil {
		// Not tied to renewCtx: cancelling a statement makes the driver
		// close the pinned connection, which would drop the wake lock under
		// a Release that only wants the renewals to stop.
		first, parent = onWake, context.WithoutCancel(ls.renewCtx)
	}
	ctx, cancel := context.WithTimeout(parent, max(left, time.Millisecond))
	defer cancel()
	r := hedge(ctx, ls.clock, store.Server().DB, left/3, first, pool)
	wakeLost = onWake != nil && (r.second || r.err != nil)
	if r.err == nil && r.v {
		ls.extend(r.sent.Add(cfg.TTL - cfg.SafetyMargin))
		return true, wakeLost
	}
	// No row renewed is no proof of a loss: a renewal that started first
	// and stalled on the server renews nothing when a later one already
	// set a later expiry (the expiry never moves back). The re-read decides.
	if ls.renewCtx.Err() != nil {
		return false, wakeLost // released meanwhile
	}
	sent := ls.clock.Now()
	row, found, gerr := store.LeaseGet(ctx, ls.id.Name, ls.id.Key)
	if gerr != nil {
		ls.lock.client.observer.RenewFailed(ls.id.Name, ls.lock.cfg.Strategy)
		ls.lock.client.logger.Warn("lockgen: lease renewal failed", "lock", ls.id.Name, "key", ls.id.Key, "token", ls.id.Token, "error", r.err, "reread_error", gerr)
		return false, wakeLost
	}
	if !ls.holds(row, found) {
		if r.err == nil {
			ls.lose(fmt.Errorf("%w: %s: the database shows it expired or taken", ErrLeaseLost, ls.describe()))
		} else {
			ls.lose(fmt.Errorf("%w: %s: the database shows it expired or taken (after renew error: %v)", ErrLeaseLost, ls.describe(), r.err))
		}
		return false, wakeLost
	}
	// At most a TTL: a database clock that stepped back leaves more.
	ls.extend(sent.Add(min(row.Remaining, cfg.TTL) - cfg.SafetyMargin))
	return false, wakeLost // retry soon: the renewal may not have applied
}

// holds reports whether row shows this holding still in force.
func (ls *Lease) holds(row driver.LeaseRow, found bool) bool {
	return found && row.Owner == ls.id.Owner && row.Token == ls.id.Token && row.Remaining > 0
}

// guardRow is Guard for the holdings that keep their row by its token
// (lease and session): a shared lock on the row, in tx, if it still
// shows this holding.
func (ls *Lease) guardRow(ctx context.Context, tx *sql.Tx) error {
	// The probe ran at the acquire (generated stores), so this needs no
	// second connection while tx holds one. On a cluster the guard's LOCK
	// IN SHARE MODE holds off only acquires on this node, so a guarded
	// transaction could commit after a new holder acquired on another.
	if err := ls.lock.client.guardRefusal(ctx); err != nil {
		return err
	}
	ok, err := ls.lock.client.store.LeaseGuard(ctx, tx, ls.id)
	return ls.guardResult(ok, err)
}

// releaseOnWake frees the row on the wake lock's pinned connection (through
// the pool if that fails), then gives the wake lock back: the waiter it
// wakes finds the row free.
func (h *leaseHolding) releaseOnWake(ctx context.Context, ls *Lease) error {
	defer ls.lock.client.wake.unhold(rowKey{ls.id.Name, ls.id.Key})
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ls.lock.cfg.TTL)
	ok, err := h.wake.conn.Free(fctx, ls.id)
	cancel()
	if err != nil {
		_ = h.wake.conn.Discard() // frees the wake lock too
		return ls.releaseRow(ctx, true)
	}
	h.wake.release(ctx)
	if !ok {
		return fmt.Errorf("%w: %s: it had expired before release", ErrLeaseLost, ls.describe())
	}
	return nil
}

// releaseRow frees the row through the pool; unsure: an earlier attempt
// may have freed it already.
func (ls *Lease) releaseRow(ctx context.Context, unsure bool) error {
	cfg := ls.lock.cfg
	store := ls.lock.client.store
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.TTL)
	defer cancel()
	b := backoff{next: 10 * time.Millisecond, max: cfg.TTL / 4}
	for retried := unsure; ; retried = true {
		ok, err := store.LeaseRelease(ctx, ls.id)
		if err == nil {
			// After an attempt with an unknown outcome, "not held" most
			// likely means that attempt applied.
			if !ok && !retried {
				return fmt.Errorf("%w: %s: it had expired before release", ErrLeaseLost, ls.describe())
			}
			return nil
		}
		// Outcome unknown: done if the row no longer shows this holding.
		row, found, gerr := store.LeaseGet(ctx, ls.id.Name, ls.id.Key)
		if gerr == nil && !ls.holds(row, found) {
			return nil
		}
		t := ls.clock.NewTimer(b.step())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lockgen: release %s token %d: outcome unknown, the row frees itself within its ttl: %w", ls.describe(), ls.id.Token, errors.Join(err, context.Cause(ctx)))
		case <-t.C():
		}
	}
}
