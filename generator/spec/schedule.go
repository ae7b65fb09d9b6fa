package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// catchUps are the catch-up policies of a scheduled job.
var catchUps = []string{CatchUpNone, CatchUpOne, CatchUpAll}

// scheduleHint says how to write a schedule.
const scheduleHint = "use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h"

// schedule validates a job's schedule. It returns it with white space
// normalized, and for an @every schedule its interval.
func (l *loader) schedule(v value) (string, time.Duration) {
	raw, ok := l.text(v)
	if !ok {
		return "", 0
	}
	s := strings.Join(strings.Fields(raw), " ")
	if s == "" {
		l.errorf(v.node, scheduleHint, "schedule is empty")
		return "", 0
	}
	for _, prefix := range []string{"TZ=", "CRON_TZ="} {
		if zone, ok := strings.CutPrefix(s, prefix); ok {
			zone, rest, _ := strings.Cut(zone, " ")
			l.errorf(v.node, fmt.Sprintf("write timezone: %s and schedule: %q", zone, rest),
				"schedule %q sets its time zone with %s", raw, prefix)
			return "", 0
		}
	}
	err := parseSchedule(s)
	var never errNeverFires
	switch {
	case errors.As(err, &never):
		l.errorf(v.node, "check that its days exist in its months", "schedule %q never fires", raw)
		return "", 0
	case err != nil:
		l.errorf(v.node, scheduleHint, "invalid schedule %q: %s", raw, err)
		return "", 0
	}
	if every, ok := strings.CutPrefix(s, cronEvery); ok {
		// cron rounds the interval down to whole seconds, and up to 1s:
		// accept only intervals it keeps as written.
		d, _ := time.ParseDuration(every)
		switch {
		case d < minEvery:
			l.errorf(v.node, "use @every 1s or longer", "schedule %q is shorter than the minimum interval of 1s", raw)
			return "", 0
		case d%time.Second != 0:
			l.errorf(v.node, "the scheduler ticks on whole seconds; e.g. @every "+FormatDuration(d.Round(time.Second)),
				"schedule %q is not a whole number of seconds", raw)
			return "", 0
		}
		return s, d
	}
	return s, 0
}

// cronEvery starts an interval schedule, as the cron parser recognizes it.
const cronEvery = "@every "

// errNeverFires is a schedule that parses but that the runtime refuses
// because it has no tick.
type errNeverFires struct{ error }

// parseSchedule checks s, a schedule without a time zone, with
// jobs.ParseSchedule: the call the generated RunJobs makes at start, so
// the spec accepts exactly the schedules the runtime parses, with the same
// cron parser configuration. A schedule the parser rejects comes back as
// the parser's own error, which the runtime wraps; a schedule the runtime
// refuses otherwise (it never fires: ParseSchedule refuses nothing else
// for an empty time zone and no TZ= prefix) as an errNeverFires. A panic of
// the parser becomes an error, so that Load never panics.
func parseSchedule(s string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the cron parser failed: %v", r)
		}
	}()
	if _, err = jobs.ParseSchedule(s, ""); err == nil {
		return nil
	}
	var wrapped interface{ Unwrap() []error }
	if errors.As(err, &wrapped) {
		for _, e := range wrapped.Unwrap() {
			if !errors.Is(e, runtime.ErrInvalid) {
				return e
			}
		}
	}
	return errNeverFires{err}
}

// timezone checks a scheduled job's time zone.
func (l *loader) timezone(v value) string {
	tz, ok := l.text(v)
	if !ok {
		return ""
	}
	const hint = "use an IANA time zone name such as Asia/Shanghai, Europe/Berlin or UTC"
	switch _, err := time.LoadLocation(tz); {
	case tz == "":
		l.errorf(v.node, hint, "timezone is empty")
	case tz == "Local":
		l.errorf(v.node, hint, "timezone Local depends on each node's settings")
	case err != nil:
		l.errorf(v.node, hint, "unknown timezone %q", tz)
	default:
		return tz
	}
	return ""
}

// catchUp checks a scheduled job's catch-up policy.
func (l *loader) catchUp(v value) string {
	c, ok := l.text(v)
	if !ok {
		return ""
	}
	if !slices.Contains(catchUps, c) {
		l.errorf(v.node, choiceHint(c, catchUps, "valid values"), "unknown catch_up %q", c)
		return ""
	}
	return c
}

// minInterval checks a scheduled job's min_interval against its schedule's
// interval (every; 0 when the schedule is not an @every one or is invalid).
func (l *loader) minInterval(v value, schedule string, every time.Duration) time.Duration {
	d := l.durationRange(v, 0, maxMinInterval)
	if every > 0 && d > every {
		l.errorf(v.node, "use at most "+FormatDuration(every)+", or a longer schedule",
			"min_interval %s is longer than the interval of schedule %q, so runs would miss ticks", v.node.Value, schedule)
		return 0
	}
	return d
}
