package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockgen/lockgen/runtime/probe"
)

// Scheduled jobs: one run per tick, cluster-wide.
//
// Every node runs the scheduler and inserts each tick it computes as a run
// keyed by its job and tick (the unique index runs_dedupe), which turns
// every insert after the first into a no-op, so a tick gets exactly one
// run however many nodes insert it, and no tick is lost while nodes come
// and go (there is no leader to elect first). Ticks are absolute: cron ticks by the job's time
// zone, @every ticks at multiples of the interval since the Unix epoch, so
// all nodes compute the same ones. The tick survives restarts: the latest
// tick with a run is read from the runs table at start, and the ticks
// missed since follow the job's catch-up policy; a tick that is not run is
// recorded as a skipped run.

// Schedule computes a job's ticks.
type Schedule interface {
	// Next returns the first tick after t.
	Next(t time.Time) time.Time
}

// cronParser accepts 5 fields, 6 with seconds first, and descriptors
// (@daily, @every 1m, …).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a cron spec in the IANA time zone tz ("" is UTC).
func ParseSchedule(spec, tz string) (Schedule, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("%w: time zone %q: %w", ErrInvalid, tz, err)
		}
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: schedule %q: give the time zone separately", ErrInvalid, spec)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: schedule %q: %w", ErrInvalid, spec, err)
	}
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return everySchedule{every.Delay}, nil
	}
	z := zoned{s, loc}
	if z.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%w: schedule %q never fires", ErrInvalid, spec)
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

// Catch-up policies: what happens to the ticks missed while no node ran the
// scheduler.
const (
	CatchUpNone = "none" // skip them all
	CatchUpOne  = "one"  // run the latest one, skip the rest
	CatchUpAll  = "all"  // run each, up to MaxCatchUp (older ones are skipped)
)

// MaxCatchUp bounds the missed ticks a scheduler runs (CatchUpAll) or
// records as skipped at start; older missed ticks are only logged.
const MaxCatchUp = 100

// ScheduledJob declares one scheduled job.
type ScheduledJob struct {
	// Name is the job's name; Queue its queue (default DefaultQueue).
	Name, Queue string
	// Schedule computes the ticks (see ParseSchedule).
	Schedule Schedule
	// CatchUp is CatchUpNone, CatchUpOne (default) or CatchUpAll.
	CatchUp string
	// MinInterval skips (and records) a tick that comes sooner than this
	// after the previous tick with a run.
	MinInterval time.Duration
	// Priority, MaxAttempts and Timeout are those of each tick's run.
	Priority    int
	MaxAttempts int
	Timeout     time.Duration
}

// Scheduler inserts the ticks of scheduled jobs. Start it with Run on every
// node.
type Scheduler struct {
	jobs *Jobs
	list []ScheduledJob
}

// NewScheduler validates list and returns the scheduler.
func (j *Jobs) NewScheduler(list []ScheduledJob) (*Scheduler, error) {
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
			return nil, fmt.Errorf("%w: scheduled job %q has no schedule", ErrInvalid, sj.Name)
		case sj.CatchUp != CatchUpNone && sj.CatchUp != CatchUpOne && sj.CatchUp != CatchUpAll:
			return nil, fmt.Errorf("%w: scheduled job %q: catch-up %q (none, one or all)", ErrInvalid, sj.Name, sj.CatchUp)
		case sj.MaxAttempts < 1 || sj.Timeout <= 0:
			return nil, fmt.Errorf("%w: scheduled job %q needs max attempts >= 1 and a positive timeout", ErrInvalid, sj.Name)
		}
	}
	return &Scheduler{jobs: j, list: list}, nil
}

// TickStore is the part of JobStore the scheduler uses besides RunInsert.
type TickStore interface {
	// RunLastTick is the latest tick of job that has a run; ok false when
	// there is none.
	RunLastTick(ctx context.Context, job string) (tick time.Time, ok bool, err error)
	// RunInsertSkipped records a tick that is not run, unless it has a run.
	RunInsertSkipped(ctx context.Context, job, queue string, tick time.Time, reason string) error
}

// Run inserts ticks until ctx ends, then returns nil. It fails at once
// when the server cannot run jobs (see Client.CheckServer). Database errors are
// logged and retried: a tick whose insert keeps failing on this node is
// inserted by another node, or run later by catch-up.
func (s *Scheduler) Run(ctx context.Context) error {
	ts, ok := s.jobs.store.(TickStore)
	if !ok {
		return fmt.Errorf("%w: the store does not implement TickStore", ErrInvalid)
	}
	if err := s.jobs.client.checkServerAtStart(ctx, probe.Jobs); err != nil {
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

// catchUpGrace is how old a tick must be, by this node's clock, to count as
// missed at start: a younger one may still be inserted by a live node
// whose timer fires late or whose clock is behind, so it is inserted as a
// live tick (the unique key makes that harmless) instead of being skipped.
const catchUpGrace = 5 * time.Second

func (s *Scheduler) runJob(ctx context.Context, ts TickStore, sj ScheduledJob) {
	client := s.jobs.client
	clock := client.clock
	log := client.logger.With("job", sj.Name)
	var last time.Time // the latest tick inserted as a run
	var next time.Time
	for {
		// Start: catch up from the latest tick with a run.
		t, ok, err := ts.RunLastTick(ctx, sj.Name)
		if err == nil {
			cutoff := clock.Now().Add(-catchUpGrace)
			if !ok {
				next = sj.Schedule.Next(clock.Now()) // first start: no history
				break
			}
			last = t
			if t.Before(cutoff) {
				last = s.catchUp(ctx, ts, sj, t, cutoff)
				t = cutoff
			}
			next = sj.Schedule.Next(t) // ticks after the cutoff run live
			break
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("lockgen: reading the job's last tick failed", "error", err)
		if sleepOrWake(ctx, clock, time.Second, nil) != nil {
			return
		}
	}
	for !next.IsZero() {
		if err := sleepOrWake(ctx, clock, next.Sub(clock.Now()), nil); err != nil {
			return
		}
		if clock.Now().Before(next) {
			continue // a timer that fired early
		}
		if !last.IsZero() && next.Sub(last) < sj.MinInterval {
			s.skip(ctx, ts, sj, next, fmt.Sprintf("min_interval %v since the tick at %v", sj.MinInterval, last.Format(time.RFC3339Nano)))
		} else if s.insert(ctx, sj, next) {
			last = next
		}
		done := next
		next = sj.Schedule.Next(done)
		if cutoff := clock.Now().Add(-catchUpGrace); !next.IsZero() && next.Before(cutoff) {
			// This node fell behind (a long pause): the ticks it missed
			// follow the catch-up policy, as after a restart.
			if l := s.catchUp(ctx, ts, sj, done, cutoff); l.After(last) {
				last = l
			}
			next = sj.Schedule.Next(cutoff)
		}
	}
	log.Warn("lockgen: the schedule has no more ticks")
}

// catchUp handles the ticks after last up to until, per the job's policy,
// and returns the latest tick it inserted a run for (or last).
func (s *Scheduler) catchUp(ctx context.Context, ts TickStore, sj ScheduledJob, last, until time.Time) time.Time {
	var missed []time.Time
	dropped := 0
	for t := sj.Schedule.Next(last); !t.IsZero() && !t.After(until); t = sj.Schedule.Next(t) {
		missed = append(missed, t)
		if len(missed) > MaxCatchUp {
			missed = missed[1:]
			dropped++
		}
	}
	if dropped > 0 {
		s.jobs.client.logger.Warn("lockgen: missed ticks beyond the catch-up bound are not recorded", "job", sj.Name, "ticks", dropped)
	}
	for i, t := range missed {
		run := sj.CatchUp == CatchUpAll || (sj.CatchUp == CatchUpOne && i == len(missed)-1)
		if run && s.insert(ctx, sj, t) {
			last = t
			continue
		}
		s.skip(ctx, ts, sj, t, "missed while no scheduler ran (catch_up "+sj.CatchUp+")")
	}
	return last
}

// insert inserts tick's run; false when it failed (logged).
func (s *Scheduler) insert(ctx context.Context, sj ScheduledJob, tick time.Time) bool {
	_, err := s.jobs.Enqueue(ctx, nil, NewRun{
		Job: sj.Name, Queue: sj.Queue, Priority: sj.Priority, ScheduledAt: tick,
		MaxAttempts: sj.MaxAttempts, Timeout: sj.Timeout,
	})
	if err != nil && ctx.Err() == nil {
		warnUnlessTransient(s.jobs.client.logger, "lockgen: inserting a tick failed; another node or a restart's catch-up covers it", err, "job", sj.Name, "tick", tick)
	}
	return err == nil
}

func (s *Scheduler) skip(ctx context.Context, ts TickStore, sj ScheduledJob, tick time.Time, reason string) {
	if err := ts.RunInsertSkipped(ctx, sj.Name, sj.Queue, tick, reason); err != nil && ctx.Err() == nil {
		warnUnlessTransient(s.jobs.client.logger, "lockgen: recording a skipped tick failed", err, "job", sj.Name, "tick", tick)
	}
}
