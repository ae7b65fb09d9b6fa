package runtime

import (
	"context"
	"database/sql"
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
	// traceCtx is the acquiring caller's context with the Tracer's
	// holding (nil without a Tracer); traceEnd ends the holding's trace
	// at Release. Both are set before the caller gets the lease.
	traceCtx context.Context
	traceEnd func(error)

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
	// release ends the holding once renewals stopped (Lease.Release);
	// abort rolls a row holding's transaction back.
	release(ctx context.Context, ls *Lease, abort bool) error
	// guard checks inside tx that the holding is still current and returns
	// Guard's error (Lease.Guard).
	guard(ctx context.Context, ls *Lease, tx *sql.Tx) error
	// tx is the holding's transaction: a row holding's, nil otherwise.
	tx() *sql.Tx
}

// poolChecked is the part of the lease and session holdings that is the
// same: Guard checks the lock row through the caller's transaction, and
// the holding has no transaction of its own.
type poolChecked struct{}

func (poolChecked) guard(ctx context.Context, ls *Lease, tx *sql.Tx) error {
	return ls.guardRow(ctx, tx)
}

func (poolChecked) tx() *sql.Tx { return nil }

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
// It keeps checking once Release has begun, until the renewal Release
// waits for has returned (the holding is in force until then), so a
// goroutine that outlives fn is told of a loss in that window too; then it
// returns ErrReleased, or the loss found meanwhile.
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
// the call: after a pause (SIGSTOP, a long GC, a VM paused by its
// hypervisor; a suspend stops the monotonic clock and is not covered) the holder's
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
	return !ls.deadline.IsZero() && !ls.clock.Now().Before(ls.deadline)
}

// LocalDeadline returns the client-side deadline by the Client's clock:
// unless a renewal succeeds first, the lease counts as lost at this time,
// which is before the database lets anyone else take it.
func (ls *Lease) LocalDeadline() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline
}

func (ls *Lease) timeLeft() time.Duration { return ls.timeLeftAt(ls.clock.Now()) }

// timeLeftAt is timeLeft at now, a reading of the clock (a batch of
// leases reads it once).
func (ls *Lease) timeLeftAt(now time.Time) time.Duration {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline.Sub(now)
}

// extend moves the local deadline later (never earlier), and the watchdog
// with it: while renewals keep a lease, its watchdog never fires. (It used
// to fire at each old deadline and re-arm itself: a goroutine per lease
// every TTL or so, an eighth of the client CPU of holding 10,000 leases.)
func (ls *Lease) extend(deadline time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if deadline.After(ls.deadline) {
		ls.deadline = deadline
		if ls.watchdog != nil {
			ls.watchdog.Reset(deadline.Sub(ls.clock.Now()))
		}
	}
}

// checkDeadline runs when the watchdog fires: the lease is lost unless a
// renewal moved the deadline just before (extend moves the watchdog too,
// but may lose that race), in which case the watchdog is re-armed.
func (ls *Lease) checkDeadline() { ls.expire(false) }

// expire is checkDeadline; from Err (async), the Observer and the logger
// hear of the loss in a goroutine of their own, not in whichever goroutine
// asked (the driver's cancel watcher, a caller holding its own locks).
func (ls *Lease) expire(async bool) {
	ls.mu.Lock()
	if ls.ctx.Err() != nil {
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
// ended already. A renewal that returns while Release waits for it still
// counts: the holding was in force until then.
func (ls *Lease) lose(cause error) {
	if ls.markLost(cause) {
		ls.logLoss(cause)
	}
}

// markLost ends the lease with cause unless it ended already, and reports
// whether it did; the caller then reports the loss (logLoss), outside any
// lock an Observer or logger could need.
func (ls *Lease) markLost(cause error) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ctx.Err() != nil {
		return false
	}
	ls.cancel(cause)
	return true
}

func (ls *Lease) logLoss(cause error) {
	ls.lock.client.observer.LeaseLost(ls.id.Name, ls.lock.cfg.Strategy)
	ls.lock.client.logger.Warn("lockgen: lease lost", "lock", ls.id.Name, "key", ls.id.Key, "token", ls.id.Token, "cause", cause)
}

// renewal runs one renewal of a holding with left before the local
// deadline and reports whether it extended the lease by a full TTL.
type renewal func(ls *Lease, left time.Duration) bool

// renewLoop renews with renew every RenewEvery, sooner when the deadline is
// near (a slow acquire or a failed renewal leaves less time), until Release
// or loss.
func (ls *Lease) renewLoop(renew renewal) {
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
		t.Reset(ls.nextRenewal(ls.renew(renew)))
	}
}

// nextRenewal is the wait before the next renewal: RenewEvery after a
// success, a quarter of it after a failure, and never more than half the
// time left before the local deadline.
func (ls *Lease) nextRenewal(renewed bool) time.Duration {
	return ls.nextRenewalAt(renewed, ls.clock.Now())
}

// nextRenewalAt is nextRenewal at now, a reading of the clock.
func (ls *Lease) nextRenewalAt(renewed bool, now time.Time) time.Duration {
	cfg := ls.lock.cfg
	next := cfg.RenewEvery
	if !renewed {
		next = max(cfg.RenewEvery/4, time.Millisecond)
	}
	return max(min(next, ls.timeLeftAt(now)/2), time.Millisecond)
}

// renew runs one renewal with renew; it reports whether the lease was
// extended by a full TTL.
func (ls *Lease) renew(renew renewal) bool {
	left := ls.timeLeft()
	if left <= 0 {
		return false // the watchdog declares the loss
	}
	return renew(ls, left)
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
// tx, ErrUnsupported on a Galera or Group Replication cluster (which does
// not certify the shared lock across nodes, so Guard cannot hold a new
// holder off there: compare the fencing token in the guarded write
// itself), or the database's error.
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
// before it was released (also when the local deadline passed while Release
// waited for the renewal in flight, which the lease's context and Err
// report at the deadline), ErrReleased when called again, and an error
// when the outcome stays unknown (the row then frees itself within one TTL).
func (ls *Lease) Release(ctx context.Context) error {
	ls.mu.Lock()
	if ls.released {
		ls.mu.Unlock()
		return fmt.Errorf("%w: %s token %d was already released", ErrReleased, ls.describe(), ls.id.Token)
	}
	ls.released = true
	abort := ls.abort
	ls.mu.Unlock()

	ls.renewCancel()
	if ls.batched {
		ls.lock.batcher.remove(ls)
	}
	// Until the renewal in flight has returned, the holding is still in
	// force: the watchdog keeps running, that renewal may still report a
	// loss, and Err checks the local deadline, so a goroutine that outlives
	// fn is told of a loss in this window too.
	<-ls.renewDone
	if ls.pastDeadline() {
		ls.expire(false)
	}
	ls.mu.Lock()
	if ls.watchdog != nil {
		ls.watchdog.Stop()
	}
	var lost error
	if ls.ctx.Err() != nil {
		lost = context.Cause(ls.ctx)
	}
	ls.cancel(ErrReleased)
	ls.mu.Unlock()
	err := ls.held.release(ctx, ls, abort)
	ls.lock.client.wake.notify(rowKey{ls.id.Name, ls.id.Key})
	ls.lock.client.observer.Released(ls.id.Name, ls.lock.cfg.Strategy, ls.clock.Now().Sub(ls.acquired))
	if lost != nil {
		err = lost
	}
	if ls.traceEnd != nil {
		ls.traceEnd(err)
	}
	return err
}

func (ls *Lease) describe() string { return ls.lock.describe(ls.id.Key) }
