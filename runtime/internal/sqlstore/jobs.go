package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/sqlcdb"
)

var _ runtime.JobStore = SessionStore{}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func nullTime(t time.Time) sql.NullTime { return sql.NullTime{Time: t, Valid: !t.IsZero()} }

// RunInsert implements runtime.JobStore.
func (s SessionStore) RunInsert(ctx context.Context, tx *sql.Tx, r runtime.NewRun) (int64, error) {
	q := s.q
	if tx != nil {
		q = q.WithTx(tx)
	}
	res, err := q.RunInsert(ctx, sqlcdb.RunInsertParams{
		Job: r.Job, Queue: r.Queue, Priority: int32(r.Priority), DelayUs: r.Delay.Microseconds(),
		ScheduledAt: nullTime(r.ScheduledAt), Args: string(r.Args), MaxAttempts: int32(r.MaxAttempts),
		TimeoutUs: r.Timeout.Microseconds(), UniqueKey: nullString(r.UniqueKey),
	})
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// RunsClaim implements runtime.JobStore.
func (s SessionStore) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration) ([]runtime.Run, error) {
	var runs []runtime.Run
	err := runtime.InTx(ctx, s.db, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		rows, err := q.RunsClaimable(ctx, sqlcdb.RunsClaimableParams{Queue: queue, Limit: int32(limit)})
		if err != nil || len(rows) == 0 {
			return err
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		n, err := q.RunsMarkRunning(ctx, sqlcdb.RunsMarkRunningParams{Worker: worker, LeaseUs: lease.Microseconds(), Ids: ids})
		if err == nil {
			err = runtime.CheckClaimed(n, len(ids))
		}
		if err != nil {
			return err
		}
		runs = make([]runtime.Run, 0, len(rows))
		for _, r := range rows {
			// The rows are locked: the claim made them the next attempt and claim.
			runs = append(runs, runtime.Run{
				ID: r.ID, Job: r.Job, Queue: r.Queue, Priority: int(r.Priority), Args: []byte(r.Args),
				Attempt: int(r.Attempt) + 1, MaxAttempts: int(r.MaxAttempts), Timeout: time.Duration(r.TimeoutUs) * time.Microsecond,
				ScheduledAt: r.ScheduledAt.Time, RunAt: r.RunAt, CreatedAt: r.CreatedAt, Claim: r.Claim + 1,
			})
		}
		return nil
	})
	return runs, err
}

func claimArgs(claims []runtime.Claim) ([]int64, []sql.NullString) {
	ids := make([]int64, len(claims))
	refs := make([]sql.NullString, len(claims))
	for i, c := range claims {
		ids[i], refs[i] = c.ID, sql.NullString{String: c.ClaimRef(), Valid: true}
	}
	return ids, refs
}

// RunsHeartbeat implements runtime.JobStore.
func (s SessionStore) RunsHeartbeat(ctx context.Context, claims []runtime.Claim, lease time.Duration) (int64, error) {
	ids, refs := claimArgs(claims)
	return s.q.RunsHeartbeat(ctx, sqlcdb.RunsHeartbeatParams{LeaseUs: lease.Microseconds(), Ids: ids, ClaimRefs: refs})
}

// RunsComplete implements runtime.JobStore.
func (s SessionStore) RunsComplete(ctx context.Context, claims []runtime.Claim) (int64, error) {
	ids, refs := claimArgs(claims)
	return s.q.RunsComplete(ctx, sqlcdb.RunsCompleteParams{Ids: ids, ClaimRefs: refs})
}

// RunFail implements runtime.JobStore.
func (s SessionStore) RunFail(ctx context.Context, c runtime.Claim, errText string, backoff time.Duration) (bool, error) {
	n, err := s.q.RunFail(ctx, sqlcdb.RunFailParams{BackoffUs: backoff.Microseconds(), LastError: nullString(errText), ID: c.ID, Claim: c.Claim})
	return n > 0, err
}

// RunSnooze implements runtime.JobStore.
func (s SessionStore) RunSnooze(ctx context.Context, c runtime.Claim, delay time.Duration) (bool, error) {
	n, err := s.q.RunSnooze(ctx, sqlcdb.RunSnoozeParams{DelayUs: delay.Microseconds(), ID: c.ID, Claim: c.Claim})
	return n > 0, err
}

// RunsRescue implements runtime.JobStore: read the runs past their deadline
// without locking, then rescue them by primary key.
func (s SessionStore) RunsRescue(ctx context.Context, limit int) (int64, error) {
	ids, err := s.q.RunsRescuable(ctx, int32(limit))
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return s.q.RunsRescue(ctx, ids)
}

// RunsPrune implements runtime.JobStore.
func (s SessionStore) RunsPrune(ctx context.Context, job string, keep time.Time, olderThan time.Duration, limit int) (int64, error) {
	return s.q.RunsPrune(ctx, sqlcdb.RunsPruneParams{Job: job, KeepTick: nullTime(keep), OlderThanUs: olderThan.Microseconds(), Limit: int32(limit)})
}

// RunCancel implements runtime.JobStore.
func (s SessionStore) RunCancel(ctx context.Context, id int64) (bool, error) {
	n, err := s.q.RunCancel(ctx, id)
	return n > 0, err
}

// RunRetry implements runtime.JobStore.
func (s SessionStore) RunRetry(ctx context.Context, id int64) (bool, error) {
	n, err := s.q.RunRetry(ctx, id)
	return n > 0, err
}

// RunGet implements runtime.JobStore.
func (s SessionStore) RunGet(ctx context.Context, id int64) (runtime.RunInfo, bool, error) {
	r, err := s.q.RunGet(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return runtime.RunInfo{}, false, nil
	}
	if err != nil {
		return runtime.RunInfo{}, false, err
	}
	return runtime.RunInfo{
		Run: runtime.Run{
			ID: r.ID, Job: r.Job, Queue: r.Queue, Priority: int(r.Priority), Args: []byte(r.Args),
			Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts), Timeout: time.Duration(r.TimeoutUs) * time.Microsecond,
			ScheduledAt: r.ScheduledAt.Time, RunAt: r.RunAt, CreatedAt: r.CreatedAt, Claim: r.Claim,
		},
		State: r.State, Worker: r.Worker, LastError: r.LastError.String, Deadline: r.Deadline.Time,
		FinishedAt: r.FinishedAt.Time, UniqueKey: r.UniqueKey.String,
	}, true, nil
}

var _ runtime.TickStore = SessionStore{}

// RunLastTick implements runtime.TickStore.
func (s SessionStore) RunLastTick(ctx context.Context, job string) (time.Time, bool, error) {
	t, err := s.q.RunLastTick(ctx, job)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return t.Time, err == nil && t.Valid, err
}

// RunInsertSkipped implements runtime.TickStore.
func (s SessionStore) RunInsertSkipped(ctx context.Context, job, queue string, tick time.Time, reason string) error {
	_, err := s.q.RunInsertSkipped(ctx, sqlcdb.RunInsertSkippedParams{Job: job, Queue: queue, ScheduledAt: nullTime(tick), Reason: nullString(reason)})
	return err
}

// RunInsertMany implements runtime.JobStore.
func (s SessionStore) RunInsertMany(ctx context.Context, tx *sql.Tx, runs []runtime.NewRun) error {
	return s.inserts.Exec(ctx, tx, runs)
}
