package runtime

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// Lease is one holding of a lock. It is renewed in the background until
// Release. Its methods are safe for concurrent use.
type Lease struct {
	lock     *Lock
	id       driver.LeaseID
	clock    Clock
	acquired time.Time // when the acquire request was sent, by clock
	// held is what the holding holds besides its token, by strategy: a
	// *leaseHolding, *sessionHolding or *rowHolding. Lease never asks
	// which.
	held holding
	// batched: the Lock's batcher renews this lease.
	batched bool

	// ctx ends when the lease is lost (cause wraps ErrLeaseLost) or
	// released (cause ErrReleased). view is what Context returns: ctx, with
	// an Err that checks the local deadline itself (see leaseContext).
	ctx    context.Context
	cancel context.CancelCauseFunc
	view   context.Context

	// renewCtx ends at Release; it bounds the renewal loop's statements.
	renewCtx    context.Context
	renewCancel context.CancelFunc
	renewDone   chan struct{}

	mu       sync.Mutex
	deadline time.Time // local deadline, by clock
	released bool
	abort    bool  // a row holding rolls back instead of committing
	watchdog Timer // nil for a row holding, which has no deadline
}

// holding is what a Lease holds besides its lock row's token, by
// strategy: for the lease strategy nothing or a wake lock (leaseHolding),
// a pinned connection (sessionHolding), a transaction (rowHolding). Each
// strategy's file implements it; Lease calls it and never switches on the
// strategy.
type holding interface {
	// start begins keeping the holding alive: the local-deadline watchdog
	// and renewals, or, for a row holding, nothing (the server keeps a
	// row lock as long as its transaction; it has no deadline).
	start(ls *Lease)
	// renew runs one renewal with left before the local deadline and
	// reports whether it extended the lease by a full TTL (Lease.renew).
	renew(ls *Lease, left time.Duration) bool
	// release ends the holding once renewals stopped (Lease.Release);
	// abort rolls a row holding's transaction back.
	release(ctx context.Context, ls *Lease, abort bool) error
	// guard checks inside tx that the holding is still current and returns
	// Guard's error (Lease.Guard).
	guard(ctx context.Context, ls *Lease, tx *sql.Tx) error
	// tx is the holding's transaction: a row holding's, nil otherwise.
	tx() *sql.Tx
}

// newLease starts keeping a holding whose acquire request was sent at sent
// (see holding.start).
func newLease(ctx context.Context, l *Lock, key string, token int64, sent time.Time, h holding) *Lease {
	parent := context.WithoutCancel(ctx)
	ls := &Lease{
		lock:      l,
		id:        driver.LeaseID{Name: l.cfg.Name, Key: key, Owner: l.client.owner, Token: token},
		clock:     l.client.clock,
		acquired:  sent,
		held:      h,
		renewDone: make(chan struct{}),
		deadline:  sent.Add(l.cfg.TTL - l.cfg.SafetyMargin),
	}
	ls.ctx, ls.cancel = context.WithCancelCause(parent)
	ls.view = leaseContext{Context: ls.ctx, ls: ls}
	ls.renewCtx, ls.renewCancel = context.WithCancel(parent)
	h.start(ls)
	return ls
}

// startWatchdog arms the local deadline: when it passes without a renewal,
// the lease is lost.
func (ls *Lease) startWatchdog() {
	ls.mu.Lock()
	ls.watchdog = ls.clock.AfterFunc(ls.deadline.Sub(ls.clock.Now()), ls.checkDeadline)
	ls.mu.Unlock()
}

// Token returns the fencing token of this holding: greater than the token of
// every earlier holding of the same lock and key. Pass it with writes that a
// stale holder must not make, and have the writer reject tokens lower than
// the highest it has seen.
func (ls *Lease) Token() int64 { return ls.id.Token }

// Name returns the lock's name.
func (ls *Lease) Name() string { return ls.id.Name }

// Key returns the key this lease holds ("" for unkeyed locks).
func (ls *Lease) Key() string { return ls.id.Key }

// Owner returns the owner identity recorded in the lock row.
func (ls *Lease) Owner() string { return ls.id.Owner }

// Context returns a context that ends when the lease is lost (its cause
// wraps ErrLeaseLost) or released (cause ErrReleased). It carries the values
// of the context the lease was acquired with, not its cancellation. Its Err
// reads the clock itself: once the local deadline has passed without a
// renewal it reports the loss, even when the process was paused and the
// watchdog goroutine has not run yet, and Done is closed by then.
// Contexts derived from it end when its Done closes.
func (ls *Lease) Context() context.Context { return ls.view }

// Done is closed when the lease is lost or released. After a pause past the
// local deadline, call Err (or Held): Done closes when the watchdog
// goroutine runs, which may be after the paused code resumed.
func (ls *Lease) Done() <-chan struct{} { return ls.ctx.Done() }

// Err returns nil while the lease is held, then the reason it ended: an
// error wrapping ErrLeaseLost, or ErrReleased. It checks the local deadline
// against the clock at the call, so the first check after a pause past the
// deadline reports the loss, before the database lets anyone else in (the
// deadline is TTL − SafetyMargin after the acquire or renewal was sent).
// A nil answer can still be stale by the time a write that follows it
// lands: only the fencing token, or Guard inside the write's transaction,
// closes that window.
func (ls *Lease) Err() error {
	if ls.view.Err() == nil {
		return nil
	}
	return context.Cause(ls.ctx)
}

// Held reports whether the lease is still held by the local deadline,
// checked now: Err() == nil. It costs a clock read and a mutex, no
// statement.
func (ls *Lease) Held() bool { return ls.Err() == nil }

// leaseContext is a lease's context whose Err checks the local deadline at
// the call: after a pause (SIGSTOP, a VM freeze, a long GC) the holder's
// own goroutine often runs before the watchdog's, and must not read nil.
// It cancels the lease first, so Done is closed before Err is non-nil.
type leaseContext struct {
	context.Context
	ls *Lease
}

// Err implements context.Context.
func (c leaseContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.ls.pastDeadline() {
		c.ls.expire(true)
	}
	return c.Context.Err()
}

// pastDeadline reports whether the local deadline of a holding that has one
// has passed by the clock.
func (ls *Lease) pastDeadline() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return !ls.deadline.IsZero() && !ls.released && !ls.clock.Now().Before(ls.deadline)
}

// LocalDeadline returns the client-side deadline by the Client's clock:
// unless a renewal succeeds first, the lease counts as lost at this time,
// which is before the database lets anyone else take it.
func (ls *Lease) LocalDeadline() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline
}

func (ls *Lease) timeLeft() time.Duration {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline.Sub(ls.clock.Now())
}

// extend moves the local deadline later (never earlier).
func (ls *Lease) extend(deadline time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if deadline.After(ls.deadline) {
		ls.deadline = deadline
	}
}

// checkDeadline runs when the watchdog fires: the lease is lost unless a
// renewal moved the deadline, in which case the watchdog is re-armed.
func (ls *Lease) checkDeadline() { ls.expire(false) }

// expire is checkDeadline; from Err (async), the Observer and the logger
// hear of the loss in a goroutine of their own, not in whichever goroutine
// asked (the driver's cancel watcher, a caller holding its own locks).
func (ls *Lease) expire(async bool) {
	ls.mu.Lock()
	if ls.released || ls.ctx.Err() != nil {
		ls.mu.Unlock()
		return
	}
	if left := ls.deadline.Sub(ls.clock.Now()); left > 0 {
		ls.watchdog.Reset(left)
		ls.mu.Unlock()
		return
	}
	cause := fmt.Errorf("%w: %s: no successful renewal before the local deadline", ErrLeaseLost, ls.describe())
	ls.cancel(cause)
	ls.mu.Unlock()
	if async {
		go ls.logLoss(cause)
		return
	}
	ls.logLoss(cause)
}

// lose ends a lease the database showed as not held any more, unless it
// was released meanwhile.
func (ls *Lease) lose(cause error) {
	ls.mu.Lock()
	if ls.released || ls.ctx.Err() != nil {
		ls.mu.Unlock()
		return
	}
	ls.cancel(cause)
	ls.mu.Unlock()
	ls.logLoss(cause)
}

func (ls *Lease) logLoss(cause error) {
	ls.lock.client.observer.LeaseLost(ls.id.Name, ls.lock.cfg.Strategy)
	ls.lock.client.logger.Warn("lockgen: lease lost", "lock", ls.id.Name, "key", ls.id.Key, "token", ls.id.Token, "cause", cause)
}

// renewLoop renews every RenewEvery, sooner when the deadline is near (a
// slow acquire or a failed renewal leaves less time), until Release or loss.
func (ls *Lease) renewLoop() {
	defer close(ls.renewDone)
	t := ls.clock.NewTimer(ls.nextRenewal(true))
	defer t.Stop()
	for {
		select {
		case <-ls.renewCtx.Done():
			return
		case <-ls.ctx.Done():
			return
		case <-t.C():
		}
		t.Reset(ls.nextRenewal(ls.renew()))
	}
}

// nextRenewal is the wait before the next renewal: RenewEvery after a
// success, a quarter of it after a failure, and never more than half the
// time left before the local deadline.
func (ls *Lease) nextRenewal(renewed bool) time.Duration {
	cfg := ls.lock.cfg
	next := cfg.RenewEvery
	if !renewed {
		next = max(cfg.RenewEvery/4, time.Millisecond)
	}
	return max(min(next, ls.timeLeft()/2), time.Millisecond)
}

// renew runs one renewal; it reports whether the lease was extended by a
// full TTL.
func (ls *Lease) renew() bool {
	left := ls.timeLeft()
	if left <= 0 {
		return false // the watchdog declares the loss
	}
	return ls.held.renew(ls, left)
}

// leaseHolding is what a Lease of the lease strategy holds besides its
// row: nothing, or the wake lock of a lock with WaitOnServer.
type leaseHolding struct {
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
		go ls.renewLoop()
	}
}

// renew renews on the wake lock's connection when there is one, else
// through the pool.
func (h *leaseHolding) renew(ls *Lease, left time.Duration) bool {
	if h.wake != nil {
		if renewed, ok := h.renewOnWake(ls, left); ok {
			return renewed
		}
	}
	return ls.renewRow(left)
}

// release frees the row, on the wake lock's connection when there is one.
func (h *leaseHolding) release(ctx context.Context, ls *Lease, _ bool) error {
	if h.wake != nil {
		return h.releaseOnWake(ctx, ls)
	}
	return ls.releaseRow(ctx, false)
}

func (h *leaseHolding) guard(ctx context.Context, ls *Lease, tx *sql.Tx) error {
	return ls.guardRow(ctx, tx)
}

func (h *leaseHolding) tx() *sql.Tx { return nil }

// renewRow renews the lease row through the pool. On an unknown outcome it
// re-reads the row and decides by owner and token, which stay the same for
// the whole holding.
func (ls *Lease) renewRow(left time.Duration) bool {
	cfg := ls.lock.cfg
	ctx, cancel := context.WithTimeout(ls.renewCtx, left)
	defer cancel()
	store := ls.lock.client.store
	sent := ls.clock.Now()
	ok, err := store.LeaseRenew(ctx, ls.id, cfg.TTL)
	if err == nil {
		if !ok {
			ls.lose(fmt.Errorf("%w: %s: the database shows it expired or taken", ErrLeaseLost, ls.describe()))
			return false
		}
		ls.extend(sent.Add(cfg.TTL - cfg.SafetyMargin))
		return true
	}
	if ls.renewCtx.Err() != nil {
		return false // released meanwhile
	}
	sent = ls.clock.Now()
	row, found, gerr := store.LeaseGet(ctx, ls.id.Name, ls.id.Key)
	if gerr != nil {
		ls.lock.client.observer.RenewFailed(ls.id.Name, ls.lock.cfg.Strategy)
		ls.lock.client.logger.Warn("lockgen: lease renewal failed", "lock", ls.id.Name, "key", ls.id.Key, "token", ls.id.Token, "error", err, "reread_error", gerr)
		return false
	}
	if !ls.holds(row, found) {
		ls.lose(fmt.Errorf("%w: %s: the database shows it expired or taken (after renew error: %v)", ErrLeaseLost, ls.describe(), err))
		return false
	}
	ls.extend(sent.Add(row.Remaining - cfg.SafetyMargin))
	return false // retry soon: the renewal may not have applied
}

// renewOnWake renews on the wake lock's pinned connection, which the
// holding owns, so that its renewals never wait for a pool its own wake
// lock may have exhausted. done is false when the connection failed: the
// wake lock is then dropped (the server frees it with the connection) and
// the caller renews through the pool.
func (h *leaseHolding) renewOnWake(ls *Lease, left time.Duration) (renewed, done bool) {
	cfg := ls.lock.cfg
	// Not tied to renewCtx: cancelling a statement makes the driver close
	// the pinned connection, which would drop the wake lock under a
	// Release that only wants the renewals to stop.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ls.renewCtx), left)
	defer cancel()
	sent := ls.clock.Now()
	ok, err := h.wake.conn.Renew(ctx, ls.id, cfg.TTL)
	switch {
	case err == nil && ok:
		ls.extend(sent.Add(cfg.TTL - cfg.SafetyMargin))
		return true, true
	case err == nil:
		ls.lose(fmt.Errorf("%w: %s: the database shows it expired or taken", ErrLeaseLost, ls.describe()))
		return false, true
	}
	ls.lock.client.logger.Debug("lockgen: renewal on the wake lock's connection failed; dropping the wake lock", "lock", ls.id.Name, "key", ls.id.Key, "error", err)
	_ = h.wake.conn.Discard()
	h.wake = nil
	ls.lock.client.wake.unhold(rowKey{ls.id.Name, ls.id.Key})
	return false, false
}

// holds reports whether row shows this holding still in force.
func (ls *Lease) holds(row driver.LeaseRow, found bool) bool {
	return found && row.Owner == ls.id.Owner && row.Token == ls.id.Token && row.Remaining > 0
}

// Guard checks, inside tx (the caller's own transaction on the same
// database as the lock table), that this holding is still current: same
// owner and token, unexpired by the database clock. It then holds a shared
// lock on the lock row until tx commits or rolls back, so no new holder can
// acquire the lock before tx's writes are committed: guarded writes are safe
// even after a GC pause that outlived the lease. Renewals of this lease wait
// for tx too (and, when a client renews many keys of a lock in one batch,
// so do the renewals of its other keys): keep guarded transactions well
// below TTL - TTL/10 - RenewEvery, or the lease is lost.
//
// Guard returns an error wrapping ErrLeaseLost when the holding is over (the
// caller must roll tx back), ErrReleased after Release, ErrInvalid for a nil
// tx, ErrUnsupported on a Galera cluster (which does not replicate the
// shared lock, so Guard cannot hold a new holder off there: compare the
// fencing token in the guarded write itself), or the database's error.
func (ls *Lease) Guard(ctx context.Context, tx *sql.Tx) error {
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", ErrInvalid)
	}
	ls.mu.Lock()
	released := ls.released
	ls.mu.Unlock()
	if released {
		return fmt.Errorf("%w: guard on %s token %d after release", ErrReleased, ls.describe(), ls.id.Token)
	}
	if err := ls.Err(); err != nil {
		return err
	}
	return ls.held.guard(ctx, ls, tx)
}

// guardRow is Guard for the holdings that keep their row by its token
// (lease and session): a shared lock on the row, in tx, if it still
// shows this holding.
func (ls *Lease) guardRow(ctx context.Context, tx *sql.Tx) error {
	// The probe ran at the acquire (generated stores), so this needs no
	// second connection while tx holds one.
	galera, err := ls.lock.client.galeraNode(ctx)
	if err != nil {
		return err
	}
	if galera {
		// Galera certifies writes, not shared locks: the guard's LOCK IN
		// SHARE MODE is not replicated, so a guarded transaction on one
		// node could commit after a new holder acquired on another.
		return fmt.Errorf("%w: Guard on a Galera cluster (wsrep_on): shared row locks are not replicated, so another node's holder could acquire before the guarded writes commit; check the fencing token in the write itself", ErrUnsupported)
	}
	ok, err := ls.lock.client.store.LeaseGuard(ctx, tx, ls.id)
	return ls.guardResult(ok, err)
}

// guardResult is Guard's error for a check that found the holding current
// (ok) or not, or failed with err.
func (ls *Lease) guardResult(ok bool, err error) error {
	if err != nil {
		return fmt.Errorf("lockgen: guard %s token %d: %w", ls.describe(), ls.id.Token, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s token %d is no longer current", ErrLeaseLost, ls.describe(), ls.id.Token)
	}
	return nil
}

// Release stops renewal and frees the lock row if this holding still has it;
// it never touches a row another holder has taken. It ignores ctx's
// cancellation (a request that ended must still free its lock; ctx's values
// are kept) and gives up after one TTL, when the row is free anyway.
// Release returns an error wrapping ErrLeaseLost if the lease was lost
// before it was released, ErrReleased when called again, and an error when
// the outcome stays unknown (the row then frees itself within one TTL).
func (ls *Lease) Release(ctx context.Context) error {
	ls.mu.Lock()
	if ls.released {
		ls.mu.Unlock()
		return fmt.Errorf("%w: %s token %d was already released", ErrReleased, ls.describe(), ls.id.Token)
	}
	ls.released = true
	if ls.watchdog != nil {
		ls.watchdog.Stop()
	}
	abort := ls.abort
	ls.mu.Unlock()

	ls.renewCancel()
	if ls.batched {
		ls.lock.batcher.remove(ls)
	}
	<-ls.renewDone
	var lost error
	if ls.ctx.Err() != nil {
		lost = context.Cause(ls.ctx)
	}
	ls.cancel(ErrReleased)
	err := ls.held.release(ctx, ls, abort)
	ls.lock.client.wake.notify(rowKey{ls.id.Name, ls.id.Key})
	ls.lock.client.observer.Released(ls.id.Name, ls.lock.cfg.Strategy, ls.clock.Now().Sub(ls.acquired))
	if lost != nil {
		return lost
	}
	return err
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

func (ls *Lease) describe() string { return ls.lock.describe(ls.id.Key) }
