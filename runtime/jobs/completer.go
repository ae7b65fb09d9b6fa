package jobs

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// completer records outcomes (River calls it the job completer): completions in batches, failures and
// give-backs one by one. add never blocks the worker loop. An outcome stays
// queued until it is recorded: while the database is unreachable, the
// completer retries with backoff and the worker heartbeats the queued runs'
// claims (so a finished run is not rescued and run again just because its
// outcome could not be written yet) and claims no new runs once
// maxUnrecorded are queued. A deadlock or a lock wait timeout (1213, 1205:
// the server rolled the statement back) is retried like a lost
// connection, for as long as it takes. A completion never waits on a run's
// row that another transaction holds (an operator's SELECT … FOR UPDATE):
// that one stays queued and is tried again with backoff, while the rest
// of its batch is recorded at once; so is a failure or a give-back
// (driver.ErrRunBusy). An outcome the server rejects (any
// other MySQL error) recordTries times is dropped, and so is every
// outcome still queued after close and recordTries more rounds (or, when
// other transactions hold their rows, a lease after close): their runs
// stay running until their deadline passes and are rescued and run again
// (at least once), or orphaned when on their last attempt, where a later
// outcome of the same claim is still recorded.
type completer struct {
	w      *Worker
	mu     sync.Mutex
	queue  []outcome
	closed bool
	signal chan struct{}
	// rejected counts the server's rejections per queued outcome; only
	// loop uses it.
	rejected map[*Run]int
	// unsure holds the queued outcomes that a statement which failed
	// carried (a lost connection, a COMMIT whose reply was lost, a read
	// after the UPDATE that failed): it may have recorded them, so that a
	// retry matching nothing is no sign of a late completion. Only loop
	// uses it; an outcome leaves it when it leaves the queue.
	unsure map[*Run]bool
}

func newCompleter(w *Worker) *completer {
	return &completer{w: w, signal: make(chan struct{}, 1), rejected: map[*Run]int{}, unsure: map[*Run]bool{}}
}

// maxUnrecorded is how many outcomes may wait to be recorded before the
// worker stops claiming.
func (r *completer) maxUnrecorded() int {
	return max(r.w.cfg.Concurrency, 4*r.w.cfg.CompleteBatch)
}

func (r *completer) add(o outcome) {
	r.mu.Lock()
	r.queue = append(r.queue, o)
	r.mu.Unlock()
	r.poke()
}

func (r *completer) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.poke()
}

func (r *completer) poke() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// unrecorded returns how many outcomes wait to be recorded.
func (r *completer) unrecorded() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// claims returns the claims of the runs whose outcomes wait to be
// recorded, for the worker's heartbeat.
func (r *completer) claims() []driver.Claim {
	r.mu.Lock()
	defer r.mu.Unlock()
	claims := make([]driver.Claim, len(r.queue))
	for i, o := range r.queue {
		claims[i] = driver.Claim{ID: o.run.ID, Claim: o.run.Claim}
	}
	return claims
}

func (r *completer) loop() {
	cfg := r.w.cfg
	clock := r.w.jobs.clock
	log := r.w.jobs.log
	// backoff is the wait before the next try after n rounds in a row that
	// left outcomes unrecorded: 50 ms, doubling, at most a quarter lease.
	backoff := func(n int) time.Duration {
		return min(time.Duration(1<<min(n-1, 10))*50*time.Millisecond, max(cfg.Lease/4, 50*time.Millisecond))
	}
	var since time.Time    // when the oldest queued outcome arrived
	failures := 0          // rounds in a row that ended on an error
	roundsClosed := 0      // failed rounds since close
	busyRounds := 0        // rounds in a row that left busy completions
	busyLeft := 0          // how many of the queue the last round left busy
	var closedAt time.Time // when the loop first saw close
	for {
		r.mu.Lock()
		items, closed := slices.Clone(r.queue), r.closed
		r.mu.Unlock()
		if len(items) == 0 {
			if closed {
				return
			}
			since = time.Time{}
			<-r.signal
			continue
		}
		if since.IsZero() {
			since = clock.Now()
		}
		if closed && closedAt.IsZero() {
			closedAt = clock.Now()
		}
		// Let completions gather into a batch for up to CompleteEvery;
		// after a failure, back off.
		var wait time.Duration
		switch {
		case failures > 0:
			wait = backoff(failures)
		case busyLeft == len(items):
			// Only completions whose rows another transaction held, and
			// nothing new: try them again later, sooner when another
			// outcome arrives.
			wait = backoff(busyRounds)
		case !closed && len(items) < cfg.CompleteBatch:
			wait = cfg.CompleteEvery - clock.Now().Sub(since)
		}
		if wait > 0 {
			t := clock.NewTimer(wait)
			select {
			case <-t.C():
			case <-r.signal:
				if failures == 0 {
					t.Stop()
					continue // more outcomes, or closed: maybe flush now
				}
				r.poke() // backing off: keep the news for the next round
				<-t.C()
			}
		}
		done, busy, err := r.record(items)
		for run := range done {
			delete(r.unsure, run) // it leaves the queue
		}
		r.mu.Lock()
		r.queue = slices.DeleteFunc(r.queue, func(o outcome) bool { return done[o.run] })
		left := len(r.queue)
		r.mu.Unlock()
		since = time.Time{}
		if busyLeft = len(busy); busyLeft > 0 {
			busyRounds++
		} else {
			busyRounds = 0
		}
		if closed && err == nil && busyLeft > 0 {
			// Rows held by other transactions: tried again for up to a
			// lease after close, the time the last heartbeat gave them.
			if clock.Now().Sub(closedAt) >= cfg.Lease {
				log.Error("lockgen: could not record the outcomes of finished runs before stopping: other transactions held their rows; they will be rescued: run again, or orphaned on their last attempt", "queue", cfg.Queue, "runs", left)
				return
			}
		}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		if closed {
			if roundsClosed++; roundsClosed >= recordTries {
				log.Error("lockgen: could not record the outcomes of finished runs before stopping; they will be rescued: run again, or orphaned on their last attempt", "queue", cfg.Queue, "runs", left, "error", err)
				return
			}
		}
		if failures == 1 || failures == servererr.TransientTries || failures%10 == 0 {
			servererr.WarnUnlessTransient(log, "lockgen: recording outcomes failed; retrying while heartbeating their runs", err, failures, "queue", cfg.Queue, "runs", left)
		}
	}
}

// recordTries is how often the server may reject an outcome, and how many
// failed rounds the completer makes after close, before it gives up.
const recordTries = 5

// record writes items' outcomes and returns the ones it is done with
// (recorded, or given up after recordTries rejections), the completions
// it left because another transaction held their rows (busy), and the
// first error. A lost connection or a timeout ends the round at once: the
// statements after it would most likely wait as long. A deadlock or a lock
// wait timeout counts as neither a rejection nor a lost connection: the
// round goes on, and those outcomes are retried in the next; so are busy
// completions, which are no error.
func (r *completer) record(items []outcome) (done map[*Run]bool, busy []outcome, err error) {
	done = map[*Run]bool{}
	var firstErr error
	// settle notes the result of one statement for its outcomes and
	// reports whether the round may go on.
	settle := func(os []outcome, err error) bool {
		if err == nil {
			for _, o := range os {
				done[o.run] = true
				delete(r.rejected, o.run)
			}
			return true
		}
		if firstErr == nil {
			firstErr = err
		}
		// Whatever the error, the statement may have recorded some of
		// them (a completion is an UPDATE that commits, then a read).
		for _, o := range os {
			r.unsure[o.run] = true
		}
		if servererr.IsTransient(err) {
			// A deadlock or a lock wait timeout rolled the statement
			// back: not a rejection. Its outcomes are retried in the
			// next round; the other statements of this one go on.
			return true
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			// A lost connection or a timeout: end the round and retry
			// later, counting no rejection.
			return false
		}
		if servererr.IsRefusal(err) {
			// The server turned the statement away for a reason that is
			// not the outcome's (too many connections, a user limit, a
			// rotated password, read-only): end the round and retry
			// later, counting no rejection (the chaos harness saw
			// successes of last attempts dropped after five 1226s).
			return false
		}
		for _, o := range os {
			if r.rejected[o.run]++; r.rejected[o.run] >= recordTries {
				r.w.jobs.log.Error("lockgen: the database rejects a run's outcome; the run will be rescued: run again, or orphaned on its last attempt", "job", o.run.Job, "queue", r.w.cfg.Queue, "run_id", o.run.ID, "attempt", o.run.Attempt, "error", err)
				done[o.run] = true
				delete(r.rejected, o.run)
			}
		}
		return true
	}
	var completed, held []outcome
	for _, o := range items {
		var err error
		delay, snooze := snoozed(o.err, rand.N[time.Duration])
		switch {
		case snooze:
			err = r.snooze(o, delay)
		case o.err != nil:
			err = r.fail(o)
		default:
			completed = append(completed, o)
			continue
		}
		if errors.Is(err, driver.ErrRunBusy) {
			// Held by another transaction: not recorded, no rejection
			// either; queued for the next round.
			held = append(held, o)
			continue
		}
		if !settle([]outcome{o}, err) {
			return done, held, firstErr
		}
	}
	for len(completed) > 0 {
		n := min(len(completed), r.w.cfg.CompleteBatch)
		batch := completed[:n]
		busy, err := r.complete(batch)
		if !settle(batch, err) {
			return done, held, firstErr
		}
		for _, o := range busy {
			// Held by another transaction: not recorded, and no
			// rejection either; queued for the next round.
			delete(done, o.run)
		}
		held = append(held, busy...)
		completed = completed[n:]
	}
	return done, held, firstErr
}

// statement runs one recording statement, bounded by the lease.
func (r *completer) statement(fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.w.cfg.Lease)
	defer cancel()
	return fn(ctx)
}

// complete records the completions of items in one statement and returns
// the items whose rows another transaction held (busy): they stay queued.
func (r *completer) complete(items []outcome) (busy []outcome, err error) {
	claims := make([]driver.Claim, len(items))
	for i, o := range items {
		claims[i] = driver.Claim{ID: o.run.ID, Claim: o.run.Claim}
	}
	var done driver.Completion
	err = r.statement(func(ctx context.Context) (err error) {
		done, err = r.w.jobs.store.RunsComplete(ctx, claims)
		return err
	})
	if err != nil {
		return nil, err
	}
	gone := len(claims) - int(done.Completed) - len(done.Busy)
	if gone > 0 {
		// A completion that an earlier statement carried and failed on
		// matches nothing when that statement recorded it: not late.
		if recorded := min(r.recordedEarlier(items, done), gone); recorded > 0 {
			r.w.jobs.log.Debug("lockgen: completions retried after a statement that failed had been recorded by that statement",
				"queue", r.w.cfg.Queue, "runs", recorded)
			gone -= recorded
		}
	}
	if gone > 0 {
		r.w.jobs.log.Warn("lockgen: completions arrived too late and matched no running or orphaned run: "+
			"while they could not be recorded, their runs were rescued and made due again (a new attempt may run them), "+
			"or retried or cancelled by an operator, or pruned", "queue", r.w.cfg.Queue, "runs", gone)
	}
	held := make(map[driver.Claim]bool, len(done.Busy))
	for _, c := range done.Busy {
		held[c] = true
	}
	for i, o := range items {
		if held[claims[i]] {
			busy = append(busy, o)
		}
	}
	return busy, nil
}

// recordedEarlier counts the completions of items that an earlier
// statement recorded, one that failed (none unless such a statement
// carried one of items): of the runs of items not busy in done, those now
// completed with the same claim, less those that done itself completed. It
// reads those runs, one statement each, and returns 0 at the first read
// that fails: unsure, the caller warns.
func (r *completer) recordedEarlier(items []outcome, done driver.Completion) int {
	unsure := false
	for _, o := range items {
		unsure = unsure || r.unsure[o.run]
	}
	if !unsure {
		return 0
	}
	busy := make(map[driver.Claim]bool, len(done.Busy))
	for _, c := range done.Busy {
		busy[c] = true
	}
	completed := 0
	for _, o := range items {
		c := driver.Claim{ID: o.run.ID, Claim: o.run.Claim}
		if busy[c] {
			continue // still running with this claim when done looked
		}
		var info driver.RunInfo
		var found bool
		err := r.statement(func(ctx context.Context) (err error) {
			info, found, err = r.w.jobs.store.RunGet(ctx, o.run.ID)
			return err
		})
		if err != nil {
			return 0
		}
		if found && info.State == driver.RunCompleted && info.Claim == o.run.Claim {
			completed++
		}
	}
	return max(completed-int(done.Completed), 0)
}

// snooze gives back a run whose handler snoozed it or whose singleton lock
// was held elsewhere, due again after delay.
func (r *completer) snooze(o outcome, delay time.Duration) error {
	return r.statement(func(ctx context.Context) error {
		_, err := r.w.jobs.store.RunSnooze(ctx, driver.Claim{ID: o.run.ID, Claim: o.run.Claim}, delay)
		return err
	})
}

// fail records a failed attempt: due again after the job's backoff, or
// discarded when out of attempts or when the handler's error is
// Permanent. A discard is logged at ERROR, a retry at INFO.
func (r *completer) fail(o outcome) error {
	text := errorText(o.err)
	c := driver.Claim{ID: o.run.ID, Claim: o.run.Claim}
	permanent := IsPermanent(o.err)
	var matched bool
	err := r.statement(func(ctx context.Context) (err error) {
		if permanent {
			matched, err = r.w.jobs.store.RunDiscard(ctx, c, text)
			return err
		}
		matched, err = r.w.jobs.store.RunFail(ctx, c, text, r.w.backoff(o.run.Job, o.run.Attempt))
		return err
	})
	log := r.w.jobs.log
	switch {
	case err != nil:
		return err
	case !matched:
		log.Debug("lockgen: a failed attempt's outcome matched no run: it was rescued, cancelled or retried meanwhile",
			"job", o.run.Job, "run_id", o.run.ID, "attempt", o.run.Attempt, "error", o.err)
	case permanent || o.run.Attempt >= o.run.MaxAttempts:
		log.Error("lockgen: run discarded", "job", o.run.Job, "queue", r.w.cfg.Queue, "run_id", o.run.ID, "attempt", o.run.Attempt,
			"permanent", permanent, "error", o.err)
	default:
		log.Info("lockgen: run failed; it will be retried", "job", o.run.Job, "queue", r.w.cfg.Queue, "run_id", o.run.ID, "attempt", o.run.Attempt, "error", o.err)
	}
	return err
}

// MaxErrorText bounds the error text kept with a run (the column is a
// TEXT).
const MaxErrorText = 60000

// errorText is err's text as the runs table keeps it (ErrorText).
func errorText(err error) string { return ErrorText(err.Error()) }

// ErrorText is a failed attempt's error text as the runs table keeps it:
// valid UTF-8 (a strict server rejects anything else, and the outcome
// would never be recorded), cut at a character boundary to MaxErrorText
// bytes.
func ErrorText(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	if len(text) > MaxErrorText {
		n := MaxErrorText
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n]
	}
	return text
}

// backoff is the delay before attempt+1 of a run of job.
func (w *Worker) backoff(job string, attempt int) time.Duration {
	h := w.cfg.Handlers[job]
	return Backoff(h.BackoffInitial, h.BackoffMax, attempt)
}

// Backoff is the delay before attempt+1 of a run whose job retries after
// initial·2^(attempt-1), at most maxDelay (1 s and 1 h when not positive),
// with jitter: a uniform draw from the upper half of that delay.
func Backoff(initial, maxDelay time.Duration, attempt int) time.Duration {
	if initial <= 0 {
		initial = time.Second
	}
	if maxDelay <= 0 {
		maxDelay = time.Hour
	}
	d := initial
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	half := d / 2
	return half + rand.N(half+1)
}
