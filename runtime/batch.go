package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// MaxRenewBatch is the most leases one batched renewal statement renews.
// 1000 rather than 500 halved the statements of BenchmarkHold10kLeases
// (10,000 leases renewed every second: 22–24 statements/s at 500, 11–12.6
// at 1000, on both servers) and its client CPU on MariaDB (43–45 → 36–38
// ms/s); a statement of 1000 keys and 1000 key:token pairs stays far below
// the servers' limits (65,535 placeholders, max_allowed_packet).
const MaxRenewBatch = 1000

// batcher renews the leases a Client holds on one keyed lock. It runs one
// goroutine while it has leases and none when it has not. Deadlines stay
// per lease (each has its watchdog); the batcher only extends them. The
// next renewals are kept in a heap by time, so that a wake-up costs the
// leases it renews, not every lease held: the loop scanned all of them at
// each wake-up, the largest part of the client CPU of holding 10,000
// leases in a profile of BenchmarkHold10kLeases.
type batcher struct {
	lock  *Lock
	store driver.Store
	// base is the origin of the times in the queue, by clock.
	base time.Time

	mu sync.Mutex
	// due holds each lease being renewed; queue the next renewals of those
	// of them waiting for one (not those of the batch in flight), earliest
	// first, and entries of leases dropped since.
	due     map[*Lease]*dueLease
	queue   dueQueue
	running bool
	kick    chan struct{}
	// wakeAt is when the sleeping loop wakes next; zero while it works.
	wakeAt time.Time

	// flight is held while a batch's statements run, so that Release can
	// wait for a batch that includes its lease before freeing the row.
	flight sync.Mutex
	// afterFlight, when a test sets it, runs after each batch released
	// flight, before the batch's losses are reported.
	afterFlight func()
}

// dueLease is a lease being renewed. queued is true while the queue has
// its next renewal, false while the lease is in a batch; dropped once the
// batcher stopped renewing it. All three are guarded by batcher.mu.
type dueLease struct {
	ls      *Lease
	queued  bool
	dropped bool
}

// dueEntry is a next renewal: at is its time since the batcher's base.
type dueEntry struct {
	at time.Duration
	d  *dueLease
}

// dueQueue is a min-heap of next renewals by time. An entry is 16 bytes,
// compared and moved without following its pointer (a heap of *dueLease
// with time.Time keys, with the index that container/heap needs kept in
// each lease, was a tenth of the client CPU of holding 10,000 leases). A
// dropped lease's entry stays until it comes up and is skipped then.
type dueQueue []dueEntry

func (q *dueQueue) push(e dueEntry) {
	*q = append(*q, e)
	h := *q
	for j := len(h) - 1; j > 0; {
		i := (j - 1) / 2 // parent
		if h[i].at <= h[j].at {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

// pop removes and returns the earliest entry; q must not be empty.
func (q *dueQueue) pop() dueEntry {
	h := *q
	n := len(h) - 1
	e := h[0]
	h[0] = h[n]
	h[n] = dueEntry{}
	h = h[:n]
	for i := 0; ; {
		j := 2*i + 1 // left child
		if j >= n {
			break
		}
		if r := j + 1; r < n && h[r].at < h[j].at {
			j = r
		}
		if h[i].at <= h[j].at {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	*q = h
	return e
}

func newBatcher(l *Lock, store driver.Store) *batcher {
	return &batcher{lock: l, store: store, base: l.client.clock.Now(), due: make(map[*Lease]*dueLease), kick: make(chan struct{}, 1)}
}

// add starts renewing ls.
func (b *batcher) add(ls *Lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := ls.clock.Now().Add(ls.nextRenewal(true))
	d := &dueLease{ls: ls, queued: true}
	b.due[ls] = d
	b.queue.push(dueEntry{at: at.Sub(b.base), d: d})
	if !b.running {
		b.running = true
		go b.loop()
		return
	}
	if !b.wakeAt.IsZero() && at.Before(b.wakeAt) {
		b.poke() // due before the loop would wake
	}
}

// remove stops renewing ls, waiting for a batch in flight, and closes its
// renewDone. It is safe to call for a lease the batcher dropped already.
func (b *batcher) remove(ls *Lease) {
	b.flight.Lock()
	defer b.flight.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(ls)
	if len(b.due) == 0 {
		b.poke() // let the loop end now
	}
}

// drop forgets ls; b.mu is held. Its entry in the queue, if any, is
// skipped when it comes up, at most RenewEvery later: until then the entry
// keeps the released Lease in memory.
func (b *batcher) drop(ls *Lease) {
	if d, ok := b.due[ls]; ok {
		delete(b.due, ls)
		d.dropped = true
		close(ls.renewDone)
	}
}

func (b *batcher) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (b *batcher) loop() {
	clock := b.lock.client.clock
	window := b.lock.cfg.RenewEvery / 4
	var last []*Lease // the last batch
	for {
		b.mu.Lock()
		// The last batch's leases that were not scheduled again: lost, or
		// dropped from the renewal while it ran.
		for _, ls := range last {
			if d, ok := b.due[ls]; ok && !d.queued {
				b.drop(ls)
			}
		}
		last = nil
		if len(b.due) == 0 {
			b.queue = nil // only dropped leases' entries are left
			b.running = false
			b.mu.Unlock()
			return
		}
		now := clock.Now()
		for len(b.queue) > 0 && (b.queue[0].d.dropped || b.queue[0].d.ls.ctx.Err() != nil) {
			// Dropped, or lost: the watchdog or a renewal said so.
			d := b.queue.pop().d
			d.queued = false
			b.drop(d.ls)
		}
		// A batch goes once a lease is due, with those due within the
		// window after now. Not before: a lease whose renewal failed is due
		// again RenewEvery/4 later (less near its deadline), within the
		// window, and renewing every lease due within the window at once
		// made a loop of failing statements, thousands a second while the
		// database refused fast.
		var batch []*Lease
		if since := now.Sub(b.base); len(b.queue) > 0 && b.queue[0].at <= since {
			for len(b.queue) > 0 && b.queue[0].at <= since+window {
				d := b.queue.pop().d
				d.queued = false
				if !d.dropped {
					// A lease lost meanwhile is dropped by renewLocked,
					// which checks each lease just before its statement.
					batch = append(batch, d.ls)
				}
			}
		}
		b.wakeAt = time.Time{}
		var earliest time.Time
		if len(batch) == 0 && len(b.queue) > 0 {
			earliest = b.base.Add(b.queue[0].at)
			b.wakeAt = earliest
		}
		b.mu.Unlock()
		if len(batch) == 0 {
			if earliest.IsZero() { // the queue was empty
				// Leases out of the queue and not in a batch: none should
				// be; drop them rather than spin or stop renewing others.
				b.mu.Lock()
				for ls, d := range b.due {
					if !d.queued {
						b.drop(ls)
					}
				}
				b.mu.Unlock()
				continue
			}
			t := clock.NewTimer(earliest.Sub(now))
			select {
			case <-t.C():
			case <-b.kick:
			}
			t.Stop()
			continue
		}
		last = batch
		for len(batch) > 0 {
			n := min(len(batch), MaxRenewBatch)
			b.renew(batch[:n])
			batch = batch[n:]
		}
	}
}

// renew renews one batch and sets each lease's next renewal. On a partial
// or unknown outcome it re-reads the rows and decides per lease by owner
// and token, as a single renewal does.
func (b *batcher) renew(batch []*Lease) {
	b.flight.Lock()
	lost := b.renewLocked(batch)
	// Marked inside flight, so that a Release waiting for this batch finds
	// the loss when it reads the lease's context; reported outside it, so
	// that an Observer or logger that releases a lease of this lock does
	// not deadlock.
	causes := make([]error, len(lost))
	for i, ls := range lost {
		cause := fmt.Errorf("%w: %s: the database shows it expired or taken", ErrLeaseLost, ls.describe())
		if ls.markLost(cause) {
			causes[i] = cause
		}
	}
	b.flight.Unlock()
	if b.afterFlight != nil {
		b.afterFlight()
	}
	for i, ls := range lost {
		if causes[i] != nil {
			ls.logLoss(causes[i])
		}
	}
}

// renewLocked runs the statements of renew with flight held and returns
// the leases the database showed lost.
func (b *batcher) renewLocked(batch []*Lease) (lost []*Lease) {
	cfg := b.lock.cfg
	clock := b.lock.client.clock
	// The batch's bound is the most time any of its leases has left (a
	// lease with less is told by its watchdog when its own runs out).
	left, now := time.Millisecond, clock.Now()
	b.mu.Lock()
	// A new slice: batch is the loop's, which drops the leases of it that
	// are not scheduled again.
	live := make([]*Lease, 0, len(batch))
	for _, ls := range batch {
		if _, ok := b.due[ls]; !ok {
			continue // released
		}
		// Lost while it waited for this batch; or past its local deadline
		// (a process that resumed from a pause before the watchdog's
		// goroutine ran): never renewed, so that a lease once past its
		// deadline stays lost, as a single lease's renewal loop does. The
		// watchdog, or the holder's Err, declares the loss.
		timeLeft := ls.timeLeftAt(now)
		if ls.ctx.Err() != nil || timeLeft <= 0 {
			b.drop(ls)
			continue
		}
		left = max(left, timeLeft)
		live = append(live, ls)
	}
	b.mu.Unlock()
	if len(live) == 0 {
		return nil
	}
	keys := make([]string, len(live))
	tokens := make([]int64, len(live))
	for i, ls := range live {
		keys[i], tokens[i] = ls.id.Key, ls.id.Token
	}

	ctx, cancel := context.WithTimeout(context.Background(), left)
	defer cancel()
	renew := func(ctx context.Context) (int64, error) {
		return b.store.LeaseRenewMany(ctx, cfg.Name, b.lock.client.owner, keys, tokens, cfg.TTL)
	}
	r := hedge(ctx, clock, b.store.Server().DB, left/3, renew, renew)
	if r.err == nil && r.v == int64(len(live)) {
		for _, ls := range live {
			ls.extend(r.sent.Add(cfg.TTL - cfg.SafetyMargin))
		}
		b.schedule(live, true)
		return nil
	}
	err := r.err
	sent := clock.Now()
	rows, gerr := b.store.LeaseGetMany(ctx, cfg.Name, keys)
	if gerr != nil {
		for range live {
			b.lock.client.observer.RenewFailed(cfg.Name, cfg.Strategy)
		}
		b.lock.client.logger.Warn("lockgen: batched renewal failed", "lock", cfg.Name, "leases", len(live), "error", err, "reread_error", gerr)
		b.schedule(live, false)
		return nil
	}
	var held []*Lease
	for _, ls := range live {
		row, found := rows[ls.id.Key]
		if !ls.holds(row, found) {
			lost = append(lost, ls)
			continue
		}
		// At most a TTL: a database clock that stepped back leaves more.
		ls.extend(sent.Add(min(row.Remaining, cfg.TTL) - cfg.SafetyMargin))
		held = append(held, ls)
	}
	// After a definite answer the held ones were renewed; after an error,
	// retry soon.
	b.schedule(held, err == nil)
	return lost
}

// schedule sets the next renewal of each lease.
func (b *batcher) schedule(leases []*Lease, renewed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.lock.client.clock.Now()
	for _, ls := range leases {
		d, ok := b.due[ls]
		if !ok || d.queued { // dropped; or queued already, which a lease of a batch never is
			continue
		}
		d.queued = true
		b.queue.push(dueEntry{at: now.Add(ls.nextRenewalAt(renewed, now)).Sub(b.base), d: d})
	}
}
