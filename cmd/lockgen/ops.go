package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/generator"
	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/runtime/ops"
)

// opsCommands are the operator's commands: each runs one operation of
// package ops (the layer the HTTP API serves too) against the deployment
// that lockgen.yaml (-f) and the DSN (-dsn) name.
func opsCommands() []*command {
	return []*command{
		opsCommand("status", "", "print the leaders, held locks, queues and schedules",
			`Status prints the overview of the deployment: the leaders (owner, fencing
token and time left by the database clock), each declared lock's held count,
each queue's runs by state (due, scheduled, retrying, running, orphaned,
discarded) and whether it is paused, and each schedule's next and newest
tick. Counts stop at 10,000 (shown as "10000+"). With -json it prints the
document of GET /api/v1/status.`,
			nil, func(ctx context.Context, o *ops.Ops, out *streams, _ []string, asJSON bool) int {
				st, err := o.Status(ctx)
				if err != nil {
					return opsError(out, "status", err)
				}
				return printDoc(out, st, asJSON, func(w io.Writer) { writeStatus(w, st) })
			}),
		runsCommand(),
		enqueueCommand(),
		opsCommand("run", "ID", "print one run with its arguments and history",
			"Run prints one run: its state, attempts, worker, times, last error,\narguments and history (every state change, oldest first). With -json it prints the document of GET /api/v1/runs/{id}.",
			[]string{"ID"}, func(ctx context.Context, o *ops.Ops, out *streams, args []string, asJSON bool) int {
				id, ok := runID(out, "run", args[0])
				if !ok {
					return exitUsage
				}
				r, err := o.Run(ctx, id)
				if err != nil {
					return opsError(out, "run", err)
				}
				return printDoc(out, r, asJSON, func(w io.Writer) { writeRun(w, r) })
			}),
		opsCommand("pause", "QUEUE", "pause a queue on every node",
			`Pause stores a pause of the queue in the database: no worker of any node
claims its runs once its node has read the pause, within the workers' idle
poll; running runs finish. Pausing a paused queue changes nothing.`,
			[]string{"QUEUE"}, queueChange("pause", (*ops.Ops).PauseQueue)),
		opsCommand("resume", "QUEUE", "resume a paused queue",
			"Resume lifts a queue's pause; the workers claim its runs again within their\nidle poll.",
			[]string{"QUEUE"}, queueChange("resume", (*ops.Ops).ResumeQueue)),
		opsCommand("cancel", "ID", "cancel a due or running run",
			"Cancel cancels a run that is due, scheduled or running. A running run's\nhandler has its context cancelled at its worker's next heartbeat, and the\nrun stays cancelled. A finished run is left as it is (exit status 1).",
			[]string{"ID"}, runChange("cancel", (*ops.Ops).CancelRun)),
		retryCommand(),
		serveCommand(),
	}
}

// opsFunc runs an operator command against o.
type opsFunc func(ctx context.Context, o *ops.Ops, out *streams, args []string, asJSON bool) int

const opsFlagsDoc = `

It reads the deployment from lockgen.yaml (-f; default: the lockgen.yaml of
the current directory or the nearest directory above it) and connects with
the DSN (-dsn, default $LOCKGEN_DSN). Exit status 0 on success, 1 when the
operation failed or was refused by the state of what it names, 2 on bad
input.`

// opsCommand is a command with the operator's common flags.
func opsCommand(name, args, summary, doc string, positional []string, fn opsFunc) *command {
	return opsCommandFlags(name, args, summary, doc, positional, func(*flag.FlagSet) opsFunc { return fn })
}

// opsCommandFlags is opsCommand for a command with flags of its own, which
// flags defines before returning the command's function.
func opsCommandFlags(name, args, summary, doc string, positional []string, flags func(fs *flag.FlagSet) opsFunc) *command {
	return &command{
		name: name, args: strings.TrimSpace("[-dsn DSN] [-f lockgen.yaml] [-json] " + args), summary: summary,
		doc: doc + opsFlagsDoc, positional: positional,
		setup: func(fs *flag.FlagSet) runFunc {
			target := opsFlags(fs)
			asJSON := fs.Bool("json", false, "print the JSON document the HTTP API answers")
			fn := flags(fs)
			return func(ctx context.Context, out *streams, args []string) int {
				o, closeDB, code := target.open(out, name)
				if o == nil {
					return code
				}
				defer closeDB()
				return fn(ctx, o, out, args, *asJSON)
			}
		},
	}
}

// target is what the -dsn and -f flags name.
type target struct{ dsn, file *string }

func opsFlags(fs *flag.FlagSet) target {
	return target{
		dsn:  fs.String("dsn", os.Getenv("LOCKGEN_DSN"), "the server, as a go-sql-driver/mysql `DSN` (default $LOCKGEN_DSN)"),
		file: fs.String("f", "", "the spec `file` (default: lockgen.yaml here or in the nearest directory above)"),
	}
}

// open loads the spec and opens the database; on failure it reports and
// returns a nil *ops.Ops and the exit code.
func (t target) open(out *streams, name string) (*ops.Ops, func(), int) {
	file := *t.file
	if file == "" {
		var ok bool
		if file, ok = findSpec(); !ok {
			fmt.Fprintf(out.stderr, "lockgen %s: no lockgen.yaml here or in any directory above (name yours with -f)\n", name)
			return nil, nil, exitUsage
		}
	}
	s, err := spec.LoadFile(file)
	if err != nil {
		printError(out.stderr, err)
		return nil, nil, exitUsage
	}
	if *t.dsn == "" {
		fmt.Fprintf(out.stderr, "lockgen %s: no server: pass -dsn 'user:password@tcp(host:3306)/db' or set LOCKGEN_DSN\n", name)
		return nil, nil, exitUsage
	}
	cfg, err := mysql.ParseDSN(*t.dsn)
	if err != nil {
		// The parser's message can quote the password: never show it.
		fmt.Fprintf(out.stderr, "lockgen %s: bad DSN: expected go-sql-driver/mysql's form user:password@tcp(host:port)/dbname\n", name)
		return nil, nil, exitUsage
	}
	// The tables hold UTC times; one round trip per statement (arguments
	// are interpolated by the driver, safe with the utf8mb4 lockgen needs).
	cfg.ParseTime, cfg.Loc, cfg.InterpolateParams = true, time.UTC, true
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		fmt.Fprintf(out.stderr, "lockgen %s: bad DSN: the driver refused its settings\n", name)
		return nil, nil, exitUsage
	}
	opsCfg := generator.OpsConfig(s)
	// The pool runs the store lockgen generates for the default prefix on
	// the spec's tables: what consumers over HTTP claim and record with.
	renamed, err := ops.Connector(c, opsCfg.TablePrefix)
	if err != nil {
		fmt.Fprintf(out.stderr, "lockgen %s: %s: %v\n", name, file, err)
		return nil, nil, exitUsage
	}
	db := sql.OpenDB(renamed)
	db.SetMaxOpenConns(32) // long polls of `serve` hold none while they wait
	db.SetMaxIdleConns(32) // `serve`'s clients reuse them instead of reconnecting
	o, err := ops.New(db, opsCfg)
	if err != nil {
		_ = db.Close()
		fmt.Fprintf(out.stderr, "lockgen %s: %s: %v\n", name, file, err)
		return nil, nil, exitUsage
	}
	return o, func() { _ = db.Close() }, exitOK
}

// findSpec looks for lockgen.yaml in the current directory and above.
func findSpec() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(dir, defaultSpec)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// opsError reports an operation's error: exit 2 for bad input, 1 otherwise.
func opsError(out *streams, name string, err error) int {
	fmt.Fprintf(out.stderr, "lockgen %s: %v\n", name, err)
	if errors.Is(err, ops.ErrInvalid) {
		return exitUsage
	}
	return exitFail
}

func runID(out *streams, name, arg string) (int64, bool) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id < 1 {
		fmt.Fprintf(out.stderr, "lockgen %s: a run ID is a positive whole number, not %q\n", name, arg)
		return 0, false
	}
	return id, true
}

// printDoc prints v as indented JSON, or as text.
func printDoc(out *streams, v any, asJSON bool, text func(io.Writer)) int {
	if asJSON {
		enc := json.NewEncoder(out.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(out.stderr, "lockgen: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	text(out.stdout)
	return exitOK
}

func queueChange(name string, op func(*ops.Ops, context.Context, string) (ops.Queue, error)) opsFunc {
	return func(ctx context.Context, o *ops.Ops, out *streams, args []string, asJSON bool) int {
		q, err := op(o, ctx, args[0])
		if err != nil {
			return opsError(out, name, err)
		}
		return printDoc(out, q, asJSON, func(w io.Writer) {
			if q.Paused {
				fmt.Fprintf(w, "queue %s is paused (since %s)\n", q.Name, stamp(q.PausedAt))
			} else {
				fmt.Fprintf(w, "queue %s is not paused\n", q.Name)
			}
		})
	}
}

func runChange(name string, op func(*ops.Ops, context.Context, int64) (*ops.Run, error)) opsFunc {
	return func(ctx context.Context, o *ops.Ops, out *streams, args []string, asJSON bool) int {
		id, ok := runID(out, name, args[0])
		if !ok {
			return exitUsage
		}
		r, err := op(o, ctx, id)
		if err != nil {
			return opsError(out, name, err)
		}
		return printDoc(out, r, asJSON, func(w io.Writer) {
			fmt.Fprintf(w, "run %d (%s) is %s\n", r.ID, r.Job, r.State)
		})
	}
}

// runsCommand is `lockgen runs`, with its filters.
func runsCommand() *command {
	return opsCommandFlags("runs", "[-job JOB] [-queue QUEUE] [-state STATE] [-after ID] [-limit N]", "list runs, newest first",
		`Runs lists runs, newest first, filtered by job, queue and state (`+strings.Join(ops.States, ", ")+`).
A page ends with the command that prints the next one. With -json it prints
the document of GET /api/v1/runs.`, nil, func(fs *flag.FlagSet) opsFunc {
			var f ops.RunsFilter
			fs.StringVar(&f.Job, "job", "", "only runs of this `job`")
			fs.StringVar(&f.Queue, "queue", "", "only runs of this `queue`")
			fs.StringVar(&f.State, "state", "", "only runs in this `state`")
			fs.StringVar(&f.After, "after", "", "only runs with an ID below this `ID` (the next page)")
			fs.IntVar(&f.Limit, "limit", ops.DefaultLimit, "at most `N` runs")
			return func(ctx context.Context, o *ops.Ops, out *streams, _ []string, asJSON bool) int {
				page, err := o.Runs(ctx, f)
				if err != nil {
					return opsError(out, "runs", err)
				}
				return printDoc(out, page, asJSON, func(w io.Writer) { writeRuns(w, page, f) })
			}
		})
}

// enqueueCommand is `lockgen enqueue JOB ARGS`.
func enqueueCommand() *command {
	return opsCommandFlags("enqueue", "[-delay D] [-unique-key K] [-priority N] [-max-attempts N] JOB ARGS", "enqueue a run of a job",
		`Enqueue enqueues a run of a declared job with ARGS, a JSON object of its
declared arguments (each checked against its type; '{}' for none), in the
job's queue with its max attempts, timeout and priority unless the flags say
otherwise. It prints the run's ID; with -unique-key, an unfinished run of the
job with the same key is answered instead of a new one. With -json it prints
the document of POST /api/v1/jobs/{job}/runs.`, []string{"JOB", "ARGS"}, func(fs *flag.FlagSet) opsFunc {
			var p ops.Push
			fs.StringVar(&p.Delay, "delay", "", "make the run due after this `duration` (\"30s\", \"2h\")")
			fs.StringVar(&p.UniqueKey, "unique-key", "", "answer the unfinished run of the job with this `key` instead of enqueuing another")
			priority := fs.Int("priority", 0, "the run's `priority` (-100 to 100; default the job's)")
			attempts := fs.Int("max-attempts", 0, "the run's max attempts (`N`; default the job's)")
			return func(ctx context.Context, o *ops.Ops, out *streams, args []string, asJSON bool) int {
				p.Args = json.RawMessage(args[1])
				fs.Visit(func(f *flag.Flag) {
					switch f.Name {
					case "priority":
						p.Priority = priority
					case "max-attempts":
						p.MaxAttempts = attempts
					}
				})
				pushed, err := o.Push(ctx, args[0], p)
				if err != nil {
					return opsError(out, "enqueue", err)
				}
				return printDoc(out, pushed, asJSON, func(w io.Writer) {
					if pushed.Existing {
						fmt.Fprintf(w, "run %d (existing: an unfinished run of %s has unique key %q)\n", pushed.ID, args[0], p.UniqueKey)
					} else {
						fmt.Fprintf(w, "run %d enqueued\n", pushed.ID)
					}
				})
			}
		})
}

// retryCommand is `lockgen retry ID` and `lockgen retry -state S [-job J]
// [-queue Q] [-finished-after T] [-finished-before T]`.
func retryCommand() *command {
	c := opsCommandFlags("retry", "ID | [-state STATE] [-job JOB] [-queue QUEUE] [-finished-after T] [-finished-before T]",
		"run a discarded, orphaned or cancelled run again",
		`Retry ID makes a discarded, orphaned or cancelled run due now, its attempts
counted from zero. A run in another state is left as it is (exit status 1).

Without an ID it retries every run in the -state given (discarded, orphaned
or cancelled) of the job and queue given, finished in the RFC 3339 times
given, at most 10,000 per call (it says when more are left), and prints how
many; a run whose unique key an unfinished run of its job holds is left and
counted.`, []string{"ID"}, func(fs *flag.FlagSet) opsFunc {
			var f ops.RetryFilter
			var after, before string
			fs.StringVar(&f.State, "state", "", "retry every run in this `state` (discarded, orphaned, cancelled)")
			fs.StringVar(&f.Job, "job", "", "only runs of this `job`")
			fs.StringVar(&f.Queue, "queue", "", "only runs of this `queue`")
			fs.StringVar(&after, "finished-after", "", "only runs finished at or after this `time` (RFC 3339)")
			fs.StringVar(&before, "finished-before", "", "only runs finished before this `time` (RFC 3339)")
			single := runChange("retry", (*ops.Ops).RetryRun)
			return func(ctx context.Context, o *ops.Ops, out *streams, args []string, asJSON bool) int {
				bulk := f.State != "" || f.Job != "" || f.Queue != "" || after != "" || before != ""
				switch {
				case len(args) > 0 && bulk:
					fmt.Fprintln(out.stderr, "lockgen retry: give a run ID or a filter (-state …), not both")
					return exitUsage
				case len(args) > 0:
					return single(ctx, o, out, args, asJSON)
				}
				for _, t := range []struct {
					flag, val string
					dst       **time.Time
				}{{"finished-after", after, &f.FinishedAfter}, {"finished-before", before, &f.FinishedBefore}} {
					if t.val == "" {
						continue
					}
					at, err := time.Parse(time.RFC3339Nano, t.val)
					if err != nil {
						fmt.Fprintf(out.stderr, "lockgen retry: -%s must be a time in RFC 3339, such as 2026-11-27T10:00:00Z\n", t.flag)
						return exitUsage
					}
					*t.dst = &at
				}
				if f.State == "" {
					fmt.Fprintln(out.stderr, "lockgen retry: give a run ID, or -state discarded|orphaned|cancelled to retry many")
					return exitUsage
				}
				n, err := o.RetryRuns(ctx, f)
				if err != nil {
					return opsError(out, "retry", err)
				}
				return printDoc(out, n, asJSON, func(w io.Writer) {
					fmt.Fprintf(w, "%d runs retried", n.Retried)
					if n.Skipped > 0 {
						fmt.Fprintf(w, ", %d left (an unfinished run of their job has their unique key)", n.Skipped)
					}
					fmt.Fprintln(w)
					if n.More {
						fmt.Fprintln(w, "more runs match: run the same command again")
					}
				})
			}
		})
	c.optional = true
	return c
}
