package ops

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime/driver"
)

// States are the states a run can be in, as stored and as filters take them.
var States = []string{"available", "running", "completed", "discarded", "orphaned", "cancelled", "skipped"}

// Run is a run as an operator sees it. Args, Claim and TimeoutMS are
// filled by Run (one run), not by Runs (a page).
type Run struct {
	ID          int64      `json:"id"`
	Job         string     `json:"job"`
	Queue       string     `json:"queue"`
	State       string     `json:"state"`
	Priority    int        `json:"priority"`
	RunAt       time.Time  `json:"run_at"`
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"max_attempts"`
	Worker      string     `json:"worker,omitempty"`
	Deadline    *time.Time `json:"deadline,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	UniqueKey   string     `json:"unique_key,omitempty"`
	LastError   string     `json:"last_error,omitempty"`

	Args      json.RawMessage `json:"args,omitempty"`
	Claim     int64           `json:"claim,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
	// History is the run's log of state changes, oldest first (the newest
	// 50 are kept); Attempts the same log seen per attempt.
	History  []HistoryEntry `json:"history,omitempty"`
	Attempts []Attempt      `json:"attempts,omitempty"`
	// Headers are the run's headers (trace context), as its producer set
	// them (GET /api/v1/runs/{id} only).
	Headers map[string]string `json:"headers,omitempty"`
}

// historyEvents are the events of a run's history; attemptOutcomes how an
// attempt ends (or that it has not, or that its end is no longer kept).
var (
	historyEvents   = []string{"started", "completed", "failed", "discarded", "snoozed", "rescued", "orphaned", "cancelled", "retried"}
	attemptOutcomes = []string{"running", "completed", "failed", "discarded", "snoozed", "rescued", "orphaned", "cancelled", "unknown"}
)

// HistoryEntry is one state change of a run, as the statement that made
// it wrote it: when (the database clock, UTC), what (started, completed,
// failed, discarded, snoozed, rescued, orphaned, cancelled, retried), the
// attempt it concerned, the worker (its owner names the host) and the
// error's first 1,000 characters.
type HistoryEntry struct {
	At      time.Time `json:"at"`
	Event   string    `json:"event"`
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// Attempt is one attempt of a run, from its history: the worker that
// started it, when it started and ended, and how (Outcome: completed,
// failed, discarded, snoozed, rescued, orphaned, cancelled; "running"
// while it has not ended, or "unknown" when its end fell out of the kept
// history).
type Attempt struct {
	Attempt    int        `json:"attempt"`
	Worker     string     `json:"worker,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error,omitempty"`
}

// attempts reads the attempts out of a run's history: each "started"
// opens one, and the next entry of the same attempt that ends it closes
// it. A run in state running has its last attempt open.
func attempts(history []HistoryEntry, state string) []Attempt {
	var out []Attempt
	open := -1 // index in out of the attempt not yet ended
	for _, e := range history {
		switch {
		case e.Event == "started":
			if open >= 0 {
				out[open].Outcome = "unknown"
			}
			out = append(out, Attempt{Attempt: e.Attempt, Worker: e.Worker, StartedAt: e.At, Outcome: "running"})
			open = len(out) - 1
		case open >= 0 && e.Attempt == out[open].Attempt && e.Event != "retried":
			at := e.At
			out[open].FinishedAt, out[open].Outcome, out[open].Error = &at, e.Event, e.Error
			open = -1
		}
	}
	if open >= 0 && state != "running" {
		out[open].Outcome = "unknown"
	}
	return out
}

// RunsFilter selects runs: of a job, a queue and a state (each optional),
// with IDs below After (a page's Next; newest first), at most Limit.
type RunsFilter struct {
	Job, Queue, State string
	After             string
	Limit             int
}

// RunPage is one page of runs, newest first. Next, when not empty, is the
// cursor of the next page; a page may hold fewer items than asked when its
// scan read ScanLimit runs.
type RunPage struct {
	Items []Run  `json:"items"`
	Next  string `json:"next,omitempty"`
}

// Runs lists runs, newest first. It reads at most ScanLimit runs' job,
// queue and state by primary key, then the matching ones in full.
func (o *Ops) Runs(ctx context.Context, f RunsFilter) (*RunPage, error) {
	limit, err := checkLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	if f.Job != "" {
		if err := o.checkJob(f.Job); err != nil {
			return nil, err
		}
	}
	if f.Queue != "" {
		if err := o.checkQueue(f.Queue); err != nil {
			return nil, err
		}
	}
	if f.State != "" && !slices.Contains(States, f.State) {
		return nil, invalid("state", "state must be one of %s", strings.Join(States, ", "))
	}
	below := int64(1<<63 - 1)
	if f.After != "" {
		if below, err = strconv.ParseInt(f.After, 10, 64); err != nil || below < 1 {
			return nil, invalid("after", "after must be a run ID (the next cursor of a page of runs)")
		}
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	rows, err := o.db.QueryContext(ctx, o.q.runsScan, below, ScanLimit)
	if err != nil {
		return nil, fmt.Errorf("ops: list runs: %w", err)
	}
	page := &RunPage{Items: []Run{}}
	var ids []any
	scanned, last := 0, int64(0)
	for rows.Next() {
		var id int64
		var job, queue, state string
		if err := rows.Scan(&id, &job, &queue, &state); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ops: list runs: %w", err)
		}
		scanned, last = scanned+1, id
		if (f.Job == "" || job == f.Job) && (f.Queue == "" || queue == f.Queue) && (f.State == "" || state == f.State) {
			ids = append(ids, id)
			if len(ids) == limit {
				break
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ops: list runs: %w", err)
	}
	switch {
	case len(ids) == limit:
		page.Next = strconv.FormatInt(ids[len(ids)-1].(int64), 10)
	case scanned == ScanLimit:
		page.Next = strconv.FormatInt(last, 10)
	}
	if len(ids) == 0 {
		return page, nil
	}
	rows, err = o.db.QueryContext(ctx, o.q.runsList+inList(len(ids))+" ORDER BY id DESC", ids...)
	if err != nil {
		return nil, fmt.Errorf("ops: list runs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("ops: list runs: %w", err)
		}
		page.Items = append(page.Items, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ops: list runs: %w", err)
	}
	return page, nil
}

// scanRun reads the columns of runsList, then any extra destinations.
func scanRun(rows interface{ Scan(...any) error }, extra ...any) (Run, error) {
	var r Run
	var scheduled, deadline, finished sql.NullTime
	var unique, lastErr sql.NullString
	dest := []any{&r.ID, &r.Job, &r.Queue, &r.State, &r.Priority, &r.RunAt, &scheduled, &r.Attempt, &r.MaxAttempts,
		&r.Worker, &deadline, &r.CreatedAt, &finished, &unique, &lastErr}
	if err := rows.Scan(append(dest, extra...)...); err != nil {
		return r, err
	}
	r.ScheduledAt, r.Deadline, r.FinishedAt = timePtr(scheduled), timePtr(deadline), timePtr(finished)
	r.UniqueKey, r.LastError = unique.String, lastErr.String
	return r, nil
}

func timePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// Run reads one run in full: its arguments (JSON) and current claim too.
// A missing run (never enqueued, or pruned) is CodeNotFound.
func (o *Ops) Run(ctx context.Context, id int64) (*Run, error) {
	if id < 1 {
		return nil, invalid("id", "a run ID is a positive integer")
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	return o.run(ctx, id)
}

func (o *Ops) run(ctx context.Context, id int64) (*Run, error) {
	var args string
	var history sql.NullString
	var headers driver.Headers
	var claim, timeoutUs int64
	r, err := scanRun(o.db.QueryRowContext(ctx, o.q.runGet, id), &args, &claim, &timeoutUs, &history, &headers)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &Error{Code: CodeNotFound, Field: "id", Message: fmt.Sprintf("no run has ID %d (it may have been pruned)", id)}
	}
	if err != nil {
		return nil, fmt.Errorf("ops: run %d: %w", id, err)
	}
	r.Claim, r.TimeoutMS = claim, timeoutUs/1000
	r.Args = argsJSON([]byte(args))
	r.Headers = headers
	if history.Valid {
		if err := json.Unmarshal([]byte(history.String), &r.History); err != nil {
			return nil, fmt.Errorf("ops: run %d: its history is not what lockgen writes: %w", id, err)
		}
		r.Attempts = attempts(r.History, r.State)
	}
	return &r, nil
}

// CancelRun cancels a run that is due, scheduled or running. A running
// run's worker learns it at its next heartbeat (within a third of its
// lease) and cancels the handler's context (cause jobs.ErrCancelled); the
// run stays cancelled whatever the handler returns, and its finished_at is
// its deadline, when the handler has been told for sure: it cannot be
// retried before then, so a retry never runs it twice at once. A finished
// run is CodeConflict, and is left as it is. It returns the run as it is
// after the change.
func (o *Ops) CancelRun(ctx context.Context, id int64) (*Run, error) {
	return o.change(ctx, id, o.q.runCancel, "cancel", "only a run that is due or running (available or running) can be cancelled")
}

// RetryRun makes a discarded, orphaned or cancelled run due now, with its
// attempts counted from zero. A run in another state is CodeConflict; so
// is a run whose unique key an unfinished run of its job has taken since,
// and a run cancelled while running whose handler may not have been told
// yet (its finished_at, the deadline of that attempt, is ahead).
// A retried run never runs twice at once: it is claimed like any available
// run, and the claim of its last attempt no longer matches.
func (o *Ops) RetryRun(ctx context.Context, id int64) (*Run, error) {
	return o.change(ctx, id, o.q.runRetry, "retry", "only a discarded, orphaned or cancelled run whose finished_at has passed can be retried")
}

func (o *Ops) change(ctx context.Context, id int64, stmt, verb, rule string) (*Run, error) {
	if id < 1 {
		return nil, invalid("id", "a run ID is a positive integer")
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	res, err := o.db.ExecContext(ctx, stmt, id)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1062 {
		return nil, &Error{Code: CodeConflict, Message: fmt.Sprintf("run %d cannot be retried: an unfinished run of its job has the same unique key", id)}
	}
	if err != nil {
		return nil, fmt.Errorf("ops: %s run %d: %w", verb, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("ops: %s run %d: %w", verb, id, err)
	}
	r, err := o.run(ctx, id)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return r, &Error{Code: CodeConflict, Message: fmt.Sprintf("run %d is %s: %s", id, r.State, rule)}
	}
	return r, nil
}
