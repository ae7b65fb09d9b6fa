package spec

import (
	"fmt"
	"slices"
	"time"
	_ "time/tzdata" // timezone is checked against the same zone database on every machine

	"gopkg.in/yaml.v3"

	"github.com/lockgen/lockgen/runtime/jobs"
)

// Defaults of jobs and queues applied by Load.
const (
	// DefaultQueue is the queue of a job that names none. It needs no
	// declaration under queues:.
	DefaultQueue = jobs.DefaultQueue
	// DefaultQueueConcurrency is the concurrency of a queue that declares
	// none, and of the implicit default queue.
	DefaultQueueConcurrency = 100
	// DefaultTimezone is the time zone of a scheduled job's schedule.
	DefaultTimezone = "UTC"
	// DefaultJobTimeout is how long a run may take.
	DefaultJobTimeout = 10 * time.Minute
	// DefaultMaxAttempts is how many times a run is tried.
	DefaultMaxAttempts = 25
	// DefaultBackoffInitial is the wait before the first retry.
	DefaultBackoffInitial = time.Second
	// DefaultBackoffMax caps the wait between retries.
	DefaultBackoffMax = time.Hour
	// DefaultRetention is how long finished runs are kept.
	DefaultRetention = 7 * 24 * time.Hour
)

// jobFields are the keys of a job.
var jobFields = []field{
	{name: "name", required: true, example: "name: send_sms"},
	{name: "schedule", example: `schedule: "0 3 * * *"`},
	{name: "timezone", example: "timezone: Asia/Shanghai"},
	{name: "args", example: "args: {order_id: int64, phone: string}"},
	{name: "queue", example: "queue: mail"},
	{name: "timeout", example: "timeout: 10m"},
	{name: "max_attempts", example: "max_attempts: 25"},
	{name: "backoff", example: "backoff: {initial: 1s, max: 5m}"},
	{name: "priority", example: "priority: 10"},
	{name: "catch_up", example: "catch_up: one"},
	{name: "min_interval", example: "min_interval: 30s"},
	{name: "retention", example: "retention: 168h"},
	{name: "concurrency", example: "concurrency: 1"},
}

// backoffFields are the keys of a job's backoff.
var backoffFields = []field{
	{name: "initial", example: "initial: 1s"},
	{name: "max", example: "max: 5m"},
}

// queueFields are the keys of a queue.
var queueFields = []field{
	{name: "name", required: true, example: "name: mail"},
	{name: "concurrency", example: "concurrency: 10"},
	{name: "external", example: "external: true"},
}

// argTypes are the spec spellings of arg types other than json(...), with
// their Go types.
var argTypes = []struct{ spec, goType string }{
	{ArgInt64, "int64"},
	{ArgInt32, "int32"},
	{ArgString, "string"},
	{ArgBool, "bool"},
	{ArgFloat64, "float64"},
	{ArgTime, "time.Time"},
	{ArgDuration, "time.Duration"},
	{ArgStrings, "[]string"},
}

// argTypeNames lists the spec spellings of argTypes, for suggestions.
var argTypeNames = func() []string {
	names := make([]string, len(argTypes))
	for i, t := range argTypes {
		names[i] = t.spec
	}
	return names
}()

// Limits of jobs and queues.
const (
	minJobTimeout      = time.Second
	maxJobTimeout      = 24 * time.Hour
	minMaxAttempts     = 1
	maxMaxAttempts     = 1000
	minBackoff         = 10 * time.Millisecond
	maxBackoff         = 24 * time.Hour
	minPriority        = -jobs.MaxPriority
	maxPriority        = jobs.MaxPriority
	maxMinInterval     = 24 * time.Hour
	minRetention       = time.Minute
	maxRetention       = 8760 * time.Hour
	minEvery           = time.Second
	minQueueConcurrent = 1
	maxQueueConcurrent = 10000
)

// jsonArgExample is an example of a json arg type.
const jsonArgExample = "json(example.com/app/model.Payload)"

// jobs validates the list of jobs, and returns them with the queues they
// run in: the declared ones, then the implicit default queue if a job uses
// it without it being declared.
func (l *loader) jobs(v value, qs *queueSet) ([]Job, []Queue) {
	items, ok := l.list(v)
	if !ok {
		return nil, nil
	}
	if len(items) == 0 {
		l.errorf(v.node, "declare at least one, e.g. "+v.field.example, "jobs is empty")
		return nil, nil
	}
	seen := newNameSet()
	jobs := make([]Job, 0, len(items))
	for _, item := range items {
		jobs = append(jobs, l.job(resolve(item), seen, qs))
	}
	l.jobNameClashes(jobs, seen)
	queues := qs.list
	usesDefault := slices.ContainsFunc(jobs, func(j Job) bool { return j.Queue == DefaultQueue })
	if usesDefault && !slices.Contains(qs.names, DefaultQueue) {
		queues = append(queues, Queue{Name: DefaultQueue, Concurrency: DefaultQueueConcurrency})
	}
	return jobs, queues
}

// jobNameClashes reports jobs that would generate a Go name an earlier job
// generates too, e.g. "report" (ReportArgs) and "report_args" (the handler
// method ReportArgs). Each job is reported once, at its name.
func (l *loader) jobNameClashes(jobs []Job, seen *nameSet) {
	owner := map[string]Job{} // Go name -> the first job generating it
	for _, j := range jobs {
		if j.Name == "" {
			continue
		}
		reported := false
		for _, name := range j.Names() {
			first, clash := owner[name]
			if !clash {
				owner[name] = j
				continue
			}
			if !reported {
				l.errorf(seen.byName[j.Name], fmt.Sprintf("%q is at line %d; rename one of them", first.Name, seen.byName[first.Name].Line),
					"jobs %q and %q both generate the Go name %s", first.Name, j.Name, name)
				reported = true
			}
		}
	}
}

// job validates one job and applies its defaults.
func (l *loader) job(n *yaml.Node, seen *nameSet, qs *queueSet) Job {
	j := Job{
		Pos:            pos(n),
		Queue:          DefaultQueue,
		Timeout:        DefaultJobTimeout,
		MaxAttempts:    DefaultMaxAttempts,
		BackoffInitial: DefaultBackoffInitial,
		BackoffMax:     DefaultBackoffMax,
		Retention:      DefaultRetention,
	}
	fields, ok := l.mapping(n, "each job", `- {name: nightly_report, schedule: "0 3 * * *"}`, "", jobFields)
	if !ok {
		return j
	}
	if v, ok := fields["name"]; ok {
		j.Name, j.GoName = l.uniqueName(v, seen, "job")
	}
	var every time.Duration
	_, scheduled := fields["schedule"]
	if v, ok := fields["schedule"]; ok {
		j.Schedule, every = l.schedule(v)
		j.Timezone, j.CatchUp = DefaultTimezone, CatchUpOne
	}
	for _, k := range []string{"timezone", "catch_up", "min_interval"} {
		if v, ok := fields[k]; ok && !scheduled {
			l.errorf(v.key, "add a schedule, or remove "+k, "%s is only for scheduled jobs, and this job has no schedule", k)
		}
	}
	if v, ok := fields["timezone"]; ok && scheduled {
		j.Timezone = l.timezone(v)
	}
	if v, ok := fields["args"]; ok {
		j.Args = l.args(v)
	}
	if v, ok := fields["queue"]; ok {
		j.Queue = l.jobQueue(v, qs)
	}
	if v, ok := fields["timeout"]; ok {
		j.Timeout = l.durationRange(v, minJobTimeout, maxJobTimeout)
	}
	if v, ok := fields["max_attempts"]; ok {
		j.MaxAttempts = l.intRange(v, minMaxAttempts, maxMaxAttempts, "1 means no retry")
	}
	if v, ok := fields["backoff"]; ok {
		j.BackoffInitial, j.BackoffMax = l.backoff(v)
	}
	if v, ok := fields["priority"]; ok {
		j.Priority = l.intRange(v, minPriority, maxPriority, "higher runs first")
	}
	if v, ok := fields["catch_up"]; ok && scheduled {
		j.CatchUp = l.catchUp(v)
	}
	if v, ok := fields["min_interval"]; ok && scheduled {
		j.MinInterval = l.minInterval(v, j.Schedule, every)
	}
	if v, ok := fields["retention"]; ok {
		j.Retention = l.durationRange(v, minRetention, maxRetention)
	}
	if v, ok := fields["concurrency"]; ok {
		j.Concurrency = l.jobConcurrency(v)
		if j.Concurrency != 0 && qs.external(j.Queue) {
			l.errorf(v.key, "remove concurrency, or move the job to a queue the Go workers work: only they keep a job to one run at a time",
				"job %q is in external queue %q, which takes no job concurrency", j.Name, j.Queue)
		}
	}
	return j
}

// jobQueue checks the queue a job names: "default", or a declared queue.
func (l *loader) jobQueue(v value, qs *queueSet) string {
	q := l.snakeName(v, "queue name")
	switch {
	case q == "":
		return ""
	case q == DefaultQueue || slices.Contains(qs.names, q):
		return q
	case !qs.checkable:
		return ""
	}
	hint := fmt.Sprintf("declare it, e.g. queues: [{name: %s, concurrency: 10}], or remove queue to use the queue default", q)
	if s, ok := closest(q, qs.names); ok {
		hint = fmt.Sprintf("did you mean %q?", s)
	}
	l.errorf(v.node, hint, "queue %q is not declared under queues", q)
	return ""
}

// backoff validates a job's backoff and returns its initial and maximum
// waits, defaults applied.
func (l *loader) backoff(v value) (initial, maxWait time.Duration) {
	initial, maxWait = DefaultBackoffInitial, DefaultBackoffMax
	fields, ok := l.nested(v, backoffFields)
	if !ok {
		return initial, maxWait
	}
	iv, hasInitial := fields["initial"]
	mv, hasMax := fields["max"]
	if hasInitial {
		initial = l.durationRange(iv, minBackoff, maxBackoff)
	}
	if hasMax {
		maxWait = l.durationRange(mv, minBackoff, maxBackoff)
	}
	switch {
	case initial == 0 || maxWait == 0: // reported
	case hasInitial && hasMax && maxWait < initial:
		l.errorf(mv.node, "make max at least initial", "backoff.max %s is shorter than backoff.initial %s", mv.node.Value, iv.node.Value)
	case !hasMax:
		maxWait = max(maxWait, initial)
	case !hasInitial:
		initial = min(initial, maxWait)
	}
	return initial, maxWait
}

// jobConcurrency checks a job's concurrency: only 1 is supported.
func (l *loader) jobConcurrency(v value) int {
	n, ok := l.integer(v)
	if !ok {
		return 0
	}
	if n != 1 {
		l.errorf(v.node, "concurrency: 1 runs one run of the job at a time across the cluster; remove concurrency for no limit; singletons per args key are planned",
			"concurrency must be 1, not %s", v.node.Value)
		return 0
	}
	return 1
}

// durationRange returns v's value, which must be a duration from lo to hi,
// or 0 after reporting why it is not.
func (l *loader) durationRange(v value, lo, hi time.Duration) time.Duration {
	d, ok := l.duration(v)
	if !ok {
		return 0
	}
	hint := fmt.Sprintf("use %s to %s, e.g. %s", FormatDuration(lo), FormatDuration(hi), v.field.example)
	switch {
	case d < lo && lo == 0:
		l.errorf(v.node, hint, "%s must not be negative, not %s", v.label, v.node.Value)
	case d < lo:
		l.errorf(v.node, hint, "%s %s is shorter than the minimum of %s", v.label, v.node.Value, FormatDuration(lo))
	case d > hi:
		l.errorf(v.node, hint, "%s %s is longer than the maximum of %s", v.label, v.node.Value, FormatDuration(hi))
	default:
		return d
	}
	return 0
}

// intRange returns v's value, which must be a whole number from lo to hi,
// or 0 after reporting why it is not; about explains the number in the
// hint.
func (l *loader) intRange(v value, lo, hi int, about string) int {
	n, ok := l.integer(v)
	if !ok {
		return 0
	}
	if n < int64(lo) || n > int64(hi) {
		l.errorf(v.node, fmt.Sprintf("e.g. %s; %s", v.field.example, about),
			"%s must be between %d and %d, not %s", v.label, lo, hi, v.node.Value)
		return 0
	}
	return int(n)
}
