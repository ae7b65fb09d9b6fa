package runtime

import (
	"math/rand/v2"
	"sync"
	"time"
)

// wakeups lets waiters in this process sleep until a holder in this process
// releases the same lock and key, instead of waiting out their backoff.
type wakeups struct {
	mu      sync.Mutex
	waiters map[rowKey]*wakeEntry
}

type rowKey struct{ name, key string }

type wakeEntry struct {
	ch   chan struct{}
	refs int
}

func newWakeups() *wakeups { return &wakeups{waiters: make(map[rowKey]*wakeEntry)} }

// subscribe returns a channel closed at the next release of k, and a func
// to call when the caller stops waiting.
func (w *wakeups) subscribe(k rowKey) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.waiters[k]
	if e == nil {
		e = &wakeEntry{ch: make(chan struct{})}
		w.waiters[k] = e
	}
	e.refs++
	return e.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		e.refs--
		if e.refs == 0 && w.waiters[k] == e {
			delete(w.waiters, k)
		}
	}
}

// notify wakes every current waiter on k.
func (w *wakeups) notify(k rowKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.waiters[k]; e != nil {
		close(e.ch)
		delete(w.waiters, k)
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
