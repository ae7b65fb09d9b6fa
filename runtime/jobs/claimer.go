package jobs

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/claimplace"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// claimer claims due runs of a worker's queue, through its node's claim
// gate, and keeps the idle poll: PollMin after runs came or a wake-up,
// doubling to PollMax while the queue is empty or claims fail. It claims
// nothing while the queue is paused, as read by the node's pause view at
// most PollMax ago (see pauses), and looks again when that read expires.
type claimer struct {
	w    *Worker
	log  *slog.Logger
	gate *claimGate
	// wake is this worker's wake-up channel: claimOthers skips it.
	wake chan struct{}
	poll time.Duration
	// failures counts the claims in a row that failed, for the log.
	failures int
	// paused is set while the queue is paused, until pausedUntil, when
	// the read that said so expires.
	paused      bool
	pausedUntil time.Time
}

func newClaimer(w *Worker, log *slog.Logger, wake chan struct{}) *claimer {
	return &claimer{w: w, log: log, gate: w.jobs.gate(w.cfg.Queue), wake: wake, poll: w.cfg.PollMin}
}

// claim claims up to free runs (at most ClaimBatch) and returns them with
// the time the claim was sent. keepPoll reports that it claimed nothing
// because another worker of the node was claiming (and wakes this one when
// done), so the idle poll should not back off. A failed claim returns no
// runs, is logged and backs the poll off; it is never fatal.
func (c *claimer) claim(ctx context.Context, free int) (runs []Run, sent time.Time, keepPoll bool) {
	cfg := c.w.cfg
	if free <= 0 {
		return nil, time.Time{}, false
	}
	if !c.gate.tryEnter() {
		return nil, time.Time{}, true // another worker here is claiming; it wakes us
	}
	// The pause state, read before the claim and never inside it: from
	// the node's view when it is less than PollMax old, else by one
	// read that takes no lock. Asked inside the gate, so that a pause of
	// this node, which waits for the gate, finds no claim under way that
	// asked before it.
	paused, until, err := c.w.jobs.queuePaused(ctx, cfg.Queue, cfg.PollMax, c.w.claimTimeout())
	if err != nil || paused {
		// Workers that skipped their claims meanwhile find the same at
		// their next poll.
		c.gate.leave()
	}
	if err != nil {
		if ctx.Err() == nil {
			c.failures++
			servererr.WarnUnlessTransient(c.log, "lockgen: reading whether the queue is paused failed; claiming nothing until it is read", err, c.failures)
			c.poll = min(c.poll*2, cfg.PollMax)
		}
		return nil, time.Time{}, false
	}
	if paused {
		if !c.paused {
			c.log.Info("lockgen: the queue is paused; claiming none of its runs until it is resumed (running runs finish)")
		}
		c.paused, c.pausedUntil = true, until
		return nil, time.Time{}, false
	}
	if c.paused {
		c.log.Info("lockgen: the queue was resumed; claiming its runs again")
		c.paused, c.poll = false, cfg.PollMin
	}
	limit := min(free, cfg.ClaimBatch)
	sent = c.w.jobs.clock.Now()
	runs, othersSkipped, err := c.claimOnce(ctx, limit)
	if othersSkipped && len(runs) == limit {
		// Others skipped their claims, and there may be more due runs
		// than this claim took.
		c.w.jobs.wakeOthers(cfg.Queue, c.wake)
	}
	if err != nil {
		// Runs a failed claim returned are not this worker's: the commit
		// may not have landed (they are still due, and the next claim of
		// them would hold the same claim number), or it landed and they
		// are rescued after their lease. Either way, never start them.
		if ctx.Err() == nil {
			c.failures++
			servererr.WarnUnlessTransient(c.log, "lockgen: claiming runs failed", err, c.failures)
			c.poll = min(c.poll*2, cfg.PollMax)
		}
		return nil, sent, false
	}
	c.failures = 0
	if len(runs) > 0 {
		c.poll = cfg.PollMin
	}
	return runs, sent, false
}

// fromFirstEvery is how long a node's claims of a queue may go on from
// where the last one stopped (driver.RunCursor) before one claims from the
// first due run again: a due run before that place (of a higher priority
// than the backlog, or one that another claim skipped while it held it)
// waits at most that much longer than it would have. Four PollMin: 200 ms
// by default (with one PollMin, a 3-node drain of a backlog claimed from
// the first about every other claim, and gained less: 9,800–11,100 jobs/s
// against 10,600–11,400, the code before 8,200–9,500, in one sitting).
func (w *Worker) fromFirstEvery() time.Duration { return 4 * w.cfg.PollMin }

// claimOnce claims up to limit runs, bounded by claimTimeout so that a
// claim stuck on a dead pooled connection holds up the worker loop (its
// outcomes, its next claim) for a fraction of a lease, never its
// heartbeats. After a claim that took a full batch, the node's next claim
// of the queue goes on from its last run (the gate's place), unless the
// last claim from the first due run is fromFirstEvery old; one that finds
// nothing there claims from the first at once. It is not cut
// by ctx: a claim cut while its COMMIT may land leaves its runs running
// without a handler until they are rescued, which a shutdown need not
// cause. The caller holds the gate; claimOnce gives it back (also on a
// panic) and reports whether other workers skipped their claims meanwhile.
func (c *claimer) claimOnce(ctx context.Context, limit int) (runs []Run, othersSkipped bool, err error) {
	defer func() { othersSkipped = c.gate.leave() }()
	cfg := c.w.cfg
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.w.claimTimeout())
	defer cancel()
	runs, err = c.gate.place.Claim(cctx, c.w.jobs.store, c.w.jobs.clock.Now(), c.w.fromFirstEvery(), cfg.Queue, c.w.jobs.owner, limit, cfg.Lease)
	if len(runs) > 0 {
		c.w.jobs.obs.Claimed(cfg.Queue, len(runs))
	}
	return runs, false, err
}

// idle returns how long to wait before the next claim when this one took
// nothing: the poll plus up to a quarter of jitter. Unless keepPoll, the
// poll after it doubles, up to PollMax.
//
// While the queue is paused, it is until the read of the pause expires (at
// least PollMin), so that a resume is seen within PollMax of its commit.
func (c *claimer) idle(keepPoll bool) time.Duration {
	if c.paused {
		cfg := c.w.cfg
		return max(c.pausedUntil.Sub(c.w.jobs.clock.Now()), cfg.PollMin) + rand.N(cfg.PollMin/4+1)
	}
	d := c.poll + rand.N(c.poll/4+1)
	if !keepPoll {
		c.poll = min(c.poll*2, c.w.cfg.PollMax)
	}
	return d
}

// busy resets the poll to PollMin: runs finished or were enqueued here.
func (c *claimer) busy() { c.poll = c.w.cfg.PollMin }

// claimGate lets one of a node's workers claim runs of a queue at a time.
// Concurrent claims from one node only fight over the same index pages and
// row locks: with 8 workers per node on 3 nodes, 20,000 no-op runs were
// worked 2.3× slower than with the gate. A worker that finds the gate taken
// skips its claim, and the claimer wakes the queue's workers when it leaves,
// so no worker waits on another's claim (and its heartbeats never do).
type claimGate struct {
	busy    chan struct{}
	skipped atomic.Bool
	// place is where the node's next claim of the queue may go on from.
	place claimplace.Place
}

// tryEnter takes the gate if it is free.
func (g *claimGate) tryEnter() bool {
	select {
	case g.busy <- struct{}{}:
		return true
	default:
	}
	// Mark, then try again: when the second try fails, the holder's leave
	// comes after the mark and sees it.
	g.skipped.Store(true)
	select {
	case g.busy <- struct{}{}:
		return true
	default:
		return false
	}
}

// leave gives the gate back and reports whether a worker skipped its claim
// meanwhile (and should be woken).
func (g *claimGate) leave() bool {
	<-g.busy
	return g.skipped.Swap(false)
}

// drainGate waits until no claim of queue is under way on this node (one that may
// have asked the pause view before a pause), and wakes the workers that
// skipped their claims meanwhile.
func (j *Client) drainGate(ctx context.Context, queue string) error {
	g := j.gate(queue)
	select {
	case g.busy <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.leave() {
		j.wakeOthers(queue, nil)
	}
	return nil
}

// gate returns queue's claim gate.
func (j *Client) gate(queue string) *claimGate {
	j.mu.Lock()
	defer j.mu.Unlock()
	g := j.gates[queue]
	if g == nil {
		g = &claimGate{busy: make(chan struct{}, 1)}
		j.gates[queue] = g
	}
	return g
}
