package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Status is the overview of a deployment: the document of GET
// /api/v1/status and of `lockgen status -json`.
type Status struct {
	// Time is the database clock (UTC) the document was read at.
	Time time.Time `json:"time"`
	// Leaders are the held leader locks.
	Leaders []Holding `json:"leaders"`
	// Locks are the declared locks with their held counts.
	Locks     []LockSummary `json:"locks"`
	Queues    []Queue       `json:"queues"`
	Schedules []Schedule    `json:"schedules"`
}

// Schedule is a scheduled job, its next tick and its newest tick in the
// runs table.
type Schedule struct {
	Job      string `json:"job"`
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	// Next is the first tick after Status.Time.
	Next time.Time `json:"next"`
	// LastTick, LastState and LastRun are the newest tick's, when the
	// runs table has one (a pruned tick is gone).
	LastTick  *time.Time `json:"last_tick,omitempty"`
	LastState string     `json:"last_state,omitempty"`
	LastRun   int64      `json:"last_run,omitempty"`
}

// Status reads the overview. Its cost is bounded: one statement per
// declared lock, queue and schedule, each reading at most CountCap index
// entries.
func (o *Ops) Status(ctx context.Context) (*Status, error) {
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	st := &Status{Leaders: []Holding{}, Locks: []LockSummary{}, Schedules: []Schedule{}}
	if err := o.db.QueryRowContext(ctx, o.q.now).Scan(&st.Time); err != nil {
		return nil, fmt.Errorf("ops: status: %w", err)
	}
	err := o.peek(ctx, func(tx *sql.Tx) error {
		var leaders []any
		for _, l := range o.cfg.Locks {
			if l.Leader {
				leaders = append(leaders, l.Name)
			}
			s := LockSummary{Lock: l}
			var rows, marked int64
			if err := tx.QueryRowContext(ctx, o.q.lockCount, l.Name, o.cfg.CountCap).Scan(&rows, &s.Held, &marked); err != nil {
				return err
			}
			if marked > 0 {
				keys, err := o.markedKeys(ctx, tx, l.Name)
				if err != nil {
					return err
				}
				held, err := o.sessionHeld(ctx, tx, l.Name, keys)
				if err != nil {
					return err
				}
				for _, h := range held {
					if !h {
						s.Held--
					}
				}
			}
			s.Exact = rows < int64(o.cfg.CountCap)
			st.Locks = append(st.Locks, s)
		}
		if len(leaders) == 0 {
			return nil
		}
		rows, err := tx.QueryContext(ctx, o.q.leaders+inList(len(leaders))+" ORDER BY name", leaders...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			h, _, err := o.scanHolding(rows)
			if err != nil {
				return err
			}
			st.Leaders = append(st.Leaders, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("ops: status: locks: %w", err)
	}
	if st.Queues, err = o.queueList(ctx); err != nil {
		return nil, fmt.Errorf("ops: status: queues: %w", err)
	}
	for _, j := range o.cfg.Jobs {
		s, ok := o.schedules[j.Name]
		if !ok {
			continue
		}
		sc := Schedule{Job: j.Name, Cron: j.Schedule, Timezone: j.Timezone, Next: s.Next(st.Time)}
		var tick time.Time
		err := o.db.QueryRowContext(ctx, o.q.lastTick, j.Name).Scan(&sc.LastRun, &tick, &sc.LastState)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, fmt.Errorf("ops: status: schedule of %s: %w", j.Name, err)
		default:
			sc.LastTick = &tick
		}
		st.Schedules = append(st.Schedules, sc)
	}
	return st, nil
}
