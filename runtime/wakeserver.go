package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// Waiting on the server for a lease (LockConfig.WaitOnServer).
//
// A holder of such a lease also holds a server-side named lock, the wake
// lock, on a connection pinned for the holding, and gives it back right
// after it freed the lease row. A waiter in another process blocks in
// GET_LOCK on the wake lock instead of polling the row: the server wakes
// exactly one waiter (in arrival order) when the holder releases, or when
// the holder's connection dies. The woken waiter then holds the wake lock
// and tries the row; when it gets the row, the wake lock it already holds
// becomes its holding's wake lock. A holding renews and frees its row on
// the wake lock's connection, never waiting for the pool its wake lock
// takes a connection from; if that connection fails, the holding drops the
// wake lock and goes on through the pool.
//
// The lease row stays the only source of truth and of fencing tokens: the
// wake lock only decides when a waiter looks at the row. Whenever it cannot
// help (the holder has no wake lock, the server refuses GET_LOCK, a proxy
// multiplexes connections) the waiter falls back to polling with backoff,
// and every server-side wait is bounded by one TTL, so a holder whose lease
// expired while its wake lock lives on delays nobody by more than that.

// wakeHolding is the wake lock held on a pinned connection, by a holding or
// by a waiter about to become one.
type wakeHolding struct {
	conn driver.SessionConn
	name string
}

// wakeLockName is the server-wide name of the wake lock of (name, key); it
// differs from the session strategy's name for the same lock, so a rolling
// change between lease and session keeps the two apart.
func wakeLockName(namespace, name, key string) string {
	return sessionLockName(namespace+"wake:", name, key)
}

// getWake pins a connection and waits up to wait on the server for key's
// wake lock. It returns the held wake lock, or nil when the wait ended
// without it (err nil) or failed (err set); the connection is then given
// back (or discarded when the server may have granted the lock).
func (l *Lock) getWake(ctx context.Context, key string, wait time.Duration) (*wakeHolding, error) {
	ss := l.client.store
	name := wakeLockName(ss.SessionNamespace(), l.cfg.Name, key)
	conn, err := ss.SessionConn(ctx)
	if err != nil {
		return nil, err
	}
	got, err := l.client.getLock(ctx, conn, name, wait)
	switch {
	case err != nil:
		_ = conn.Discard()
		return nil, err
	case got != 1:
		_ = conn.Close()
		return nil, nil
	}
	return &wakeHolding{conn: conn, name: name}, nil
}

// release gives the wake lock back, waking the next waiter on the server,
// and returns the connection (discarded if that failed).
func (w *wakeHolding) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rowReleaseTimeout)
	defer cancel()
	if released, err := w.conn.ReleaseLock(ctx, w.name); err != nil || released != 1 {
		_ = w.conn.Discard() // the server frees the lock with the connection
		return
	}
	_ = w.conn.Close()
}

// holdWake gives a new lease holding of key its wake lock: the one the
// waiter already holds, or a fresh one when the server has it free. A
// holding without a wake lock is still a correct holding; waiters elsewhere
// then poll. Pinning the connection and GET_LOCK wait at most the safety
// margin and at most half the lease time still left (the acquire was sent
// at sent), so an exhausted pool costs the holding its wake lock, not its
// lease time.
func (l *Lock) holdWake(ctx context.Context, key string, held *wakeHolding, sent time.Time) *wakeHolding {
	if !l.cfg.WaitOnServer {
		return nil
	}
	budget := min(l.cfg.SafetyMargin, (l.cfg.TTL-l.cfg.SafetyMargin-l.client.clock.Now().Sub(sent))/2)
	if held == nil && budget > 0 {
		wctx, cancel := context.WithTimeout(ctx, budget)
		var err error
		held, err = l.getWake(wctx, key, 0)
		cancel()
		if err != nil {
			l.client.logger.Debug("lockgen: no wake lock for the holding; waiters elsewhere poll", "lock", l.cfg.Name, "key", key, "error", err)
		}
	}
	if held != nil {
		l.client.wake.hold(rowKey{l.cfg.Name, key})
	}
	return held
}

// leaseWaiter is the waiting state of the first local waiter of a lease
// lock (Acquire or a campaign). Without WaitOnServer it polls the
// row with backoff and jitter, woken at once by a local release. With it,
// it waits on the server for the holder's wake lock, and keeps the wake
// lock it got until a holding takes it.
type leaseWaiter struct {
	l     *Lock
	key   string
	local <-chan struct{} // a local release happened
	wake  *wakeHolding    // held until a holding takes it (or close)
	b     backoff
}

// newLeaseWaiter returns the waiter for key; local is the waiter's local
// wake-up channel and maxPoll its longest poll interval.
func (l *Lock) newLeaseWaiter(key string, local <-chan struct{}, maxPoll time.Duration) *leaseWaiter {
	return &leaseWaiter{l: l, key: key, local: local, b: backoff{next: 5 * time.Millisecond, max: maxPoll}}
}

// try makes one attempt at the row; a new holding takes the waiter's wake
// lock.
func (s *leaseWaiter) try(ctx context.Context) (*Lease, error) {
	lease, err := s.l.tryLease(ctx, s.key, s.wake)
	if err == nil {
		s.wake = nil
	}
	return lease, err
}

// pause waits, after a busy attempt, at most left: with WaitOnServer on the
// server until the holder's wake lock frees (at most one TTL); otherwise,
// or when this waiter already holds the wake lock or the server refused to
// wait, one backoff step or a local release. It returns the cause of ctx
// when ctx ends.
func (s *leaseWaiter) pause(ctx context.Context, left time.Duration) error {
	l := s.l
	if l.cfg.WaitOnServer && s.wake == nil && l.client.wake.heldHere(rowKey{l.cfg.Name, s.key}) {
		// The holder is in this process: its release wakes this waiter
		// locally, without a connection blocked on the server.
		return sleepOrWake(ctx, l.client.clock, min(left, l.cfg.TTL), s.local)
	}
	if l.cfg.WaitOnServer && s.wake == nil {
		wait := min(left, l.cfg.TTL)
		start := l.client.clock.Now()
		// Bounded beyond the server-side wait too: pinning a connection
		// from an exhausted pool must not outlast the waiter's wait.
		wctx, cancel := context.WithTimeout(ctx, wait+time.Second)
		var err error
		s.wake, err = l.getWake(wctx, s.key, wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case err == nil && (s.wake != nil || l.client.clock.Now().Sub(start) >= wait):
			// Woken (the holder released or died) or the wait passed:
			// look at the row again.
			return nil
		case err == nil:
			// GET_LOCK returned early without the lock (NULL: refused or
			// killed; MySQL rounds fractional timeouts down): do not spin.
			err = errors.New("GET_LOCK returned early without the lock")
		}
		left -= l.client.clock.Now().Sub(start)
		if left <= 0 {
			return nil
		}
		l.client.logger.Debug("lockgen: waiting on the server failed; polling", "lock", l.cfg.Name, "key", s.key, "error", err)
	}
	// The row is busy although this waiter holds the wake lock (the holder
	// has none, or died and its lease has not expired yet), or the server
	// refused to wait: poll, first in line.
	return sleepOrWake(ctx, l.client.clock, min(s.b.step(), left), s.local)
}

// close gives back a wake lock no holding took.
func (s *leaseWaiter) close(ctx context.Context) {
	if s.wake != nil {
		s.wake.release(ctx)
		s.wake = nil
	}
}
