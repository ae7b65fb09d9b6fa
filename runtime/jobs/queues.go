package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/probe"
)

// QueueInfo is a queue as Queues lists it.
type QueueInfo struct {
	// Name is the queue's name.
	Name string
	// Paused tells whether the queue is paused: no worker of any node
	// claims its runs once it has read the pause (see PauseQueue).
	Paused bool
	// Since is, for a paused queue, when its pause began; for one that is
	// not paused, when it was last resumed (zero when it was never
	// paused). By the database clock, UTC.
	Since time.Time
}

// ClientOption configures a Client (see NewClient).
type ClientOption func(*Client)

// WithQueues declares the queues the application's jobs use (the generated
// New passes the spec's): PauseQueue and ResumeQueue then refuse any other
// name with ErrInvalid, so that a typo is an error instead of a pause of a
// queue that no job uses, and Queues lists them even before any run or
// pause. Without it, any valid queue name is accepted.
func WithQueues(names ...string) ClientOption {
	return func(j *Client) {
		for _, n := range names {
			if n == "" {
				n = DefaultQueue
			}
			if !slices.Contains(j.declared, n) {
				j.declared = append(j.declared, n)
			}
		}
		slices.Sort(j.declared)
	}
}

// MaxListedQueues is the most queues Queues reads from each of the runs
// and queues tables.
const MaxListedQueues = 1000

// PauseQueue pauses queue in the database, for every node: the claims this
// Client's workers send after it returns nil take none of the queue's
// runs, and those other nodes' workers send from one idle poll (their
// PollMax) after it, once they have read the queues table again, take
// none either. A claim already under way may still take runs. Runs already running finish and their
// outcomes are recorded; runs stay due, and enqueues go on. A pause
// outlives the processes: workers that start later find it. Pausing a
// paused queue changes nothing. It fails with ErrInvalid for a queue name
// that is empty, longer than MaxQueue bytes, not valid UTF-8 or ends in a
// space, or, when the Client was given WithQueues, one not declared there;
// like every entry point it checks the server first (see Enqueue). An
// error from the database means the queue may or may not be paused.
func (j *Client) PauseQueue(ctx context.Context, queue string) error {
	if err := j.checkQueue(queue); err != nil {
		return err
	}
	if err := j.locks.CheckFeature(ctx, nil, probe.Jobs); err != nil {
		return err
	}
	err := j.store.QueuePause(ctx, queue)
	j.pauses.changed()
	if err != nil {
		return fmt.Errorf("lockgen: pause queue %q: %w", queue, err)
	}
	// A claim of this node under way may have asked the view before it
	// was marked stale: wait for it, so that none is after this returns.
	if err := j.drainGate(ctx, queue); err != nil {
		return fmt.Errorf("lockgen: pause queue %q: paused, but a claim of this node under way may still take runs: %w", queue, err)
	}
	return nil
}

// ResumeQueue lifts queue's pause: this Client's workers claim its runs
// again at once, every other node's within one idle poll (their PollMax).
// Resuming a queue that is not paused changes nothing. Its errors are
// PauseQueue's.
func (j *Client) ResumeQueue(ctx context.Context, queue string) error {
	if err := j.checkQueue(queue); err != nil {
		return err
	}
	if err := j.locks.CheckFeature(ctx, nil, probe.Jobs); err != nil {
		return err
	}
	err := j.store.QueueResume(ctx, queue)
	j.pauses.changed()
	if err != nil {
		return fmt.Errorf("lockgen: resume queue %q: %w", queue, err)
	}
	j.wake(queue)
	return nil
}

// Queues lists, in name order, the queues declared with WithQueues, the
// queues that have runs and the queues that were ever paused (at most
// MaxListedQueues of each of the last two), each with its pause state as
// the database holds it now. It costs two statements; like every entry
// point it checks the server first (see Enqueue).
func (j *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	if err := j.locks.CheckFeature(ctx, nil, probe.Jobs); err != nil {
		return nil, err
	}
	states, err := j.store.QueuesList(ctx, MaxListedQueues)
	if err != nil {
		return nil, fmt.Errorf("lockgen: read the queues: %w", err)
	}
	withRuns, err := j.store.RunsQueues(ctx, MaxListedQueues)
	if err != nil {
		return nil, fmt.Errorf("lockgen: read the queues of the runs: %w", err)
	}
	byName := map[string]QueueInfo{}
	for _, n := range j.declared {
		byName[n] = QueueInfo{Name: n}
	}
	for _, n := range withRuns {
		byName[n] = QueueInfo{Name: n}
	}
	for _, s := range states {
		info := QueueInfo{Name: s.Queue, Paused: s.Paused, Since: s.UpdatedAt}
		if s.Paused && !s.PausedAt.IsZero() {
			info.Since = s.PausedAt
		}
		byName[s.Queue] = info
	}
	out := make([]QueueInfo, 0, len(byName))
	for _, q := range byName {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// checkQueue fails with ErrInvalid for a queue name PauseQueue and
// ResumeQueue refuse.
func (j *Client) checkQueue(queue string) error {
	switch {
	case queue == "" || len(queue) > MaxQueue:
		return fmt.Errorf("%w: queue name must be 1 to %d bytes", runtime.ErrInvalid, MaxQueue)
	case !utf8.ValidString(queue):
		return fmt.Errorf("%w: queue name %q is not valid UTF-8", runtime.ErrInvalid, queue)
	case strings.HasSuffix(queue, " "):
		// The queues table's collation ignores trailing spaces.
		return fmt.Errorf("%w: queue name %q ends in a space", runtime.ErrInvalid, queue)
	case len(j.declared) > 0 && !slices.Contains(j.declared, queue):
		return fmt.Errorf("%w: no job uses queue %q (the queues are %s)", runtime.ErrInvalid, queue, strings.Join(j.declared, ", "))
	}
	return nil
}

// pauses is a node's view of the paused queues, shared by its workers: one
// read of the queues table (QueuesPaused, a consistent read that takes no
// lock) serves every worker of the node for up to the age they accept,
// their PollMax. The read happens before a claim, never inside the claim's
// transaction: a locking read of the queues table there would be skipped
// as absent by SKIP LOCKED while an operator's pause holds its row (and
// MariaDB has no FOR UPDATE OF to lock only the runs). Under load it costs
// one statement per PollMax per node, not one per claim.
type pauses struct {
	mu sync.Mutex
	// paused are the paused queues as read at sent (the client's clock,
	// when the read was sent); known is false until a read succeeded.
	paused map[string]bool
	sent   time.Time
	known  bool
	// gen counts this Client's pauses and resumes, and readGen is gen as
	// the read of paused was sent: a read sent before the last of them
	// may not show it, and is stale.
	gen, readGen uint64
	// reading is closed when the read under way ends; nil when none is.
	reading chan struct{}
	// err is the error of the last read, for the callers that waited on
	// it.
	err error
}

// changed marks the view stale: this Client paused or resumed a queue.
func (p *pauses) changed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
}

// queuePaused tells whether queue is paused, from a read sent less than
// maxAge ago (and after this Client's last pause or resume), reading the
// queues table again when there is none; a read another worker has under
// way is waited for instead of repeated. until is when the answer expires.
// An error means the pause state is unknown: the caller claims nothing.
func (j *Client) queuePaused(ctx context.Context, queue string, maxAge, timeout time.Duration) (paused bool, until time.Time, err error) {
	p := &j.pauses
	for {
		p.mu.Lock()
		now := j.clock.Now()
		if p.known && p.readGen == p.gen && now.Sub(p.sent) < maxAge {
			paused, until = p.paused[queue], p.sent.Add(maxAge)
			p.mu.Unlock()
			return paused, until, nil
		}
		if wait := p.reading; wait != nil {
			p.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return false, time.Time{}, ctx.Err()
			}
			p.mu.Lock()
			err := p.err
			p.mu.Unlock()
			if err != nil && !errors.Is(err, context.Canceled) {
				return false, time.Time{}, err
			}
			// The read this worker waited for may be stale too, or was
			// cut because its reader stopped: look again.
			continue
		}
		done := make(chan struct{})
		p.reading = done
		gen := p.gen
		p.mu.Unlock()

		// Cut by ctx: a stopping worker does not wait for it (nothing
		// is written, unlike a claim).
		rctx, cancel := context.WithTimeout(ctx, timeout)
		names, err := j.store.QueuesPaused(rctx)
		cancel()
		p.mu.Lock()
		p.reading, p.err = nil, err
		if err == nil {
			p.paused, p.sent, p.known, p.readGen = map[string]bool{}, now, true, gen
			for _, n := range names {
				p.paused[n] = true
			}
		}
		close(done)
		if err != nil {
			p.mu.Unlock()
			return false, time.Time{}, fmt.Errorf("lockgen: reading the paused queues: %w", err)
		}
		// A pause or resume of this Client while the read was under way
		// makes it stale: read again.
		fresh := p.readGen == p.gen
		paused, until = p.paused[queue], now.Add(maxAge)
		p.mu.Unlock()
		if fresh {
			return paused, until, nil
		}
	}
}
