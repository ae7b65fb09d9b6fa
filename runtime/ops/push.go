package ops

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// Arg is a declared argument of a job: its JSON name and its type as
// lockgen.yaml spells it (int64, int32, string, bool, float64, time,
// duration, []string, json).
type Arg struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Push is a run to enqueue, as a client sends it. Only Args is needed;
// the rest falls back to the job's declaration.
type Push struct {
	// Args is a JSON object with the job's declared arguments: none other,
	// each of its declared type (a duration as Go's nanoseconds or as a Go
	// duration string such as "1m30s"; a time in RFC 3339). A missing one
	// is its type's zero value, as for a Go handler. Empty means {}.
	Args json.RawMessage `json:"args,omitempty"`
	// Delay ("30s") or RunAt (RFC 3339) makes the run due later, by the
	// database clock; not both, and at most 10 years ahead.
	Delay string     `json:"delay,omitempty"`
	RunAt *time.Time `json:"run_at,omitempty"`
	// Priority (-100 to 100) and MaxAttempts override the job's.
	Priority    *int `json:"priority,omitempty"`
	MaxAttempts *int `json:"max_attempts,omitempty"`
	// UniqueKey, when set, returns the existing unfinished run of the job
	// with this key instead of enqueuing another.
	UniqueKey string `json:"unique_key,omitempty"`
	// Headers travel with the run to each attempt (string values, at most
	// driver.MaxHeaders of them and driver.MaxHeadersBytes in all): a
	// producer's W3C trace context (traceparent, tracestate) here makes
	// the attempts' spans link to its span.
	Headers map[string]string `json:"headers,omitempty"`
}

// Pushed is the answer to a Push: the run's ID, and whether it is an
// existing run (the same unique key) rather than a new one.
type Pushed struct {
	ID       int64 `json:"id"`
	Existing bool  `json:"existing"`
}

// MaxDelay is the longest delay a Push may ask for.
const MaxDelay = 10 * 365 * 24 * time.Hour

// MaxPushBatch is the most runs one PushMany takes.
const MaxPushBatch = 1000

// Push enqueues a run of a declared job, with the job's queue, max
// attempts, timeout and priority unless p overrides them. Every field is
// checked first (an *Error naming it, "args.<name>" for an argument);
// nothing is written unless all are right. A database error means the run
// may or may not exist.
func (o *Ops) Push(ctx context.Context, job string, p Push) (Pushed, error) {
	if err := o.checkJob(job); err != nil {
		return Pushed{}, err
	}
	row, err := o.prepare(o.job(job), p)
	if err != nil {
		return Pushed{}, err
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	pushed, err := row.insert(ctx, o.db)
	if err != nil {
		return Pushed{}, fmt.Errorf("ops: push %s: %w", job, err)
	}
	return pushed, nil
}

// PushMany enqueues runs of a declared job, one per element of ps (1 to
// MaxPushBatch), in one transaction: all of them or, on any error, none.
// Every run is checked first, an *Error naming the field of the run that
// is wrong ("runs[3].args.order_id"). Runs with the unique key of an
// unfinished run of the job, or of an earlier run of ps, answer that run
// (Existing). The answer is in the order of ps.
func (o *Ops) PushMany(ctx context.Context, job string, ps []Push) ([]Pushed, error) {
	if err := o.checkJob(job); err != nil {
		return nil, err
	}
	if len(ps) < 1 || len(ps) > MaxPushBatch {
		return nil, invalid("runs", "runs must hold 1 to %d runs, got %d", MaxPushBatch, len(ps))
	}
	j := o.job(job)
	rows := make([]pushRow, len(ps))
	for i, p := range ps {
		row, err := o.prepare(j, p)
		var e *Error
		if errors.As(err, &e) {
			return nil, &Error{Code: e.Code, Field: fmt.Sprintf("runs[%d].%s", i, e.Field), Message: fmt.Sprintf("runs[%d]: %s", i, e.Message)}
		}
		if err != nil {
			return nil, err
		}
		rows[i] = row
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	out := make([]Pushed, len(rows))
	err := driver.InTx(ctx, o.db, func(conn *sql.Conn) error {
		for i, row := range rows {
			pushed, err := row.insert(ctx, conn)
			if err != nil {
				return err
			}
			out[i] = pushed
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ops: push %d runs of %s: %w", len(rows), job, err)
	}
	return out, nil
}

// pushRow is a checked Push: its statement and the statement's arguments.
type pushRow struct {
	stmt string
	args []any
}

// insert runs the row's INSERT on db (a pool or a transaction's
// connection).
func (r pushRow) insert(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) (Pushed, error) {
	res, err := db.ExecContext(ctx, r.stmt, r.args...)
	if err != nil {
		return Pushed{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Pushed{}, err
	}
	affected, err := res.RowsAffected()
	if err != nil {
		return Pushed{}, err
	}
	return Pushed{ID: id, Existing: affected == 0}, nil
}

// prepare checks p against job j and returns its INSERT, or an *Error
// naming the field that is wrong.
func (o *Ops) prepare(j Job, p Push) (pushRow, error) {
	args, err := checkArgs(j, p.Args)
	if err != nil {
		return pushRow{}, err
	}
	var delay time.Duration
	switch {
	case p.Delay != "" && p.RunAt != nil:
		return pushRow{}, invalid("delay", "give delay or run_at, not both")
	case p.Delay != "":
		if delay, err = time.ParseDuration(p.Delay); err != nil || delay < 0 || delay > MaxDelay {
			return pushRow{}, invalid("delay", "delay must be a Go duration such as \"30s\" or \"2h45m\", from 0 to 10 years")
		}
	case p.RunAt != nil && p.RunAt.After(time.Now().Add(MaxDelay)):
		// A sanity bound on the input, like delay's: the run's due time
		// itself is the database clock's (a past run_at is due now).
		return pushRow{}, invalid("run_at", "run_at must be at most 10 years ahead")
	}
	priority, maxAttempts := j.Priority, j.MaxAttempts
	if p.Priority != nil {
		priority = *p.Priority
	}
	if priority < -jobs.MaxPriority || priority > jobs.MaxPriority {
		return pushRow{}, invalid("priority", "priority must be from -%d to %d", jobs.MaxPriority, jobs.MaxPriority)
	}
	if p.MaxAttempts != nil {
		maxAttempts = *p.MaxAttempts
	}
	if maxAttempts < 1 || maxAttempts > math.MaxInt32 {
		return pushRow{}, invalid("max_attempts", "max_attempts must be at least 1")
	}
	if p.UniqueKey != "" {
		switch {
		case len(p.UniqueKey) > jobs.MaxUniqueKey || !utf8.ValidString(p.UniqueKey):
			return pushRow{}, invalid("unique_key", "unique_key must be at most %d bytes of UTF-8", jobs.MaxUniqueKey)
		case strings.HasSuffix(p.UniqueKey, " "):
			return pushRow{}, invalid("unique_key", "unique_key must not end in a space (the table's collation ignores it)")
		}
	}
	var unique any
	if p.UniqueKey != "" {
		unique = p.UniqueKey
	}
	stmt, when := o.q.runPush, delay.Microseconds()
	if p.RunAt != nil {
		stmt, when = o.q.runPushAt, p.RunAt.UnixMicro()
	}
	if err := driver.CheckHeaders(p.Headers); err != nil {
		return pushRow{}, invalid("headers", "%s", strings.TrimPrefix(err.Error(), driver.ErrHeaders.Error()+": "))
	}
	return pushRow{stmt: stmt, args: []any{j.Name, j.Queue, priority, when, string(args), maxAttempts, j.Timeout.Microseconds(), unique, driver.Headers(p.Headers)}}, nil
}

// job returns the declared job, its defaults filled in.
func (o *Ops) job(name string) Job {
	i := slices.IndexFunc(o.cfg.Jobs, func(j Job) bool { return j.Name == name })
	j := o.cfg.Jobs[i]
	if j.Queue == "" {
		j.Queue = jobs.DefaultQueue
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = 25
	}
	if j.Timeout == 0 {
		j.Timeout = 10 * time.Minute
	}
	return j
}

// checkArgs checks raw against the job's declared arguments and returns
// the JSON to store: raw with each duration given as a string turned into
// Go's nanoseconds, which the Go handler decodes.
func checkArgs(j Job, raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return []byte("{}"), nil
	}
	if !utf8.Valid(raw) {
		return nil, invalid("args", "args are not valid UTF-8")
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, invalid("args", "args must be a JSON object of the job's arguments")
	}
	names := make([]string, len(j.Args))
	for i, a := range j.Args {
		names[i] = a.Name
	}
	out := map[string]json.RawMessage{}
	for name, v := range fields {
		i := slices.IndexFunc(j.Args, func(a Arg) bool { return a.Name == name })
		if i < 0 {
			list := "none"
			if len(names) > 0 {
				list = strings.Join(names, ", ")
			}
			return nil, invalid("args."+name, "job %s has no argument %q (its arguments: %s)", j.Name, name, list)
		}
		norm, err := checkArg(j.Args[i].Type, v)
		if err != nil {
			return nil, invalid("args."+name, "argument %s: %v", name, err)
		}
		out[name] = norm
	}
	return json.Marshal(out)
}

// checkArg checks one argument's JSON against its declared type.
func checkArg(typ string, v json.RawMessage) (json.RawMessage, error) {
	if bytes.Equal(v, []byte("null")) {
		return v, nil // the zero value, as encoding/json decodes it
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	switch typ {
	case "string":
		if _, ok := x.(string); !ok {
			return nil, fmt.Errorf("must be a string")
		}
	case "bool":
		if _, ok := x.(bool); !ok {
			return nil, fmt.Errorf("must be true or false")
		}
	case "int64", "int32":
		n, ok := x.(json.Number)
		if !ok {
			return nil, fmt.Errorf("must be a whole number")
		}
		i, err := n.Int64()
		if err != nil || (typ == "int32" && (i < math.MinInt32 || i > math.MaxInt32)) {
			return nil, fmt.Errorf("must be a whole number that fits in %s", typ)
		}
	case "float64":
		n, ok := x.(json.Number)
		if !ok {
			return nil, fmt.Errorf("must be a number")
		}
		if _, err := n.Float64(); err != nil {
			return nil, fmt.Errorf("must be a number that fits in float64")
		}
	case "time":
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("must be a time in RFC 3339, such as \"2026-11-27T10:00:00Z\"")
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return nil, fmt.Errorf("must be a time in RFC 3339, such as \"2026-11-27T10:00:00Z\"")
		}
	case "duration":
		switch d := x.(type) {
		case json.Number:
			if _, err := d.Int64(); err != nil {
				return nil, fmt.Errorf("must be a duration: whole nanoseconds, or a string such as \"1m30s\"")
			}
		case string:
			dur, err := time.ParseDuration(d)
			if err != nil {
				return nil, fmt.Errorf("must be a duration: whole nanoseconds, or a string such as \"1m30s\"")
			}
			return json.Marshal(int64(dur))
		default:
			return nil, fmt.Errorf("must be a duration: whole nanoseconds, or a string such as \"1m30s\"")
		}
	case "[]string":
		list, ok := x.([]any)
		if !ok {
			return nil, fmt.Errorf("must be an array of strings")
		}
		for _, e := range list {
			if _, ok := e.(string); !ok {
				return nil, fmt.Errorf("must be an array of strings")
			}
		}
	case "json":
		// Any JSON value: the application's own type decodes it.
	default:
		return nil, fmt.Errorf("has a type this server does not know (%s)", typ)
	}
	return v, nil
}
