package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime"
)

// EnqueueOption changes one enqueued run (generated Enqueue<Job> methods
// take them).
type EnqueueOption func(*NewRun)

// Delay makes the run due d after the database clock's now.
func Delay(d time.Duration) EnqueueOption { return func(r *NewRun) { r.Delay = d } }

// RunAt makes the run due at t, read by the client's clock (a run at a
// past t is due at once).
func RunAt(t time.Time) EnqueueOption {
	return func(r *NewRun) { r.Delay = max(time.Until(t), 0) }
}

// WithPriority sets the run's priority (-100 to 100, higher runs first;
// while a backlog drains, a run of higher priority waits up to four of the
// worker's PollMin for a claim from the first due run, see
// WorkerConfig.PollMin).
func WithPriority(p int) EnqueueOption { return func(r *NewRun) { r.Priority = p } }

// WithUniqueKey makes the enqueue return the existing run while an
// unfinished run of the job has key.
func WithUniqueKey(key string) EnqueueOption { return func(r *NewRun) { r.UniqueKey = key } }

// WithMaxAttempts overrides the job's declared max attempts.
func WithMaxAttempts(n int) EnqueueOption { return func(r *NewRun) { r.MaxAttempts = n } }

// EnqueueArgs enqueues a run of base's job with args as its JSON arguments
// and opts applied (in tx when not nil); see Client.Enqueue. It fails with
// ErrInvalid when an option changes the run's job or queue: a job's queue
// is declared with it, and a run in another queue is never handled.
func EnqueueArgs[T any](ctx context.Context, j *Client, tx *sql.Tx, base NewRun, args T, opts ...EnqueueOption) (int64, error) {
	r, err := withArgs(base, args, opts)
	if err != nil {
		return 0, err
	}
	return j.Enqueue(ctx, tx, r)
}

// EnqueueArgsMany enqueues one run of base's job per element of args, with
// opts applied to each; see Client.EnqueueMany.
func EnqueueArgsMany[T any](ctx context.Context, j *Client, tx *sql.Tx, base NewRun, args []T, opts ...EnqueueOption) error {
	runs := make([]NewRun, len(args))
	for i, a := range args {
		var err error
		if runs[i], err = withArgs(base, a, opts); err != nil {
			return err
		}
	}
	return j.EnqueueMany(ctx, tx, runs)
}

func withArgs[T any](base NewRun, args T, opts []EnqueueOption) (NewRun, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return NewRun{}, fmt.Errorf("%w: job %q: encode args: %w", runtime.ErrInvalid, base.Job, err)
	}
	if err := checkEncodedArgs(b); err != nil {
		return NewRun{}, fmt.Errorf("%w: job %q: %w", runtime.ErrInvalid, base.Job, err)
	}
	job, queue := base.Job, base.Queue
	base.Args = b
	for _, o := range opts {
		if o != nil {
			o(&base)
		}
	}
	// A job's queue is declared with the job: a run put elsewhere would be
	// claimed by workers without its handler, or by none.
	if base.Job != job || base.Queue != queue {
		return NewRun{}, fmt.Errorf("%w: job %q is declared in queue %q; an enqueue option moved the run to job %q in queue %q, where no worker would handle it: change the job's queue in the spec instead",
			runtime.ErrInvalid, job, queue, base.Job, base.Queue)
	}
	return base, nil
}

// checkEncodedArgs refuses arguments that encoding/json did not encode as
// they are: a string that is not valid UTF-8 comes out with \ufffd in
// place of each bad byte (the handler would get other bytes than were
// enqueued), and raw JSON (json.RawMessage, a MarshalJSON method) is passed
// on as it is, bad bytes included, which a server in strict mode rejects
// and one without cuts short. The encoder writes a valid U+FFFD as itself,
// so an escaped one comes from a bad byte (or from raw JSON that spells
// it so, which is refused too).
func checkEncodedArgs(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("the arguments' JSON is not valid UTF-8")
	}
	// In JSON, a backslash only ever starts an escape inside a string.
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+6 <= len(b) && b[i+1] == 'u' && strings.EqualFold(string(b[i+2:i+6]), "fffd") {
			return errors.New("an argument holds a string that is not valid UTF-8 (JSON would carry U+FFFD in place of its bytes)")
		}
		i++ // the escaped character
	}
	return nil
}

// HandleArgs adapts a handler that takes typed arguments: it decodes the
// run's JSON arguments into T. Arguments that do not decode as T (written
// by another version of the application, or by hand) fail the run for
// good without running fn (a Permanent error naming the job and the run,
// kept with the discarded run): no attempt would decode them better, and
// an operator who fixed the cause retries it.
func HandleArgs[T any](fn func(ctx context.Context, run *Run, args T) error) JobFunc {
	return func(ctx context.Context, run *Run) error {
		var args T
		if len(run.Args) > 0 {
			if err := json.Unmarshal(run.Args, &args); err != nil {
				return Permanent(fmt.Errorf("decode args of job %q run %d: %w", run.Job, run.ID, err))
			}
		}
		return fn(ctx, run, args)
	}
}
