package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// runLease is a claimed run's lease as its worker sees it, the lease rule
// that locks follow applied to runs. Its local deadline is Lease − margin
// after the claim or the last successful heartbeat was sent: before the
// run's deadline in the database, which the statement set by the database
// clock once it ran, and which rescue passes only strictly after. Once the
// local deadline passes without a heartbeat, or a heartbeat shows the run
// claimed by someone else, the handler's context ends with a cause wrapping
// ErrLeaseLost. So the handler of a run that other workers may rescue has
// been told before the rescue can make the run due again; whether it stops
// is up to the handler, as with any cancelled context.
//
// The handler's context checks the local deadline itself in Err, as a
// lease's does: after a pause (SIGSTOP, a VM paused by its hypervisor; not
// a suspend, which stops the monotonic clock) the handler's own
// goroutine may run before the watchdog's and must not read nil.
type runLease struct {
	clock runtime.Clock
	run   *Run
	// ctx is the handler's context (a runContext); cancel ends it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time // local deadline, by clock
	ended    bool      // the handler returned, or the lease was lost
	watchdog runtime.Timer
	onLoss   func(cause error)
}

// runLeaseMargin is how long before the database's deadline a run's
// handler is told its lease may be lost: a tenth of the lease, at least
// MinSafetyMargin, as for a lock's default SafetyMargin.
func runLeaseMargin(lease time.Duration) time.Duration {
	return max(lease/10, runtime.MinSafetyMargin)
}

// newRunLease returns the lease of r, claimed by a statement sent at sent,
// whose handler context derives from parent. onLoss hears of a loss once,
// in a goroutine of its own.
func newRunLease(parent context.Context, clock runtime.Clock, r *Run, sent time.Time, lease time.Duration, onLoss func(cause error)) *runLease {
	inner, cancel := context.WithCancelCause(parent)
	l := &runLease{clock: clock, run: r, cancel: cancel, onLoss: onLoss, deadline: sent.Add(lease - runLeaseMargin(lease))}
	l.ctx = runContext{Context: inner, l: l}
	l.mu.Lock()
	l.watchdog = clock.AfterFunc(l.deadline.Sub(clock.Now()), func() { l.expire(false) })
	l.mu.Unlock()
	return l
}

// runContext is a handler's context whose Err checks the run's local
// deadline at the call. It cancels first, so Done is closed before Err is
// non-nil.
type runContext struct {
	context.Context
	l *runLease
}

// Err implements context.Context.
func (c runContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	c.l.expire(true)
	return c.Context.Err()
}

// extend moves the local deadline to sent + lease − margin after a
// heartbeat sent at sent extended the run's deadline in the database (never
// earlier, never after the loss).
func (l *runLease) extend(sent time.Time, lease time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := sent.Add(lease - runLeaseMargin(lease)); !l.ended && d.After(l.deadline) {
		l.deadline = d
	}
}

// expire ends the lease if its local deadline has passed, and re-arms the
// watchdog otherwise. From the handler's Err (async), onLoss runs in a
// goroutine of its own.
func (l *runLease) expire(async bool) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	if left := l.deadline.Sub(l.clock.Now()); left > 0 {
		l.watchdog.Reset(left)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose(fmt.Errorf("%w: run %d of job %q: no successful heartbeat before the local deadline; the run may be rescued and run elsewhere", runtime.ErrLeaseLost, l.run.ID, l.run.Job), async)
}

// lose ends the handler's context with cause, unless the lease ended
// already.
func (l *runLease) lose(cause error, async bool) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.ended = true
	l.watchdog.Stop()
	l.cancel(cause)
	l.mu.Unlock()
	if async {
		go l.onLoss(cause)
		return
	}
	l.onLoss(cause)
}

// stop ends the lease when the handler has returned: no more watchdog, and
// the handler's context is cancelled.
func (l *runLease) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	l.watchdog.Stop()
	l.cancel(context.Canceled)
}
