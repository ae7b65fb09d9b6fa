package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockgen/lockgen/generator/spec"
)

func initCommand() *command {
	return &command{
		name:    "init",
		args:    "[-f lockgen.yaml] [-package locks]",
		summary: "write a commented starter lockgen.yaml",
		doc: `Init writes a starter spec with one plain lock (also a leader), one keyed
lock, and, commented out, queues, a scheduled job and a job with arguments,
every option explained in comments. It never overwrites an existing file.
Edit it, then run go tool lockgen generate; the spec's out directory must be
inside a Go module. For go generate, put //go:generate go tool lockgen
generate in a .go file next to the spec: go generate reads only .go files,
so create one with just a package clause and that line if there is none.`,
		setup: func(fs *flag.FlagSet) runFunc {
			file := specFlag(fs)
			pkg := fs.String("package", "locks", "the Go `name` of the generated package")
			return func(_ context.Context, out *streams, _ []string) int {
				return initSpec(out, *file, *pkg)
			}
		},
	}
}

func initSpec(out *streams, file, pkg string) int {
	data := starterSpec(pkg)
	if _, err := spec.Load(file, data); err != nil {
		// The starter is valid for any valid package name; report the
		// flag, not a line of a file the user has not seen.
		msg := err.Error()
		if list, ok := errors.AsType[spec.ErrorList](err); ok && len(list) > 0 {
			msg = list[0].Msg
			if list[0].Hint != "" {
				msg += " (" + list[0].Hint + ")"
			}
		}
		fmt.Fprintf(out.stderr, "lockgen init: -package: %s\n", msg)
		return exitUsage
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(out.stderr, "lockgen: %s already exists; init never overwrites a file (use -f to write elsewhere)\n", file)
		return exitFail
	}
	if err != nil {
		printError(out.stderr, err)
		return exitFail
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Close()); err != nil {
		printError(out.stderr, errors.Join(err, os.Remove(file)))
		return exitFail
	}
	regen := self + " generate"
	if file != defaultSpec {
		regen += " -f " + file
	}
	fmt.Fprintf(out.stdout, "wrote %s; edit it, then run `%s`\n", file, regen)
	directive := "//go:generate " + self + " generate"
	if base := filepath.Base(file); base != defaultSpec {
		directive += " -f " + base
	}
	dir := filepath.Dir(file)
	fmt.Fprintf(out.stdout, "To run it with `go generate ./...`, put the line\n\t%s\n", directive)
	if goFiles, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(goFiles) > 0 {
		fmt.Fprintf(out.stdout, "in a .go file next to it, such as %s.\n", goFiles[0])
	} else {
		where := "in " + dir
		if dir == "." {
			where = "in this directory"
		}
		fmt.Fprintf(out.stdout, "in a .go file next to it. There is none yet %s, and go generate reads only .go files:\n"+
			"create one, such as %s, holding a package clause (e.g. `package app`) and that line.\n",
			where, filepath.Join(dir, "generate.go"))
	}
	return exitOK
}

// starterSpec returns the starter lockgen.yaml for the Go package pkg.
func starterSpec(pkg string) []byte {
	return []byte(strings.Replace(starter, "package: locks\n", "package: "+pkg+"\n", 1))
}

// starter is the spec init writes. It must load, generate and build as is,
// and with its commented queues and jobs uncommented (the tests check both).
const starter = `# lockgen.yaml declares the distributed locks and jobs of this module.
#
# "go tool lockgen generate" writes typed Go wrappers, sqlc queries and SQL
# migrations from it; commit them, and run "go tool lockgen check" in CI to
# catch stale output. To run it with "go generate ./...", put the line
#   //go:generate go tool lockgen generate
# in a .go file of this directory (go generate reads only .go files, and a
# .go file starts with its package clause, e.g. "package app").

# version is the format of this file; only 1 exists.
version: 1

# package is the Go package name of the generated code.
package: locks

# out is the directory of the generated Go code, relative to this file:
# lockgen.go, lockgen_store.go and the lockgendb subpackage (the SQL and
# sqlc's code for it); lockgen_jobs.go too with jobs. It must be inside a Go
# module (a go.mod at or above it).
out: internal/locks

# migrations says where the SQL that creates lockgen's tables goes, and for
# which migration tool: golang-migrate (0001_<table>.up.sql and .down.sql)
# or goose (00001_<table>.sql). dir is relative to this file.
migrations:
  dir: migrations
  format: golang-migrate

# table_prefix starts the name of every table lockgen creates (here the lock
# table lockgen_locks, and lockgen_runs with jobs): lower-case letters,
# digits and underscores.
table_prefix: lockgen_

# locks: each lock gets With<Name>Lock, Try<Name>Lock, Acquire<Name>Lock and
# <Name>LockHolder methods on the generated Locks type, and a fencing token
# per holding (lease.Token()).
locks:
  # A plain lock: one lease for the whole application, e.g. for work only
  # one instance may do at a time: WithMasterLock(ctx, fn).
  - name: master      # snake_case; becomes Master in Go
    strategy: lease   # a row that expires by the database clock (the default)
    ttl: 3s           # how long the lease lasts without renewal (at least 100ms)
    renew_every: 1s   # renewal period while held; default ttl/3, must be below ttl - ttl/10
    wait: 0s          # how long With/Acquire wait for a busy lock; 0 = one attempt
    leader: true      # also RunAsMaster(ctx, fn): leader election, fn runs on one instance
                      # at a time; IsMasterLeader() and MasterLeader(ctx) tell who leads

  # A keyed lock: one lease per key value, e.g. per order:
  # WithOrderLock(ctx, orderID, fn).
  - name: order
    key: { name: order_id, type: int64 }   # the key's Go parameter: int64, string or uuid
    strategy: lease
    # strategy: session  # or GET_LOCK on a pinned connection: waits on the server and frees
    #                    # at once when the holder dies, but the holder learns of a loss only
    #                    # after others may have the lock (fence writes with lease.Guard);
    #                    # not for leaders; refused on Galera. See docs/strategies.md.
    # strategy: row      # or SELECT ... FOR UPDATE in a transaction held while fn runs:
    #                    # WithOrderLockTx(ctx, orderID, fn) hands fn the *sql.Tx, whose
    #                    # writes commit with the release; no ttl or renew_every then.
    ttl: 30s
    wait: 5s

# Jobs: reliable scheduled and enqueued jobs on a runs table (a second
# migration). Remove the "# " before the lines below to declare two. The
# generated JobHandlers interface then has a method per job, Locks.RunJobs(ctx,
# handlers) works them on every node until ctx ends, and each job that takes
# args gets Enqueue<Job>, Enqueue<Job>Tx and Enqueue<Job>Many.
#
# queues: how many handlers of each queue one node runs at once. Without
# this key every job is in the queue default, 100 at once.
# queues:
#   - { name: default, concurrency: 100 }
#   - { name: mail, concurrency: 10 }
#
# jobs:
#   # A scheduled job: one run per tick across all nodes, handled by
#   # NightlyReport(ctx, run).
#   - name: nightly_report
#     schedule: "0 3 * * *"   # cron (5 fields, or 6 with seconds), @daily, or @every 30s
#     timezone: UTC           # IANA zone of the schedule
#     catch_up: one           # ticks missed while no node ran: none, one (the latest) or all
#     timeout: 10m            # each attempt's context is cancelled after it
#   # An enqueued job with typed arguments:
#   # EnqueueSendReceipt(ctx, SendReceiptArgs{OrderID: 42, Email: "a@example.com"}),
#   # handled by SendReceipt(ctx, run, args).
#   - name: send_receipt
#     args: { order_id: int64, email: string }   # int64, int32, string, bool, float64, time, duration, []string, json(...)
#     queue: mail
#     max_attempts: 5                     # a failing run is retried with backoff, then discarded
#     backoff: { initial: 1s, max: 10m }
`
