package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/claimplace"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// Bounds of the consume operations.
const (
	// MaxClaim is the most runs one Claim hands out.
	MaxClaim = 100
	// MaxWait is the longest a Claim waits for a due run (a long poll).
	MaxWait = 45 * time.Second
	// DefaultLease is how long a claim (and each heartbeat) holds a run
	// unless the consumer asks otherwise; MinLease and MaxLease bound what
	// it may ask.
	DefaultLease = 30 * time.Second
	MinLease     = time.Second
	MaxLease     = 10 * time.Minute
	// MaxWorker is the longest worker name, in bytes (the runs table's
	// worker column).
	MaxWorker = 191
	// rescueEvery is how often the claims of one Ops rescue runs whose
	// consumers went silent, besides the Go workers' rescuers.
	rescueEvery = time.Second
	// claimPollMin and claimPollMax bound the pause between two claims of
	// a long poll that found nothing.
	claimPollMin, claimPollMax = 25 * time.Millisecond, 500 * time.Millisecond
)

// ClaimRequest asks for due runs of a queue, as a consumer over HTTP
// sends it.
type ClaimRequest struct {
	// Worker names the consumer (recorded as the runs' worker and in their
	// history: include the host). Required, at most MaxWorker bytes.
	Worker string `json:"worker"`
	// Limit is how many runs to claim at most: 1 (when 0) to MaxClaim.
	Limit int `json:"limit,omitempty"`
	// Wait, a Go duration ("30s"), makes the claim wait up to that long
	// (MaxWait) for a due run when there is none; empty answers at once.
	Wait string `json:"wait,omitempty"`
	// Lease, a Go duration, is how long the claim holds the runs without a
	// heartbeat: DefaultLease when empty, MinLease to MaxLease.
	Lease string `json:"lease,omitempty"`
}

// Claimed is a run a consumer claimed: one attempt, to be ended by
// Complete or Fail with its Claim, and kept by Heartbeat before Deadline.
type Claimed struct {
	ID          int64           `json:"id"`
	Job         string          `json:"job"`
	Queue       string          `json:"queue"`
	Args        json.RawMessage `json:"args"`
	Priority    int             `json:"priority"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	// Claim names this attempt: every heartbeat and outcome carries it,
	// and one for a claim that is no longer current is refused.
	Claim int64 `json:"claim"`
	// Deadline is when the lease ends, by the database clock (UTC), unless
	// a heartbeat extends it; it is never later than the database's own
	// deadline, so a consumer that heartbeats before it keeps the run.
	Deadline time.Time `json:"deadline"`
	// LeaseMS is how long the lease lasts, at least, from when the server
	// received the claim request (a long poll's wait included): a consumer
	// works on the run until the time it sent the request plus LeaseMS
	// (less a margin for its clock), by its own clock, unless a heartbeat
	// sent before then extends it. After that the run may be rescued and
	// claimed by another consumer.
	LeaseMS int64 `json:"lease_ms"`
	// Timeout is the attempt's time limit as the job declares it (a Go
	// duration); TimeoutMS the same in milliseconds.
	Timeout     string     `json:"timeout"`
	TimeoutMS   int64      `json:"timeout_ms"`
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	RunAt       time.Time  `json:"run_at"`
	CreatedAt   time.Time  `json:"created_at"`
	// Headers are the run's headers as its producer set them: a W3C
	// traceparent here is the span to link the attempt's span to.
	Headers map[string]string `json:"headers,omitempty"`
}

// HeartbeatRequest keeps a claimed run.
type HeartbeatRequest struct {
	Claim int64 `json:"claim"`
	// Lease is the new lease from now (DefaultLease when empty).
	Lease string `json:"lease,omitempty"`
}

// Heartbeated is the answer to a heartbeat: the lease's new end, by the
// database clock (Deadline) and from when the server received the request
// (LeaseMS, as for Claimed: the consumer's new local deadline is the time
// it sent the heartbeat plus LeaseMS).
type Heartbeated struct {
	ID       int64     `json:"id"`
	Claim    int64     `json:"claim"`
	Deadline time.Time `json:"deadline"`
	LeaseMS  int64     `json:"lease_ms"`
}

// FailRequest ends a claimed attempt without success.
type FailRequest struct {
	Claim int64 `json:"claim"`
	// Error says what went wrong; it is kept with the run (cut to
	// jobs.MaxErrorText bytes).
	Error string `json:"error,omitempty"`
	// Retry false fails the run for good (discarded, whatever attempts are
	// left); true or absent retries it after the job's backoff while it
	// has attempts left.
	Retry *bool `json:"retry,omitempty"`
	// Snooze, a Go duration, gives the run back, due again after it,
	// without counting the attempt (not with Error or Retry).
	Snooze string `json:"snooze,omitempty"`
}

// Claim claims up to req.Limit due runs of a declared queue for a
// consumer over HTTP, waiting up to req.Wait for one when none is due. A
// paused queue hands out nothing. The runs are leased as a Go worker's
// are: a consumer that stops heartbeating loses them to a rescue after the
// lease, and they run again (or are orphaned on their last attempt). If
// ctx ends after a claim committed but before the answer reached the
// consumer, those runs are rescued after their lease. No runs and a nil
// error means none was due within the wait. Runs come highest priority
// first, then oldest; after a claim that took its whole limit, the next
// claim of the queue through o goes on from that claim's last run, so a
// run of higher priority enqueued meanwhile waits up to 100 ms longer for
// a claim from the first (a claim that finds nothing after the place makes
// one at once).
func (o *Ops) Claim(ctx context.Context, queue string, req ClaimRequest) ([]Claimed, error) {
	if err := o.checkQueue(queue); err != nil {
		return nil, err
	}
	if err := checkWorker(req.Worker); err != nil {
		return nil, err
	}
	limit := req.Limit
	switch {
	case limit == 0:
		limit = 1
	case limit < 0 || limit > MaxClaim:
		return nil, invalid("limit", "limit must be 1 to %d", MaxClaim)
	}
	wait, err := parseDuration("wait", req.Wait, 0, 0, MaxWait)
	if err != nil {
		return nil, err
	}
	lease, err := parseLease(req.Lease)
	if err != nil {
		return nil, err
	}
	if err := o.canConsume(); err != nil {
		return nil, err
	}
	start := time.Now()
	until := start.Add(wait)
	pause := claimPollMin
	for {
		runs, err := o.claimOnce(ctx, queue, req.Worker, limit, lease, start)
		if err != nil || len(runs) > 0 {
			return runs, err
		}
		left := time.Until(until)
		if left <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil // the consumer left: nothing was claimed
		case <-o.stopWaiting:
			t.Stop()
			return nil, nil
		case <-t.C:
		}
		pause = min(2*pause, claimPollMax)
	}
}

// StopWaiting makes every Claim that waits for a due run answer at once,
// with no runs, and the later ones claim once without waiting: for a
// server shutting down, whose long polls would otherwise hold it up to
// MaxWait. It is safe to call more than once.
func (o *Ops) StopWaiting() {
	o.stopOnce.Do(func() { close(o.stopWaiting) })
}

// claimFromFirstEvery is how long the claims of a queue may go on from
// where the last one stopped (claimplace.Place) before one claims from the
// first due run again: four of a waiting claim's shortest pause.
const claimFromFirstEvery = 4 * claimPollMin

// place returns queue's claim place.
func (o *Ops) place(queue string) *claimplace.Place {
	o.placesMu.Lock()
	defer o.placesMu.Unlock()
	p := o.places[queue]
	if p == nil {
		if o.places == nil {
			o.places = map[string]*claimplace.Place{}
		}
		p = &claimplace.Place{}
		o.places[queue] = p
	}
	return p
}

// claimOnce rescues (at most once per rescueEvery) and claims once, going
// on from where the last claim of the queue through o stopped when that
// one took a full batch (claimplace.Place: the claim index is read from
// there, past the entries of the runs claimed before).
func (o *Ops) claimOnce(ctx context.Context, queue, worker string, limit int, lease time.Duration, start time.Time) ([]Claimed, error) {
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	if o.rescue.due(time.Now()) {
		// A rescue that fails is tried again at a claim rescueEvery later;
		// the Go workers' rescuers rescue the same runs meanwhile.
		_, _ = o.store.RunsRescue(ctx, 1000)
	}
	paused, err := o.store.QueuesPaused(ctx)
	if err != nil {
		return nil, fmt.Errorf("ops: claim from %s: %w", queue, err)
	}
	if slices.Contains(paused, queue) {
		return nil, nil
	}
	now, err := o.dbNow(ctx) // before the claim: the deadline is never late
	if err != nil {
		return nil, fmt.Errorf("ops: claim from %s: %w", queue, err)
	}
	// The claim sets each deadline to its database clock plus lease, after
	// this instant: the lease lasts at least leaseMS from start.
	leaseMS := (time.Since(start) + lease).Milliseconds()
	runs, err := o.place(queue).Claim(ctx, o.store, time.Now(), o.fromFirstEvery, queue, worker, limit, lease)
	if err != nil {
		return nil, fmt.Errorf("ops: claim from %s: %w", queue, err)
	}
	out := make([]Claimed, len(runs))
	for i, r := range runs {
		out[i] = Claimed{
			ID: r.ID, Job: r.Job, Queue: r.Queue, Args: argsJSON(r.Args), Priority: r.Priority,
			Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Claim: r.Claim, Deadline: now.Add(lease), LeaseMS: leaseMS,
			Timeout: r.Timeout.String(), TimeoutMS: r.Timeout.Milliseconds(),
			RunAt: r.RunAt.UTC(), CreatedAt: r.CreatedAt.UTC(), Headers: r.Headers,
		}
		if !r.ScheduledAt.IsZero() {
			at := r.ScheduledAt.UTC()
			out[i].ScheduledAt = &at
		}
	}
	return out, nil
}

// Heartbeat extends the lease of a run a consumer claimed, to req.Lease
// from now. A run no longer running with the claim (rescued, finished,
// claimed again) is CodeConflict: stop working on it, its outcome will be
// refused. A run an operator cancelled is CodeCancelled: stop. A run whose
// row another transaction holds for a moment is CodeUnavailable: not
// extended, heartbeat again soon. A database error means the lease may or
// may not have been extended.
func (o *Ops) Heartbeat(ctx context.Context, id int64, req HeartbeatRequest) (Heartbeated, error) {
	start := time.Now()
	if err := checkClaim(id, req.Claim); err != nil {
		return Heartbeated{}, err
	}
	lease, err := parseLease(req.Lease)
	if err != nil {
		return Heartbeated{}, err
	}
	if err := o.canConsume(); err != nil {
		return Heartbeated{}, err
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	now, err := o.dbNow(ctx)
	if err != nil {
		return Heartbeated{}, fmt.Errorf("ops: heartbeat run %d: %w", id, err)
	}
	c := driver.Claim{ID: id, Claim: req.Claim}
	leaseMS := (time.Since(start) + lease).Milliseconds() // as in claimOnce
	hb, err := o.store.RunsHeartbeat(ctx, []driver.Claim{c}, lease)
	if err != nil {
		return Heartbeated{}, fmt.Errorf("ops: heartbeat run %d: %w", id, err)
	}
	switch {
	case len(hb.Extended) == 1:
		return Heartbeated{ID: id, Claim: req.Claim, Deadline: now.Add(lease), LeaseMS: leaseMS}, nil
	case len(hb.Cancelled) == 1:
		return Heartbeated{}, &Error{Code: CodeCancelled, Message: fmt.Sprintf("run %d was cancelled by an operator: stop working on it", id)}
	case len(hb.Busy) == 1:
		if _, err := o.run(ctx, id); err != nil {
			return Heartbeated{}, err // not found, or the database's
		}
		return Heartbeated{}, busyRun(id, "extended", "heartbeat")
	}
	return Heartbeated{}, o.stale(ctx, id, req.Claim)
}

// busyRun is the error of a consumer's statement on run id that another
// transaction held: not done (extended, completed), to send again.
func busyRun(id int64, done, again string) error {
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("run %d is held by another transaction: not %s, %s again in a moment", id, done, again)}
}

// Complete records that a consumer's attempt succeeded: the run, still
// holding the claim (running, or orphaned after its lease and timeout
// passed), is completed. Otherwise CodeConflict (another claim or a final
// state), CodeNotFound, or CodeUnavailable when another transaction holds
// the run's row (complete it again in a moment); nothing is written.
func (o *Ops) Complete(ctx context.Context, id, claim int64) (*Run, error) {
	if err := checkClaim(id, claim); err != nil {
		return nil, err
	}
	if err := o.canConsume(); err != nil {
		return nil, err
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	done, err := o.store.RunsComplete(ctx, []driver.Claim{{ID: id, Claim: claim}})
	if err != nil {
		return nil, fmt.Errorf("ops: complete run %d: %w", id, err)
	}
	if len(done.Busy) > 0 {
		return nil, busyRun(id, "completed", "complete")
	}
	if done.Completed == 0 {
		return nil, o.stale(ctx, id, claim)
	}
	return o.run(ctx, id)
}

// ClaimRef names one claimed attempt: a run and its claim.
type ClaimRef struct {
	ID    int64 `json:"id"`
	Claim int64 `json:"claim"`
}

// Completed is the answer to CompleteMany: how many runs it completed, the
// runs of the request that are not completed with the claim given
// (rescued, claimed again, cancelled, pruned: state "" and claim 0 for a
// run that no longer exists), and the attempts not recorded because
// another transaction held their runs' rows (still running or orphaned
// with their claims: complete them again in a moment).
type Completed struct {
	Completed int64      `json:"completed"`
	Conflicts []Conflict `json:"conflicts"`
	Busy      []ClaimRef `json:"busy"`
}

// Conflict is a run an outcome did not match: its state and claim now.
type Conflict struct {
	ID    int64  `json:"id"`
	State string `json:"state"`
	Claim int64  `json:"claim"`
}

// CompleteMany is Complete for up to MaxClaim attempts in one statement: a
// consumer that claimed a batch records it in one round trip. Each run is
// completed if it still holds its claim and no other transaction holds its
// row; the others are listed as conflicts or busy, and nothing is written
// to them.
func (o *Ops) CompleteMany(ctx context.Context, refs []ClaimRef) (Completed, error) {
	if len(refs) < 1 || len(refs) > MaxClaim {
		return Completed{}, invalid("runs", "runs must hold 1 to %d claims, got %d", MaxClaim, len(refs))
	}
	claims := make([]driver.Claim, len(refs))
	for i, r := range refs {
		if err := checkClaim(r.ID, r.Claim); err != nil {
			e := err.(*Error)
			return Completed{}, &Error{Code: e.Code, Field: fmt.Sprintf("runs[%d].%s", i, e.Field), Message: fmt.Sprintf("runs[%d]: %s", i, e.Message)}
		}
		claims[i] = driver.Claim{ID: r.ID, Claim: r.Claim}
	}
	if err := o.canConsume(); err != nil {
		return Completed{}, err
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	done, err := o.store.RunsComplete(ctx, claims)
	if err != nil {
		return Completed{}, fmt.Errorf("ops: complete %d runs: %w", len(claims), err)
	}
	out := Completed{Completed: done.Completed, Conflicts: []Conflict{}, Busy: []ClaimRef{}}
	if done.Completed == int64(len(claims)) {
		return out, nil
	}
	busy := make(map[ClaimRef]bool, len(done.Busy))
	for _, c := range done.Busy {
		busy[ClaimRef{ID: c.ID, Claim: c.Claim}] = true
		out.Busy = append(out.Busy, ClaimRef{ID: c.ID, Claim: c.Claim})
	}
	args := make([]any, len(refs))
	for i, r := range refs {
		args[i] = r.ID
	}
	rows, err := o.db.QueryContext(ctx, o.q.runsClaims+inList(len(args)), args...)
	if err != nil {
		return out, fmt.Errorf("ops: complete %d runs: %w", len(claims), err)
	}
	defer rows.Close()
	now := map[int64]Conflict{}
	for rows.Next() {
		var c Conflict
		if err := rows.Scan(&c.ID, &c.State, &c.Claim); err != nil {
			return out, fmt.Errorf("ops: complete %d runs: %w", len(claims), err)
		}
		now[c.ID] = c
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("ops: complete %d runs: %w", len(claims), err)
	}
	for _, r := range refs {
		c, ok := now[r.ID]
		if !ok {
			c = Conflict{ID: r.ID}
		}
		if !busy[r] && (c.State != string(driver.RunCompleted) || c.Claim != r.Claim) {
			out.Conflicts = append(out.Conflicts, c)
		}
	}
	return out, nil
}

// Fail records that a consumer's attempt did not succeed: retried after
// the job's backoff while attempts are left (discarded otherwise), failed
// for good when req.Retry is false, or snoozed. The run must still hold
// the claim (CodeConflict otherwise); a snooze needs it running. When
// another transaction holds the run's row, nothing is written and the
// answer is CodeUnavailable: send the outcome again in a moment.
func (o *Ops) Fail(ctx context.Context, id int64, req FailRequest) (*Run, error) {
	if err := checkClaim(id, req.Claim); err != nil {
		return nil, err
	}
	snooze, err := parseDuration("snooze", req.Snooze, 0, 0, MaxDelay)
	if err != nil {
		return nil, err
	}
	if req.Snooze != "" && (req.Error != "" || req.Retry != nil) {
		return nil, invalid("snooze", "a snooze gives the run back without failing it: send it without error and retry")
	}
	if err := o.canConsume(); err != nil {
		return nil, err
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	c := driver.Claim{ID: id, Claim: req.Claim}
	text := jobs.ErrorText(req.Error)
	var matched bool
	switch {
	case req.Snooze != "":
		matched, err = o.store.RunSnooze(ctx, c, snooze)
	case req.Retry != nil && !*req.Retry:
		matched, err = o.store.RunDiscard(ctx, c, text)
	default:
		// The attempt of the claim sets the backoff; a run that no longer
		// holds it is not failed below, whatever was read.
		r, rerr := o.run(ctx, id)
		if rerr != nil {
			return nil, rerr
		}
		j := o.job(r.Job)
		matched, err = o.store.RunFail(ctx, c, text, jobs.Backoff(j.BackoffInitial, j.BackoffMax, r.Attempt))
	}
	if errors.Is(err, driver.ErrRunBusy) {
		return nil, busyRun(id, "recorded", "send the outcome")
	}
	if err != nil {
		return nil, fmt.Errorf("ops: fail run %d: %w", id, err)
	}
	if !matched {
		return nil, o.stale(ctx, id, req.Claim)
	}
	return o.run(ctx, id)
}

// stale is the error for a heartbeat or outcome whose claim matched
// nothing: CodeNotFound, or CodeConflict saying what the run is now.
func (o *Ops) stale(ctx context.Context, id, claim int64) error {
	r, err := o.run(ctx, id)
	if err != nil {
		return err
	}
	return &Error{Code: CodeConflict, Field: "claim", Message: fmt.Sprintf("run %d is %s with claim %d, not running with claim %d: it was rescued, finished, cancelled or claimed again; stop working on it", id, r.State, r.Claim, claim)}
}

// canConsume refuses the consume operations of a layer without a store.
func (o *Ops) canConsume() error {
	if o.store == nil {
		return &Error{Code: CodeUnavailable, Message: "consuming over HTTP needs the job store: set ops.Config.Store to the generated lockgendb.NewStore(db), or open the pool with ops.Connector"}
	}
	return nil
}

// dbNow reads the database clock.
func (o *Ops) dbNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := o.db.QueryRowContext(ctx, o.q.now).Scan(&now)
	return now.UTC(), err
}

// checkWorker checks a consumer's name as any other name a request gives.
func checkWorker(w string) error { return checkName("worker", w, MaxWorker) }

func checkClaim(id, claim int64) error {
	switch {
	case id < 1:
		return invalid("id", "a run ID is a positive integer")
	case claim < 1:
		return invalid("claim", "claim must be the positive claim the run was claimed with")
	}
	return nil
}

func parseLease(s string) (time.Duration, error) {
	return parseDuration("lease", s, DefaultLease, MinLease, MaxLease)
}

// parseDuration parses a Go duration given as field: def when empty, and
// from lo to hi.
func parseDuration(field, s string, def, lo, hi time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, invalid(field, "%s must be a Go duration from %v to %v, such as \"30s\"", field, lo, hi)
	}
	return d, nil
}

// argsJSON is a run's args as JSON: a row written by hand that holds
// something else is shown as a JSON string.
func argsJSON(args []byte) json.RawMessage {
	if json.Valid(args) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(string(args))
	return b
}

// rescueGate lets one caller at a time through, at most once per
// rescueEvery.
type rescueGate struct {
	mu   sync.Mutex
	last time.Time
}

func (g *rescueGate) due(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.last) < rescueEvery {
		return false
	}
	g.last = now
	return true
}
