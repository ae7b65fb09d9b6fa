package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/chaos"
	"github.com/lockgen/lockgen/runtime/internal/chaos/worker/chaosgen"
	"github.com/lockgen/lockgen/runtime/internal/chaos/worker/chaosgen/lockgendb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// openGuardDB opens the pool of the guarded writes' transactions: the
// application's own transactions, which Guard joins. Its sessions have a
// wait_timeout of 20 s, as an application that guards its transactions
// would set: a partition that cuts one off leaves its shared lock on the
// lock's row for that long at most (the runtime cannot bound a
// transaction it does not own).
func openGuardDB(cfg *mysql.Config) (*sql.DB, error) {
	gc := cfg.Clone()
	if gc.Params == nil {
		gc.Params = map[string]string{}
	}
	gc.Params["wait_timeout"] = "20"
	connector, err := mysql.NewConnector(gc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(runtime.ConnectTimeout(connector, 2*time.Second))
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(10 * time.Second)
	return db, nil
}

// pruner prunes the retained job's finished runs every 2 s, as a node
// whose PruneEvery is that short would (RunJobs prunes every 10 min): the
// runs of a tick finished more than its retention (1 m) ago are gone
// while a process cut off for longer is still catching up.
type pruner struct {
	jobs *jobs.Client
	w    *worker
}

func newPruner(db *sql.DB, clock runtime.Clock, log *slog.Logger, proc, inc int) (*pruner, error) {
	store := lockgendb.NewStore(db)
	client, err := runtime.NewClient(store, runtime.WithClock(clock), runtime.WithLogger(log),
		runtime.WithOwner(fmt.Sprintf("p%d.%d-pruner", proc, inc)))
	if err != nil {
		return nil, err
	}
	jc, err := jobs.NewClient(client, store)
	if err != nil {
		return nil, err
	}
	return &pruner{jobs: jc}, nil
}

func (p *pruner) prune(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := p.jobs.Prune(sctx, chaosgen.RetainedJob, time.Minute, 100)
	cancel()
	if err != nil && ctx.Err() == nil && p.w != nil {
		p.w.fail("prune", err)
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// enqueue enqueues a delayed job, and now and then a singleton, a long, a
// one-attempt job or one worked by the consumer of the external queue, and records each ID the database gave back.
func (w *worker) enqueue(ctx context.Context) {
	if w.quiet.Load() {
		w.sleep(ctx, 100*time.Millisecond)
		return
	}
	w.seq++
	delay := chaosgen.Delay(w.between(0, 2*time.Second))
	var id int64
	var err error
	job := chaosgen.DelayedJob
	switch n := w.intn(40); {
	case n < 4:
		job = chaosgen.SingleJob
		id, err = w.locks.EnqueueSingle(ctx, chaosgen.SingleArgs{Proc: int64(w.proc), Seq: w.seq}, delay)
	case n < 9:
		job = chaosgen.LongJob
		id, err = w.locks.EnqueueLong(ctx, chaosgen.LongArgs{Proc: int64(w.proc), Seq: w.seq}, delay)
	case n < 14:
		job = chaosgen.OnceJob
		id, err = w.locks.EnqueueOnce(ctx, chaosgen.OnceArgs{Proc: int64(w.proc), Seq: w.seq}, delay)
	case n < 20:
		job = chaosgen.RemoteJob
		id, err = w.locks.EnqueueRemote(ctx, chaosgen.RemoteArgs{Proc: int64(w.proc), Seq: w.seq}, delay)
	default:
		id, err = w.locks.EnqueueDelayed(ctx, chaosgen.DelayedArgs{Proc: int64(w.proc), Seq: w.seq}, delay)
	}
	if err != nil {
		if ctx.Err() == nil {
			w.fail("enqueue", err)
		}
	} else {
		w.rec.Record(chaos.Event{Kind: chaos.KindEnqueue, Obj: job, Run: id, T1: chaos.Mono()})
	}
	w.sleep(ctx, w.between(50*time.Millisecond, 300*time.Millisecond))
}

// handlers are the job handlers: each records its call and checks its
// context while it works.
type handlers struct{ w *worker }

func (h handlers) handle(ctx context.Context, run *chaosgen.Run, length time.Duration) error {
	sec := h.w.rec.Section()
	var tick int64
	if !run.ScheduledAt.IsZero() {
		tick = run.ScheduledAt.UnixMicro()
	}
	h.w.rec.Record(chaos.Event{Kind: chaos.KindHandle, Sec: sec, Obj: run.Job, Run: run.ID, Token: run.Claim, Tick: tick, T1: chaos.Mono()})
	err := h.w.hold(ctx, sec, nil, length)
	h.w.rec.Record(chaos.Event{Kind: chaos.KindEnd, Sec: sec, T1: chaos.Mono(), Err: errText(err)})
	return err
}

// Tick implements chaosgen.JobHandlers.
func (h handlers) Tick(ctx context.Context, run *chaosgen.Run) error {
	return h.handle(ctx, run, h.w.between(0, 300*time.Millisecond))
}

// Retained implements chaosgen.JobHandlers.
func (h handlers) Retained(ctx context.Context, run *chaosgen.Run) error {
	return h.handle(ctx, run, h.w.between(0, 300*time.Millisecond))
}

// Single implements chaosgen.JobHandlers.
func (h handlers) Single(ctx context.Context, run *chaosgen.Run, _ chaosgen.SingleArgs) error {
	return h.handle(ctx, run, h.w.between(0, 100*time.Millisecond))
}

// Delayed implements chaosgen.JobHandlers.
func (h handlers) Delayed(ctx context.Context, run *chaosgen.Run, _ chaosgen.DelayedArgs) error {
	return h.handle(ctx, run, h.w.between(0, 1500*time.Millisecond))
}

// Long implements chaosgen.JobHandlers: 2–6 s, longer than the run lease,
// so that a stall of the worker's heartbeats reaches it.
func (h handlers) Long(ctx context.Context, run *chaosgen.Run, _ chaosgen.LongArgs) error {
	return h.handle(ctx, run, h.w.between(2*time.Second, 6*time.Second))
}

// Once implements chaosgen.JobHandlers: the job has one attempt.
func (h handlers) Once(ctx context.Context, run *chaosgen.Run, _ chaosgen.OnceArgs) error {
	return h.handle(ctx, run, h.w.between(0, time.Second))
}
