package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Counts are a queue's runs by state, each read from at most CountCap
// index entries: a count at the cap means at least that many, and Exact
// is then false.
type Counts struct {
	// Due: available and due now. Scheduled: available, due later.
	// Retrying: available (due or not) after a failed attempt.
	Due       int64 `json:"due"`
	Scheduled int64 `json:"scheduled"`
	Retrying  int64 `json:"retrying"`
	Running   int64 `json:"running"`
	// Orphaned: out of attempts while its worker was unreachable, outcome
	// unknown. Discarded: out of attempts, failed.
	Orphaned  int64 `json:"orphaned"`
	Discarded int64 `json:"discarded"`
	Exact     bool  `json:"exact"`
}

// Queue is a queue, its pause and its runs.
type Queue struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// PausedAt is when the pause began (UTC, database clock).
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// Declared is false for a queue that only the queues table names
	// (paused by an older deployment, say).
	Declared bool   `json:"declared"`
	Counts   Counts `json:"counts"`
}

// Queues lists the declared queues and any other queue ever paused, with
// their counts, in name order.
func (o *Ops) Queues(ctx context.Context) ([]Queue, error) {
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	qs, err := o.queueList(ctx)
	if err != nil {
		return nil, fmt.Errorf("ops: list queues: %w", err)
	}
	return qs, nil
}

func (o *Ops) queueList(ctx context.Context) ([]Queue, error) {
	if len(o.cfg.Jobs) == 0 {
		// A deployment without jobs has no queues table (its migrations
		// create the locks table alone): nothing to list.
		return []Queue{}, nil
	}
	rows, err := o.db.QueryContext(ctx, o.q.queuesRows)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []Queue
	for _, name := range o.queues {
		list = append(list, Queue{Name: name, Declared: true})
	}
	for rows.Next() {
		var q Queue
		var at sql.NullTime
		if err := rows.Scan(&q.Name, &q.Paused, &at); err != nil {
			return nil, err
		}
		if at.Valid {
			q.PausedAt = &at.Time
		}
		if i := slices.IndexFunc(list, func(d Queue) bool { return d.Name == q.Name }); i >= 0 {
			list[i].Paused, list[i].PausedAt = q.Paused, q.PausedAt
			continue
		}
		if q.Paused {
			list = append(list, q)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b Queue) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for i := range list {
		if list[i].Counts, err = o.counts(ctx, list[i].Name); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// counts reads one queue's counts in one statement.
func (o *Ops) counts(ctx context.Context, queue string) (Counts, error) {
	c := o.cfg.CountCap
	rows, err := o.db.QueryContext(ctx, o.q.queueCounts, queue, c, queue, c, queue, c, queue, c)
	if err != nil {
		return Counts{}, err
	}
	defer rows.Close()
	var got [4][3]int64
	for i := 0; rows.Next(); i++ {
		if i >= len(got) {
			return Counts{}, errors.New("queue counts: more rows than states")
		}
		if err := rows.Scan(&got[i][0], &got[i][1], &got[i][2]); err != nil {
			return Counts{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return Counts{}, err
	}
	cap64 := int64(c)
	return Counts{
		Due: got[0][1], Scheduled: got[0][0] - got[0][1], Retrying: got[0][2],
		Running: got[1][0], Orphaned: got[2][0], Discarded: got[3][0],
		Exact: got[0][0] < cap64 && got[1][0] < cap64 && got[2][0] < cap64 && got[3][0] < cap64,
	}, nil
}

// PauseQueue pauses a declared queue: no worker of any node claims its runs
// once its node has read the pause, within the workers' idle poll (their
// PollMax); running runs finish. Pausing a paused queue changes nothing.
// It returns the queue as it is after the pause.
func (o *Ops) PauseQueue(ctx context.Context, queue string) (Queue, error) {
	return o.setPause(ctx, queue, o.q.queuePause)
}

// ResumeQueue lifts a declared queue's pause; the workers claim its runs
// again within their idle poll. Resuming a queue that is not paused
// changes nothing.
func (o *Ops) ResumeQueue(ctx context.Context, queue string) (Queue, error) {
	return o.setPause(ctx, queue, o.q.queueResume)
}

func (o *Ops) setPause(ctx context.Context, queue, stmt string) (Queue, error) {
	if err := o.checkQueue(queue); err != nil {
		return Queue{}, err
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	if _, err := o.db.ExecContext(ctx, stmt, queue); err != nil {
		return Queue{}, fmt.Errorf("ops: queue %q: %w", queue, err)
	}
	q := Queue{Name: queue, Declared: true}
	var at sql.NullTime
	err := o.db.QueryRowContext(ctx, o.q.queueGet, queue).Scan(&q.Paused, &at)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Queue{}, fmt.Errorf("ops: queue %q: %w", queue, err)
	}
	if at.Valid {
		q.PausedAt = &at.Time
	}
	if q.Counts, err = o.counts(ctx, queue); err != nil {
		return Queue{}, fmt.Errorf("ops: queue %q: %w", queue, err)
	}
	return q, nil
}
