package jobs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
	"github.com/lockgen/lockgen/runtime/internal/timing"
)

// Scheduled jobs: one run per tick, cluster-wide.
//
// Every node runs the scheduler and inserts each tick it computes as a run
// keyed by its job and tick (the unique index runs_dedupe), which turns
// every insert after the first into a no-op, so a tick gets exactly one
// run however many nodes insert it, and no tick is lost while nodes come
// and go (there is no leader to elect first). Ticks are absolute: cron ticks by the job's time
// zone, @every ticks at multiples of the interval since the Unix epoch, so
// all nodes compute the same ones, by the database's clock (read every
// 30 s and moved on with the local monotonic clock in between), so a node
// whose wall clock is off or stepped computes the same ticks at the same
// time as the others.
//
// Missed ticks follow the job's catch-up policy, and a tick that is not
// run is recorded as a skipped run. A tick is missed when no node ran
// (the newest tick in the runs table, read at start, is older), when this
// node reached it more than 5 s late (paused, suspended, its statements
// hung), or when its insert failed (the database was down, or refused
// this node alone). All three follow one rule (see catchUpFrom): catch-up
// starts after the latest of this node's own position, the newest tick in
// the runs table, and now minus the job's retention, because the other
// nodes may have run the missed ticks meanwhile and Prune deleted them (it
// always keeps the newest); when the newest tick cannot be read, nothing
// is caught up until it can. So no tick older than the job's retention,
// or at or before the newest tick in the runs table, is inserted or
// recorded by catch-up; a live tick is at most 5 s old, and the node's
// pruner keeps finished runs for longer than that.
//
// Every statement of the scheduler is bounded (2 s), so a half-open
// connection delays it by that much, not by the kernel's retransmission
// time. A step of the database clock: forward by d, the ticks of d are
// missed (caught up as above, within the retention); back, after a step
// forward, the ticks inserted ahead of the clock ran early and do not run
// again when their time comes, the schedule goes on from the clock's time
// within 35 s and one tick (the clock is read every 30 s, and a waiting
// scheduler looks at it every 5 s), and so does a node that starts
// meanwhile, rather than waiting for the tick after the newest, which is
// ahead. A step back of less than 5 s is simply waited out.

// Schedule computes a job's ticks.
type Schedule interface {
	// Next returns the first tick after t.
	Next(t time.Time) time.Time
}

// cronParser accepts 5 fields, 6 with seconds first, and descriptors
// (@daily, @every 1m, …).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a cron spec in the IANA time zone tz ("" is UTC).
// Its error wraps ErrInvalid and, for a spec the cron parser rejects, the
// parser's own error. lockgen's spec validation calls it too, so a schedule
// that lockgen generate accepts is one that RunJobs parses.
func ParseSchedule(spec, tz string) (Schedule, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("%w: time zone %q: %w", runtime.ErrInvalid, tz, err)
		}
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: schedule %q: give the time zone separately", runtime.ErrInvalid, spec)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: schedule %q: %w", runtime.ErrInvalid, spec, err)
	}
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return everySchedule{every.Delay}, nil
	}
	z := zoned{s, loc}
	if z.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%w: schedule %q never fires", runtime.ErrInvalid, spec)
	}
	return z, nil
}

// everySchedule ticks at the multiples of d since the Unix epoch, so every
// node computes the same ticks whenever it started.
type everySchedule struct{ d time.Duration }

func (e everySchedule) Next(t time.Time) time.Time {
	n := t.UnixNano() / int64(e.d)
	return time.Unix(0, (n+1)*int64(e.d)).UTC()
}

// zoned computes cron ticks in loc.
type zoned struct {
	s   cron.Schedule
	loc *time.Location
}

// Next returns the first tick after t; zero when there is none (robfig's
// cron looks five years ahead).
func (z zoned) Next(t time.Time) time.Time {
	n := z.s.Next(t.In(z.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// CatchUp is a scheduled job's policy for the ticks missed while no node
// ran the scheduler, as declared in lockgen.yaml (catch_up).
type CatchUp string

// Catch-up policies.
const (
	CatchUpNone CatchUp = "none" // skip them all
	CatchUpOne  CatchUp = "one"  // run the latest one, skip the rest
	CatchUpAll  CatchUp = "all"  // run each, up to MaxCatchUp (older ones are skipped)
)

// MaxCatchUp bounds the missed ticks a scheduler runs (CatchUpAll) or
// records as skipped when it catches up; older missed ticks are only
// logged.
const MaxCatchUp = 100

// ScheduledJob declares one scheduled job.
type ScheduledJob struct {
	// Name is the job's name; Queue its queue (default DefaultQueue).
	Name, Queue string
	// Schedule computes the ticks (see ParseSchedule).
	Schedule Schedule
	// CatchUp is CatchUpNone, CatchUpOne (default) or CatchUpAll.
	CatchUp CatchUp
	// MinInterval skips (and records) a tick that comes sooner than this
	// after the previous tick with a run.
	MinInterval time.Duration
	// Priority, MaxAttempts and Timeout are those of each tick's run.
	Priority    int
	MaxAttempts int
	Timeout     time.Duration
	// Retention, when positive, is how long the job's finished runs are
	// kept (Client.RunNode sets it from the job's Retention when it is zero).
	// Catch-up never inserts a tick older than Retention by the database's
	// clock, nor records one as skipped: such a tick may have run and been
	// pruned since. A Retention shorter than the catch-up grace (5 s) counts
	// as the grace. Zero: catch-up is bounded only by MaxCatchUp and the
	// newest tick in the database. Whatever prunes the job's runs must keep
	// them for longer than this (the node's pruner does).
	Retention time.Duration
}

// Scheduler inserts the ticks of scheduled jobs. Start it with Run on every
// node.
type Scheduler struct {
	jobs *Client
	list []ScheduledJob
	// now is the database's clock: ticks are computed by it.
	now *dbClock
}

// NewScheduler validates list and returns the scheduler.
func (j *Client) NewScheduler(list []ScheduledJob) (*Scheduler, error) {
	for i := range list {
		sj := &list[i]
		if sj.Queue == "" {
			sj.Queue = DefaultQueue
		}
		if sj.CatchUp == "" {
			sj.CatchUp = CatchUpOne
		}
		switch {
		case sj.Schedule == nil:
			return nil, fmt.Errorf("%w: scheduled job %q has no schedule", runtime.ErrInvalid, sj.Name)
		case sj.CatchUp != CatchUpNone && sj.CatchUp != CatchUpOne && sj.CatchUp != CatchUpAll:
			return nil, fmt.Errorf("%w: scheduled job %q: catch-up %q (none, one or all)", runtime.ErrInvalid, sj.Name, sj.CatchUp)
		case sj.MaxAttempts < 1 || sj.Timeout <= 0:
			return nil, fmt.Errorf("%w: scheduled job %q needs max attempts >= 1 and a positive timeout", runtime.ErrInvalid, sj.Name)
		}
	}
	return &Scheduler{jobs: j, list: list, now: newDBClock(j.clock, j.store.Server().DB)}, nil
}

// Run inserts ticks until ctx ends, then returns nil. It fails at once
// when the server cannot run jobs (see runtime.Client.CheckServer). Database errors are
// logged and retried: a tick whose insert keeps failing on this node is
// inserted by another node, or run later by catch-up.
func (s *Scheduler) Run(ctx context.Context) error {
	ts := s.jobs.store
	if err := s.jobs.checkAtStart(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, sj := range s.list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runJob(ctx, ts, sj)
		}()
	}
	wg.Wait()
	return nil
}

// catchUpRetry is how long after a failed catch-up the scheduler tries
// again (sooner when the next tick is).
const catchUpRetry = time.Second

// clockCheckEvery is the longest the scheduler sleeps without looking at
// the database's clock again: when that clock steps back (seen at the
// dbClock's next reading), the tick it was waiting for may be far ahead.
const clockCheckEvery = catchUpGrace

func (s *Scheduler) runJob(ctx context.Context, ts driver.JobStore, sj ScheduledJob) {
	clock := s.jobs.clock
	log := s.jobs.log.With("job", sj.Name)
	// next is the next tick to insert live; last the latest tick with a
	// run, for MinInterval.
	var next, last time.Time
	for {
		// Start: catch up from the newest tick in the database.
		var err error
		if next, last, err = s.catchUpFrom(ctx, ts, sj, time.Time{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("lockgen: catching up the job's missed ticks failed", "error", err)
		if timing.SleepOrWake(ctx, clock.NewTimer, time.Second, nil) != nil {
			return
		}
	}
	// pending is the first tick this node has not handled since it last
	// caught up (zero when none): the first whose insert failed (the
	// database may have been down for every node, and then nobody inserted
	// it), or the first it reached more than catchUpGrace late (paused,
	// suspended, its statements hung). The ticks from it on follow the
	// catch-up rule (catchUpFrom) at the next tick, or the next after that
	// while catch-up fails; meanwhile the node inserts no tick, so that
	// the newest tick in the database never passes a gap nobody caught up.
	var pending time.Time
	readFailed := false // logged once per pending
	for !next.IsZero() {
		now := s.now.Now(ctx)
		if now.Before(next) {
			if t := sj.Schedule.Next(now.Add(catchUpGrace)); !t.IsZero() && t.Before(next) {
				// The tick before next, which this node handled or found
				// as the newest in the database, is more than catchUpGrace
				// ahead of the database's clock: it went back. Waiting for
				// next would silence the job until the clock gets there
				// again. The ticks up to next that have a run ran early,
				// and their inserts are no-ops when their time comes.
				log.Warn("lockgen: the database clock went back; the ticks go on from its time", "was", next, "now", now)
				next, last = sj.Schedule.Next(now), time.Time{}
				continue
			}
			if timing.SleepOrWake(ctx, clock.NewTimer, min(next.Sub(now), clockCheckEvery), nil) != nil {
				return
			}
			continue
		}
		if pending.IsZero() && next.Before(now.Add(-catchUpGrace)) {
			pending = next
		}
		if !pending.IsZero() {
			n, l, err := s.catchUpFrom(ctx, ts, sj, pending.Add(-time.Nanosecond))
			if err == nil {
				next, last, pending, readFailed = n, latest(last, l), time.Time{}, false
				continue
			}
			if ctx.Err() != nil {
				return
			}
			if !readFailed {
				log.Warn("lockgen: the ticks this node missed could not be caught up; no tick is inserted until they are", "from", pending, "error", err)
				readFailed = true
			}
			// No live tick either: a tick inserted after a gap that is not
			// caught up would become the newest tick in the database, and
			// every node's catch-up would start after it, so nobody would
			// ever run the gap's ticks. The ticks from pending on wait for
			// the next attempt, a second later (or at the next tick, when
			// sooner): not a whole period later, which for a job whose
			// retention is shorter than its period would drop the gap.
			now = s.now.Now(ctx)
			next = now.Add(catchUpRetry)
			if t := sj.Schedule.Next(now); !t.IsZero() && t.Before(next) {
				next = t
			}
			continue
		}
		if !last.IsZero() && next.Sub(last) < sj.MinInterval {
			s.skip(ctx, ts, sj, next, fmt.Sprintf("min_interval %v since the tick at %v", sj.MinInterval, last.Format(time.RFC3339Nano)))
		} else if s.insert(ctx, sj, next) {
			last = next
		} else if pending.IsZero() {
			pending = next
		}
		next = sj.Schedule.Next(next)
	}
	log.Warn("lockgen: the schedule has no more ticks")
}

// insert inserts tick's run within schedulerStatementTimeout; false when it
// failed (logged).
func (s *Scheduler) insert(ctx context.Context, sj ScheduledJob, tick time.Time) bool {
	sctx, cancel := context.WithTimeout(ctx, schedulerStatementTimeout)
	defer cancel()
	_, err := s.jobs.Enqueue(sctx, nil, NewRun{
		Job: sj.Name, Queue: sj.Queue, Priority: sj.Priority, ScheduledAt: tick,
		MaxAttempts: sj.MaxAttempts, Timeout: sj.Timeout,
	})
	if err != nil && ctx.Err() == nil {
		servererr.WarnUnlessTransient(s.jobs.log, "lockgen: inserting a tick failed; it follows the catch-up policy once an insert succeeds again", err, 1, "job", sj.Name, "tick", tick)
	}
	return err == nil
}

// skip records tick as skipped, for reason, within
// schedulerStatementTimeout; a failure is logged.
func (s *Scheduler) skip(ctx context.Context, ts driver.JobStore, sj ScheduledJob, tick time.Time, reason string) {
	sctx, cancel := context.WithTimeout(ctx, schedulerStatementTimeout)
	defer cancel()
	if err := ts.RunInsertSkipped(sctx, sj.Name, sj.Queue, tick, reason); err != nil && ctx.Err() == nil {
		servererr.WarnUnlessTransient(s.jobs.log, "lockgen: recording a skipped tick failed", err, 1, "job", sj.Name, "tick", tick)
	}
}
