package jobs

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/timing"
)

// strandedCheck warns of due runs that sit in a queue none of this node's
// workers works. RunNode runs it; the generated RunJobs works every queue
// the spec declares, so such runs are claimed by no node of the
// application, ever: enqueued by hand or by another program in a queue
// the spec does not have, or left in a queue the spec no longer has. (A
// run in a worked queue whose job belongs to another queue is claimed,
// and its attempt fails with an error naming the job's queue: see
// Worker.noHandler.)
//
// It costs two statements, then one per queue found unworked, every
// `every` (default 10m, like pruning): the queues of the runs table, read
// from the head of the claim index (queue, …) as a loose index scan, and
// for each unworked queue its due runs, a range of the same index. A
// failed check is logged at INFO and tried again at the next round.
type strandedCheck struct {
	jobs   *Client
	worked []string
	every  time.Duration
}

// strandedTimeout bounds each round of the check.
const strandedTimeout = 10 * time.Second

// run checks at once, then every s.every, until ctx ends.
func (s strandedCheck) run(ctx context.Context) {
	every := s.every
	if every <= 0 {
		every = 10 * time.Minute
	}
	target := s.jobs.store.Server()
	if target.DB == nil || target.RunsTable == "" {
		return // a test's store that hides its pool
	}
	for {
		if err := s.check(ctx, target.DB, target.RunsTable); err != nil && ctx.Err() == nil {
			s.jobs.log.Info("lockgen: looking for runs in queues no worker works failed; trying again later", "error", err)
		}
		if timing.SleepOrWake(ctx, s.jobs.clock.NewTimer, every, nil) != nil {
			return
		}
	}
}

// check makes one round: a WARN per unworked queue with due runs.
func (s strandedCheck) check(ctx context.Context, db *sql.DB, table string) error {
	ctx, cancel := context.WithTimeout(ctx, strandedTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT queue FROM "+table)
	if err != nil {
		return err
	}
	var unworked []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			rows.Close()
			return err
		}
		if !slices.Contains(s.worked, q) {
			unworked = append(unworked, q)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, q := range unworked {
		var due int64
		var since sql.NullTime
		err := db.QueryRowContext(ctx, "SELECT COUNT(*), MIN(run_at) FROM "+table+
			" WHERE queue = ? AND state = 'available' AND run_at <= UTC_TIMESTAMP(6)", q).Scan(&due, &since)
		if err != nil {
			return err
		}
		if due == 0 {
			continue
		}
		var job string
		err = db.QueryRowContext(ctx, "SELECT job FROM "+table+" WHERE queue = ? AND state = 'available' AND run_at <= UTC_TIMESTAMP(6) LIMIT 1", q).Scan(&job)
		if err != nil && err != sql.ErrNoRows {
			return err
		}
		s.jobs.log.Warn("lockgen: due runs sit in a queue that no worker of this node works, so no node of this application will claim them: "+
			"they were enqueued in a queue the spec does not declare (by hand, by another program) or the spec no longer has; "+
			"cancel them, or enqueue them again in their job's queue",
			"queue", q, "due_runs", due, "due_since", since.Time, "job", job, "worked_queues", s.worked)
	}
	return nil
}
