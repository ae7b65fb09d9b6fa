package runtime

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/timing"
)

// wakeups queues the waiters of this process per lock row, first come
// first served. Only the first waiter of a row polls the database; it is
// woken at once when a holder in this process releases the row, and when it
// leaves (with the lock, or giving up) the next waiter's turn begins. So a
// release wakes one waiter, not all of them, and local waiters are served
// in arrival order.
type wakeups struct {
	mu     sync.Mutex
	queues map[rowKey][]*waiter
	// held counts the unreleased holdings of this process per row that
	// hold a wake lock (WaitOnServer): while there is one, a local release
	// will wake the first local waiter, which need not wait on the server.
	held map[rowKey]int
}

type rowKey struct{ name, key string }

// waiter is one Acquire (or campaign) waiting for a row.
type waiter struct {
	turn chan struct{} // closed when the waiter is first in its queue
	wake chan struct{} // a release happened (buffered: never lost)
}

func newWakeups() *wakeups {
	return &wakeups{queues: make(map[rowKey][]*waiter), held: make(map[rowKey]int)}
}

// hold records a holding of k in this process; unhold its release.
func (w *wakeups) hold(k rowKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held[k]++
}

func (w *wakeups) unhold(k rowKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held[k]--; w.held[k] <= 0 {
		delete(w.held, k)
	}
}

// heldHere reports whether a holding of k in this process is unreleased.
func (w *wakeups) heldHere(k rowKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held[k] > 0
}

// join queues a new waiter for k.
func (w *wakeups) join(k rowKey) *waiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt := &waiter{turn: make(chan struct{}), wake: make(chan struct{}, 1)}
	q := append(w.queues[k], wt)
	w.queues[k] = q
	if len(q) == 1 {
		close(wt.turn)
	}
	return wt
}

// leave removes wt from k's queue and starts the next waiter's turn.
func (w *wakeups) leave(k rowKey, wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[k]
	for i, x := range q {
		if x != wt {
			continue
		}
		q = append(q[:i:i], q[i+1:]...)
		switch {
		case len(q) == 0:
			delete(w.queues, k)
		case i == 0:
			w.queues[k] = q
			close(q[0].turn)
		default:
			w.queues[k] = q
		}
		return
	}
}

// notify wakes the first waiter on k, if any.
func (w *wakeups) notify(k rowKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[k]; len(q) > 0 {
		select {
		case q[0].wake <- struct{}{}:
		default:
		}
	}
}

// backoff yields growing sleeps with full jitter in [d/2, d].
type backoff struct {
	next, max time.Duration
}

func (b *backoff) step() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// sleepOrWake waits for d on clock, a wake-up (woken may be nil), or the
// end of ctx (returning its cause).
func sleepOrWake(ctx context.Context, clock Clock, d time.Duration, woken <-chan struct{}) error {
	return timing.SleepOrWake(ctx, clock.NewTimer, d, woken)
}
