package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// RetryFilter selects finished runs to retry at once: of a job and a queue
// (each optional), in State (discarded, orphaned or cancelled; required),
// finished in [FinishedAfter, FinishedBefore) when those are set.
type RetryFilter struct {
	Job            string     `json:"job,omitempty"`
	Queue          string     `json:"queue,omitempty"`
	State          string     `json:"state"`
	FinishedAfter  *time.Time `json:"finished_after,omitempty"`
	FinishedBefore *time.Time `json:"finished_before,omitempty"`
}

// Retried is the answer to RetryRuns: how many runs were made due again,
// how many were left because an unfinished run of their job has their
// unique key, and whether more runs matched than one call retries
// (MaxBulkRetry): call again for the rest.
type Retried struct {
	Retried int64 `json:"retried"`
	Skipped int64 `json:"skipped_unique_key"`
	More    bool  `json:"more"`
}

// MaxBulkRetry is the most runs one RetryRuns call retries; bulkBatch how
// many one statement changes.
const (
	MaxBulkRetry = 10000
	bulkBatch    = 500
)

// retryStates are the states a run can be retried from.
var retryStates = []string{"discarded", "orphaned", "cancelled"}

// RetryRuns makes every run f selects due now, its attempts counted from
// zero, as RetryRun does for one: at most MaxBulkRetry per call, in
// statements of bulkBatch runs by primary key, each re-checking the run's
// state (a run retried or changed meanwhile is left as it is). The runs
// are found through the state index without locking. A run whose unique
// key an unfinished run of its job holds is skipped and counted.
func (o *Ops) RetryRuns(ctx context.Context, f RetryFilter) (Retried, error) {
	if !slices.Contains(retryStates, f.State) {
		return Retried{}, invalid("state", "state must be one of %s", strings.Join(retryStates, ", "))
	}
	if f.Job != "" {
		if err := o.checkJob(f.Job); err != nil {
			return Retried{}, err
		}
	}
	if f.Queue != "" {
		if err := o.checkQueue(f.Queue); err != nil {
			return Retried{}, err
		}
	}
	after, before := time.Unix(0, 0).UTC(), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if f.FinishedAfter != nil {
		after = f.FinishedAfter.UTC()
	}
	if f.FinishedBefore != nil {
		before = f.FinishedBefore.UTC()
	}
	if !after.Before(before) {
		return Retried{}, invalid("finished_before", "finished_before must be after finished_after")
	}
	var out Retried
	jobNames := []string{f.Job}
	if f.Job == "" {
		// The state index orders finished runs by time within a job: one
		// walk per declared job keeps every read on the index.
		jobNames = jobNames[:0]
		for _, j := range o.cfg.Jobs {
			jobNames = append(jobNames, j.Name)
		}
	}
	for _, job := range jobNames {
		// The cursor walks (finished_at, id) past every run read, retried,
		// skipped or of another queue, so that none is read twice.
		at, id := after, int64(0)
		for {
			if out.Retried+out.Skipped >= MaxBulkRetry {
				out.More = true
				return out, nil
			}
			ids, scanned, err := o.retryBatch(ctx, f.State, job, f.Queue, &at, &id, before)
			if err != nil {
				return out, fmt.Errorf("ops: retry runs: %w", err)
			}
			if len(ids) > 0 {
				n, skipped, err := o.retryIDs(ctx, ids)
				out.Retried += n
				out.Skipped += skipped
				if err != nil {
					return out, fmt.Errorf("ops: retry runs: %w", err)
				}
			}
			if scanned < bulkBatch {
				break
			}
		}
	}
	return out, nil
}

// retryBatch reads the next batch of a job's runs in state after the
// cursor (at, id), which it moves past them, and returns those of queue
// (any when empty) and how many it read.
func (o *Ops) retryBatch(ctx context.Context, state, job, queue string, at *time.Time, id *int64, before time.Time) ([]any, int, error) {
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	rows, err := o.db.QueryContext(ctx, o.q.retryScan, state, job, *at, *at, *id, before, bulkBatch)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var ids []any
	scanned := 0
	for rows.Next() {
		var q string
		if err := rows.Scan(id, at, &q); err != nil {
			return nil, scanned, err
		}
		scanned++
		if queue == "" || q == queue {
			ids = append(ids, *id)
		}
	}
	return ids, scanned, rows.Err()
}

// retryIDs retries runs by ID in one statement, or one by one when a
// unique key is taken.
func (o *Ops) retryIDs(ctx context.Context, ids []any) (retried, skipped int64, err error) {
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	res, err := o.db.ExecContext(ctx, o.q.retryIDs+inList(len(ids)), ids...)
	if err == nil {
		n, err := res.RowsAffected()
		return n, 0, err
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 {
		return 0, 0, err
	}
	for _, id := range ids {
		res, err := o.db.ExecContext(ctx, o.q.runRetry, id)
		if errors.As(err, &me) && me.Number == 1062 {
			skipped++
			continue
		}
		if err != nil {
			return retried, skipped, err
		}
		n, _ := res.RowsAffected()
		retried += n
	}
	return retried, skipped, nil
}
