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
// time as the others. The tick survives restarts: the latest
// tick with a run is read from the runs table at start, and the ticks
// missed since follow the job's catch-up policy; a tick that is not run is
// recorded as a skipped run. A node that wakes up late (paused,
// suspended) catches up the same way, from the newest tick in the
// runs table rather than its own: the other nodes may have run the ticks
// since, and Prune deleted them (it always keeps the newest). No tick
// older than the job's retention is inserted or recorded.

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
	// Catch-up never inserts a tick older than Retention by this node's
	// clock, nor records one as skipped: such a tick may have run and been
	// pruned since. A Retention shorter than the catch-up grace (5 s) counts
	// as the grace. Zero: catch-up is bounded only by MaxCatchUp.
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

// catchUpGrace is how old a tick must be, by this node's clock, to count as
// missed: a younger one may still be inserted by a live node whose timer
// fires late or whose clock is behind, so it is inserted as a live tick
// (the unique key makes that harmless) instead of being skipped.
const catchUpGrace = 5 * time.Second

// lastTickTimeout bounds the read of a job's newest tick.
const lastTickTimeout = 5 * time.Second

func (s *Scheduler) runJob(ctx context.Context, ts driver.JobStore, sj ScheduledJob) {
	clock := s.jobs.clock
	now := func() time.Time { return s.now.Now(ctx) }
	log := s.jobs.log.With("job", sj.Name)
	var last time.Time // the latest tick with a run, for MinInterval
	var next time.Time
	// gap is the first tick whose insert failed since the last insert
	// that succeeded: when the database was down for every node, nobody
	// inserted it, and no node fell behind to catch it up.
	var gap time.Time
	for {
		// Start: catch up from the latest tick with a run.
		t, ok, err := lastTick(ctx, ts, sj.Name)
		if err == nil {
			if !ok {
				next = sj.Schedule.Next(now()) // first start: no history
				break
			}
			var inserted time.Time
			next, inserted = s.resume(ctx, ts, sj, t, now())
			last = latest(t, inserted)
			break
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("lockgen: reading the job's last tick failed", "error", err)
		if timing.SleepOrWake(ctx, clock.NewTimer, time.Second, nil) != nil {
			return
		}
	}
	for !next.IsZero() {
		if err := timing.SleepOrWake(ctx, clock.NewTimer, next.Sub(now()), nil); err != nil {
			return
		}
		now := now()
		if now.Before(next) {
			continue // a timer that fired early
		}
		if next.Before(now.Add(-catchUpGrace)) {
			// This node fell behind (paused, suspended, its clock stepped
			// ahead): next and the ticks after it are missed, and may have
			// been run by the other nodes since, and pruned.
			var inserted time.Time
			next, inserted = s.fellBehind(ctx, ts, sj, next)
			last = latest(last, inserted)
			continue
		}
		if !last.IsZero() && next.Sub(last) < sj.MinInterval {
			s.skip(ctx, ts, sj, next, fmt.Sprintf("min_interval %v since the tick at %v", sj.MinInterval, last.Format(time.RFC3339Nano)))
		} else if s.insert(ctx, sj, next) {
			last = next
			if !gap.IsZero() {
				// The database answers again: the ticks from the gap up to
				// this one follow the job's catch-up policy (the unique key
				// makes the ticks other nodes inserted meanwhile harmless).
				s.catchUp(ctx, ts, sj, gap.Add(-time.Nanosecond), next.Add(-time.Nanosecond))
				gap = time.Time{}
			}
		} else if gap.IsZero() {
			gap = next
		}
		next = sj.Schedule.Next(next)
	}
	log.Warn("lockgen: the schedule has no more ticks")
}

// fellBehind handles the ticks from next on for a node that reached next
// more than catchUpGrace late, and returns the first tick to insert live
// and the latest tick it inserted a run for (zero when none). This node's
// own position is stale: the other nodes may have run the ticks since and
// Prune deleted them (all but the newest), so it catches up, per the job's
// policy, from the later of next and the newest tick in the database.
//
// When the newest tick cannot be read, catching up from this node's own
// position could insert pruned ticks again, so it does not catch up this
// time: the live ticks go on after the cutoff, and the missed ticks are
// left to the other nodes (a tick that every node missed meanwhile is then
// neither run nor recorded as skipped).
func (s *Scheduler) fellBehind(ctx context.Context, ts driver.JobStore, sj ScheduledJob, next time.Time) (time.Time, time.Time) {
	from := next.Add(-time.Nanosecond) // the ticks after from are missed
	t, ok, err := lastTick(ctx, ts, sj.Name)
	now := s.now.Now(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.jobs.log.Warn("lockgen: this node fell behind and could not read the job's last tick; the ticks it missed are not caught up",
				"job", sj.Name, "from", next, "error", err)
		}
		return s.resume(ctx, ts, sj, latest(from, now.Add(-catchUpGrace)), now)
	}
	if ok {
		from = latest(from, t)
	}
	return s.resume(ctx, ts, sj, from, now)
}

// resume handles the ticks after from that are older than catchUpGrace at
// now per the job's policy, except those older than its retention, which
// are neither run nor recorded. It returns the first tick to insert live
// and the latest tick it inserted a run for (zero when none).
func (s *Scheduler) resume(ctx context.Context, ts driver.JobStore, sj ScheduledJob, from, now time.Time) (next, inserted time.Time) {
	cutoff := now.Add(-catchUpGrace)
	if sj.Retention > 0 {
		oldest := now.Add(-max(sj.Retention, catchUpGrace))
		if t := sj.Schedule.Next(from); !t.IsZero() && t.Before(oldest) {
			s.jobs.log.Warn("lockgen: missed ticks older than the job's retention are neither run nor recorded",
				"job", sj.Name, "after", from, "before", oldest)
			from = oldest.Add(-time.Nanosecond)
		}
	}
	if from.Before(cutoff) {
		inserted = s.catchUp(ctx, ts, sj, from, cutoff)
		from = cutoff // the ticks after the cutoff run live
	}
	return sj.Schedule.Next(from), inserted
}

// lastTick reads job's newest tick with a run, within lastTickTimeout.
func lastTick(ctx context.Context, ts driver.JobStore, job string) (time.Time, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, lastTickTimeout)
	defer cancel()
	t, ok, err := ts.RunLastTick(ctx, job)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("lockgen: read the last tick of job %q: %w", job, err)
	}
	return t, ok, nil
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// catchUp handles the ticks after after up to until, per the job's policy,
// and returns the latest tick it inserted a run for (zero when none).
func (s *Scheduler) catchUp(ctx context.Context, ts driver.JobStore, sj ScheduledJob, after, until time.Time) (inserted time.Time) {
	var missed []time.Time
	dropped := 0
	for t := sj.Schedule.Next(after); !t.IsZero() && !t.After(until); t = sj.Schedule.Next(t) {
		missed = append(missed, t)
		if len(missed) > MaxCatchUp {
			missed = missed[1:]
			dropped++
		}
	}
	if dropped > 0 {
		s.jobs.log.Warn("lockgen: missed ticks beyond the catch-up bound are not recorded", "job", sj.Name, "ticks", dropped)
	}
	for i, t := range missed {
		run := sj.CatchUp == CatchUpAll || (sj.CatchUp == CatchUpOne && i == len(missed)-1)
		if run && s.insert(ctx, sj, t) {
			inserted = t
			continue
		}
		s.skip(ctx, ts, sj, t, "missed while no scheduler ran (catch_up "+string(sj.CatchUp)+")")
	}
	return inserted
}

// insert inserts tick's run; false when it failed (logged).
func (s *Scheduler) insert(ctx context.Context, sj ScheduledJob, tick time.Time) bool {
	_, err := s.jobs.Enqueue(ctx, nil, NewRun{
		Job: sj.Name, Queue: sj.Queue, Priority: sj.Priority, ScheduledAt: tick,
		MaxAttempts: sj.MaxAttempts, Timeout: sj.Timeout,
	})
	if err != nil && ctx.Err() == nil {
		servererr.WarnUnlessTransient(s.jobs.log, "lockgen: inserting a tick failed; it follows the catch-up policy once an insert succeeds again", err, 1, "job", sj.Name, "tick", tick)
	}
	return err == nil
}

func (s *Scheduler) skip(ctx context.Context, ts driver.JobStore, sj ScheduledJob, tick time.Time, reason string) {
	if err := ts.RunInsertSkipped(ctx, sj.Name, sj.Queue, tick, reason); err != nil && ctx.Err() == nil {
		servererr.WarnUnlessTransient(s.jobs.log, "lockgen: recording a skipped tick failed", err, 1, "job", sj.Name, "tick", tick)
	}
}
