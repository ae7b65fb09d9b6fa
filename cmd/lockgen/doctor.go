package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/internal/doctor"
)

func doctorCommand() *command {
	return &command{
		name:    "doctor",
		args:    "[-dsn DSN] [-f lockgen.yaml] [-json]",
		summary: "check a database server against what lockgen needs",
		doc: `Doctor connects to the server named by the DSN (go-sql-driver/mysql form,
e.g. 'app:pw@tcp(db:3306)/app?parseTime=true'; default $LOCKGEN_DSN) and
prints, in plain words: the server, its version, flavour and cluster kind;
each lock and the jobs the spec declares, with works or refused and why;
wait_timeout and innodb_lock_wait_timeout against the spec's TTLs and waits;
read_only; the lockgen tables, every column and index of each against the
migration that creates it (naming that migration file when one lacks
any), and the user's grants on them (missing or more than lockgen needs);
the session time zone, the DSN's parseTime and loc; the auth plugin. These are the checks the runtime makes at first use.
Without a spec file (-f, default lockgen.yaml when it exists) it checks
every strategy and the jobs on the default table prefix.

The DSN's password is never printed. Exit status 0 when everything checked
can run, 1 otherwise (or when the server cannot be reached).`,
		setup: func(fs *flag.FlagSet) runFunc {
			dsn := fs.String("dsn", os.Getenv("LOCKGEN_DSN"), "the server to check, as a go-sql-driver/mysql `DSN`")
			file := fs.String("f", "", "the spec `file` (default lockgen.yaml when it exists)")
			asJSON := fs.Bool("json", false, "print the report as JSON")
			return func(ctx context.Context, out *streams, _ []string) int {
				return runDoctor(ctx, out, *dsn, *file, *asJSON)
			}
		},
	}
}

func runDoctor(ctx context.Context, out *streams, dsn, file string, asJSON bool) int {
	if dsn == "" {
		fmt.Fprintln(out.stderr, "lockgen doctor: no server: pass -dsn 'user:password@tcp(host:3306)/db?parseTime=true' or set LOCKGEN_DSN")
		return exitUsage
	}
	var s *spec.Spec
	if file == "" {
		if _, err := os.Stat(defaultSpec); err == nil {
			file = defaultSpec
		}
	}
	if file != "" {
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(out.stderr, "lockgen doctor: no spec file %s (name yours with -f)\n", file)
			return exitFail
		}
		var err error
		if s, err = spec.LoadFile(file); err != nil {
			printError(out.stderr, err)
			return exitFail
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := doctor.Run(ctx, doctor.Options{DSN: dsn, Spec: s})
	if err != nil {
		fmt.Fprintf(out.stderr, "lockgen doctor: %v\n", err)
		return exitFail
	}
	if asJSON {
		if err := res.WriteJSON(out.stdout); err != nil {
			fmt.Fprintf(out.stderr, "lockgen doctor: %v\n", err)
			return exitFail
		}
	} else {
		res.WriteText(out.stdout)
	}
	if !res.OK() {
		return exitFail
	}
	return exitOK
}
