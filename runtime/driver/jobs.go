package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// RunState is the state of a run, as stored in the runs table.
type RunState string

// Run states.
const (
	// RunAvailable: due at its run_at, waiting to be claimed.
	RunAvailable RunState = "available"
	// RunRunning: claimed by a worker until its deadline.
	RunRunning RunState = "running"
	// RunCompleted: an attempt succeeded.
	RunCompleted RunState = "completed"
	// RunDiscarded: out of attempts, or failed for good.
	RunDiscarded RunState = "discarded"
	// RunCancelled: cancelled by an operator, before it started or while
	// it ran (its handler is told at its worker's next heartbeat).
	RunCancelled RunState = "cancelled"
	// RunSkipped: a scheduled tick recorded but not run (catch-up policy).
	RunSkipped RunState = "skipped"
	// RunOrphaned: its worker stopped heartbeating during its last attempt
	// and that attempt's timeout passed too, so its outcome is unknown (the
	// handler may have succeeded, failed or still run). Nothing claims it
	// again; a late outcome of that attempt's claim is still recorded (a
	// success completes it, a failure discards it), and an operator's retry
	// makes it available, after which that late outcome matches nothing.
	// It counts as finished: it is pruned after the retention and frees its
	// unique key.
	RunOrphaned RunState = "orphaned"
)

// NewRun is a run to enqueue.
type NewRun struct {
	// Job is the job's name. Required.
	Job string
	// Queue is the queue its workers claim from; default "default".
	Queue string
	// Priority orders due runs of a queue: higher first. -100 to 100.
	Priority int
	// Delay makes the run due this long after the database clock's now.
	Delay time.Duration
	// ScheduledAt, when set, is the scheduled tick the run is for: at most
	// one run per job and tick is ever inserted. A run has a tick or a
	// unique key, not both.
	ScheduledAt time.Time
	// Args is the handler's arguments, JSON. Default "{}".
	Args []byte
	// MaxAttempts is how many attempts a failing run gets before it is
	// discarded. Required, at least 1.
	MaxAttempts int
	// Timeout cancels an attempt's context. Required, positive.
	Timeout time.Duration
	// UniqueKey, when set, makes the enqueue return the existing run while
	// an unfinished run of the job has the same key. At most 191 bytes of
	// UTF-8, not ending in a space.
	UniqueKey string
	// Headers travel with the run to each attempt's handler (Run.Headers),
	// as a message's headers do: tracing puts the enqueueing span's trace
	// context here. Optional; see CheckHeaders for the bounds.
	Headers Headers
}

// Run is one claimed attempt of a run, as its handler sees it.
type Run struct {
	// ID identifies the run across attempts.
	ID  int64
	Job string
	// Queue and Priority are the run's.
	Queue    string
	Priority int
	// Args is the JSON arguments.
	Args []byte
	// Attempt is 1 for the first attempt.
	Attempt, MaxAttempts int
	// Timeout is the attempt's time limit.
	Timeout time.Duration
	// ScheduledAt is the tick of a scheduled run; zero otherwise.
	ScheduledAt time.Time
	// RunAt is when the run became due; CreatedAt when it was enqueued
	// (both by the database clock, UTC).
	RunAt, CreatedAt time.Time
	// Claim is the claim this attempt holds: a counter bumped by every
	// claim of the run, never reset. Every change of a running run
	// matches it, so a worker whose run was rescued and claimed again
	// cannot overwrite the new attempt's outcome.
	Claim int64
	// Headers are the headers its producer set (NewRun.Headers); nil when
	// it set none.
	Headers Headers
}

// RunCursor is a place in the order in which claims take a queue's due
// runs: highest Priority first, then oldest RunAt, then lowest ID. A
// claim given a place takes only the runs after it, and reads the claim
// index from there: a worker that goes on from the last run it claimed
// skips the index entries of every run claimed before, which the server
// keeps (delete-marked) until it purges them, and which a claim from the
// first walks through (on MariaDB, thousands per claim while a backlog
// drains). The runs before the place that are still due (a run of higher
// priority enqueued since, a run another claim skipped while it held it)
// are for a claim from the first; a run made due again (rescued, retried,
// failed or snoozed) gets a run_at of now or later, so it comes after the
// place unless its priority is higher.
type RunCursor struct {
	Priority int
	RunAt    time.Time
	ID       int64
}

// Place returns r's place in the claim order: a claim given it takes
// the runs after r.
func (r Run) Place() RunCursor {
	return RunCursor{Priority: r.Priority, RunAt: r.RunAt, ID: r.ID}
}

// claimFromFirst is the priority of the place before every run: above
// any priority (an INT column).
const claimFromFirst = int64(math.MaxInt32) + 1

// CursorArgs returns the generated claim statement's arguments for after
// (the after_priority, after_run_at and after_id of RunsClaimable): with
// nil, a place before every run.
func CursorArgs(after *RunCursor) (priority int64, runAt time.Time, id int64) {
	if after == nil {
		return claimFromFirst, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), 0
	}
	return int64(after.Priority), after.RunAt, after.ID
}

// RunInfo is a run as stored.
type RunInfo struct {
	Run
	// State is the run's state.
	State RunState
	// Worker is the owner of the worker that claimed it last.
	Worker string
	// LastError is the error text of the last failed attempt.
	LastError string
	// Deadline is when a running run is rescued unless heartbeats extend
	// it; FinishedAt when it completed, was discarded, orphaned or
	// cancelled.
	Deadline, FinishedAt time.Time
	// UniqueKey is the run's unique key, if any.
	UniqueKey string
}

// Claim names one claim of a run.
type Claim struct{ ID, Claim int64 }

// ClaimRef is the "<id>:<claim>" form of c that the runs table's claim_ref
// column holds.
func (c Claim) ClaimRef() string {
	return strconv.FormatInt(c.ID, 10) + ":" + strconv.FormatInt(c.Claim, 10)
}

// Heartbeat is what RunsHeartbeat did with each claim it was given.
type Heartbeat struct {
	// Extended are the claims whose runs were running with them: their
	// deadlines moved to lease after the database clock.
	Extended []Claim
	// Gone are the claims whose runs no longer run with them: rescued,
	// orphaned, finished or claimed again since.
	Gone []Claim
	// Cancelled are the claims whose runs an operator cancelled while
	// they ran with them (RunCancel).
	Cancelled []Claim
	// Busy are the claims whose rows another transaction held locked (or
	// that no longer exist): not extended, and not known to be gone.
	Busy []Claim
}

// Completion is what RunsComplete did with the claims it was given.
type Completion struct {
	// Completed counts the runs it marked completed.
	Completed int64
	// Busy are the claims whose rows another transaction held, so that
	// they were not completed, although their runs were still running or
	// orphaned with them: record them again later. The claims neither
	// completed nor busy are gone (rescued, claimed again, retried,
	// cancelled, pruned): recording them again changes nothing.
	Busy []Claim
}

// SortCompletion is the Completion of a RunsComplete that marked
// completed runs with claims: when that is fewer than the claims, the
// rows peeked afterwards, without a lock, say which of the others are
// busy (still running or orphaned with their claims).
func SortCompletion(claims []Claim, completed int64, peeked []HeartbeatRow) Completion {
	c := Completion{Completed: completed}
	rows := make(map[int64]HeartbeatRow, len(peeked))
	for _, r := range peeked {
		rows[r.ID] = r
	}
	for _, cl := range claims {
		if r, ok := rows[cl.ID]; ok && r.holds(cl, true) {
			c.Busy = append(c.Busy, cl)
		}
	}
	return c
}

// holds reports whether r is still running with claim c, or orphaned with
// it when orphaned is true: an outcome of c that changed r not at all
// found it held by another transaction.
func (r HeartbeatRow) holds(c Claim, orphaned bool) bool {
	return r.ID == c.ID && r.Claim == c.Claim && (r.Running || orphaned && r.Orphaned)
}

// HeartbeatRow is a run's row as a heartbeat locked it (or, for
// HeartbeatPlan, read it without a lock).
type HeartbeatRow struct {
	ID, Claim int64
	// Running, Cancelled and Orphaned say the row's state: running,
	// cancelled (by an operator, maybe while it ran), or orphaned.
	Running, Cancelled, Orphaned bool
}

// ErrRunBusy is the error of RunFail, RunDiscard and RunSnooze when
// another transaction held the run's row, still running (or orphaned) with
// the claim: nothing was written; record the outcome again later.
var ErrRunBusy = errors.New("lockgen: the run's row is held by another transaction; its outcome is not recorded yet")

// OutcomeBusy is the error of a single-run outcome statement (RunFail,
// RunDiscard, RunSnooze) that changed no row, from its run's row peeked
// afterwards without a lock: ErrRunBusy when the row is still running with
// claim c, or orphaned with it when orphaned is true (the statement would
// have changed it, so another transaction held it), nil when the run is
// gone (rescued, claimed again, finished, cancelled, pruned).
func OutcomeBusy(c Claim, peeked []HeartbeatRow, orphaned bool) error {
	for _, r := range peeked {
		if r.holds(c, orphaned) {
			return ErrRunBusy
		}
	}
	return nil
}

// RowOf is the HeartbeatRow of a run's row read as id, claim and state.
func RowOf(id, claim int64, state string) HeartbeatRow {
	return HeartbeatRow{
		ID:        id,
		Claim:     claim,
		Running:   state == string(RunRunning),
		Cancelled: state == string(RunCancelled),
		Orphaned:  state == string(RunOrphaned),
	}
}

// SortHeartbeat sorts claims by the rows a heartbeat locked: a claim whose
// row is running with it is to be extended, one whose row an operator
// cancelled with it is cancelled, one whose row has another claim or state
// is gone, and one whose row was not locked (another transaction held it,
// or it was deleted) is busy.
func SortHeartbeat(claims []Claim, locked []HeartbeatRow) Heartbeat {
	rows := make(map[int64]HeartbeatRow, len(locked))
	for _, r := range locked {
		rows[r.ID] = r
	}
	var hb Heartbeat
	for _, c := range claims {
		switch r, ok := rows[c.ID]; {
		case !ok:
			hb.Busy = append(hb.Busy, c)
		case r.Running && r.Claim == c.Claim:
			hb.Extended = append(hb.Extended, c)
		case r.Cancelled && r.Claim == c.Claim:
			hb.Cancelled = append(hb.Cancelled, c)
		default:
			hb.Gone = append(hb.Gone, c)
		}
	}
	return hb
}

// HeartbeatPlan splits the claims of a heartbeat by the rows peeked, read
// without a lock: settled are the rows that tell their claim's fate
// without a lock (another claim, or a state other than running: a claim
// never comes back, and a run cancelled with a claim stays so until a
// retry, which makes the next claim another), for SortHeartbeat; lock are
// the IDs of the runs still running with their claims, to lock and read
// again. A claim whose run the peek did not find is in neither (busy).
func HeartbeatPlan(claims []Claim, peeked []HeartbeatRow) (settled []HeartbeatRow, lock []int64) {
	want := make(map[int64]int64, len(claims))
	for _, c := range claims {
		want[c.ID] = c.Claim
	}
	for _, r := range peeked {
		if claim, ok := want[r.ID]; ok && r.Claim == claim && r.Running {
			lock = append(lock, r.ID)
		} else if ok {
			settled = append(settled, r)
		}
	}
	return settled, lock
}

// CheckExtended is the error of a heartbeat whose UPDATE extended n of the
// want runs it had locked and read as running with their claims (none,
// unless the table changed under the locks).
func CheckExtended(n int64, want int) error {
	if n != int64(want) {
		return fmt.Errorf("lockgen: heartbeat extended %d of %d locked runs", n, want)
	}
	return nil
}

// JobStore is a Store that also runs the job statements on the runs table.
// The code lockgen generates implements it when the spec declares jobs.
type JobStore interface {
	Store
	// RunInsert inserts r (in tx when not nil) and returns its ID, or the
	// existing run's ID when r repeats a tick or an active unique key.
	RunInsert(ctx context.Context, tx *sql.Tx, r NewRun) (int64, error)
	// RunInsertMany inserts runs in one statement (in tx when not nil);
	// runs that repeat a tick or an active unique key are left out.
	RunInsertMany(ctx context.Context, tx *sql.Tx, runs []NewRun) error
	// RunsClaim claims up to limit due runs of queue for worker, running
	// until lease after the database clock, in one transaction, and
	// returns them in claim order (see RunCursor). With after it takes
	// only runs that come after that place; with nil, from the first.
	// With an error it returns no runs: the commit may not have landed.
	RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration, after *RunCursor) ([]Run, error)
	// RunsHeartbeat extends, in one transaction, the deadline of the runs
	// still running with claims, to lease after the database clock. It
	// never waits on a run's row that another transaction holds (an
	// operator's SELECT … FOR UPDATE, a statement stuck on a connection a
	// partition cut off): such a run is reported Busy, neither extended nor
	// known gone, and the others are extended all the same. With an error
	// nothing is known to be extended (the commit may not have landed).
	RunsHeartbeat(ctx context.Context, claims []Claim, lease time.Duration) (Heartbeat, error)
	// RunsComplete marks completed the runs still holding claims, running
	// or orphaned. It never waits on a run's row that another transaction
	// holds: such a run is left as it is and reported Busy when a read
	// without a lock still finds it running or orphaned with its claim, and
	// the others are completed all the same. With an error nothing is known
	// to be completed.
	RunsComplete(ctx context.Context, claims []Claim) (Completion, error)
	// RunFail records a failed attempt of a run still holding c, running
	// or orphaned: due again after backoff, or discarded without attempts
	// left. Like the other single-run outcomes (RunDiscard, RunSnooze) it
	// never waits on a row another transaction holds: it returns
	// ErrRunBusy, having written nothing, when that run still holds c.
	RunFail(ctx context.Context, c Claim, errText string, backoff time.Duration) (bool, error)
	// RunDiscard records a failed attempt whose handler gave up for good,
	// of a run still holding c, running or orphaned: discarded at once,
	// whatever attempts are left.
	RunDiscard(ctx context.Context, c Claim, errText string) (bool, error)
	// RunSnooze gives a claimed run back, due again after delay, without
	// counting the attempt, if it is still running with claim c (an
	// orphaned run stays orphaned).
	RunSnooze(ctx context.Context, c Claim, delay time.Duration) (bool, error)
	// RunsRescue makes up to limit runs past their deadline due again, or
	// orphans them when they were on their last attempt and its timeout
	// passed too. It must lock the runs by primary key, as the other
	// statements that change running runs do, not through an index of the
	// deadline: the generated store reads the runs without locking first.
	RunsRescue(ctx context.Context, limit int) (int64, error)
	// RunsPrune deletes up to limit runs of job finished more than
	// olderThan ago, except the run of tick keep (when not zero).
	RunsPrune(ctx context.Context, job string, keep time.Time, olderThan time.Duration, limit int) (int64, error)
	// RunCancel cancels a run that is due or running; false when it has
	// finished. A running run keeps its claim, and its finished_at is its
	// deadline, when its worker has told the handler for sure.
	RunCancel(ctx context.Context, id int64) (bool, error)
	// RunRetry restores a discarded, orphaned or cancelled run whose
	// finished_at has passed (a run cancelled while running: its deadline).
	RunRetry(ctx context.Context, id int64) (bool, error)
	// RunGet reads a run; found is false when there is none.
	RunGet(ctx context.Context, id int64) (info RunInfo, found bool, err error)
	// RunLastTick is the latest tick of job that has a run; ok false when
	// there is none.
	RunLastTick(ctx context.Context, job string) (tick time.Time, ok bool, err error)
	// RunInsertSkipped records a tick that is not run, unless it has a run.
	RunInsertSkipped(ctx context.Context, job, queue string, tick time.Time, reason string) error
	// RunsQueues lists up to limit queues that have runs, in name order.
	RunsQueues(ctx context.Context, limit int) ([]string, error)

	// QueuePause pauses queue (by a row of the queues table); pausing a
	// paused queue changes nothing, not even its PausedAt.
	QueuePause(ctx context.Context, queue string) error
	// QueueResume lifts queue's pause; a queue not paused is left as it is.
	QueueResume(ctx context.Context, queue string) error
	// QueuesPaused lists the paused queues with a read that takes no lock
	// (the workers read it before claiming, never inside a claim).
	QueuesPaused(ctx context.Context) ([]string, error)
	// QueuesList reads up to limit rows of the queues table, in name order.
	QueuesList(ctx context.Context, limit int) ([]QueueState, error)
}

// QueueState is a queue's row in the queues table: a queue that was paused
// at least once.
type QueueState struct {
	Queue  string
	Paused bool
	// PausedAt is when the current pause began (zero when not paused);
	// UpdatedAt when the row last changed (paused or resumed); both by the
	// database clock, UTC.
	PausedAt, UpdatedAt time.Time
}
