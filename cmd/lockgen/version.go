package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"

	"github.com/lockgen/lockgen/generator"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the versions of lockgen, sqlc and Go it was built with",
		doc:     "Version prints the version of lockgen, of the sqlc it runs, and of Go.",
		setup: func(*flag.FlagSet) runFunc {
			return func(_ context.Context, out *streams, _ []string) int {
				fmt.Fprintln(out.stdout, versionLine())
				return exitOK
			}
		},
	}
}

// versionLine is "lockgen <version> (sqlc <version>, <go version>)", with
// versions from the build information ("(devel)" for a local build).
func versionLine() string {
	lockgen, sqlc := "(devel)", "(unknown)"
	if info, ok := debug.ReadBuildInfo(); ok {
		if v := info.Main.Version; v != "" {
			lockgen = v
		}
		for _, dep := range info.Deps {
			if dep.Path == "github.com/sqlc-dev/sqlc" {
				sqlc = dep.Version
			}
		}
	}
	return fmt.Sprintf("lockgen %s (sqlc %s, %s)", lockgen, sqlc, goruntime.Version())
}

func sqlcCommand() *command {
	return &command{
		name:    "sqlc",
		args:    "[sqlc arguments]",
		summary: "run the sqlc built into lockgen",
		hidden:  true,
		doc: `Sqlc runs the sqlc command line built into lockgen with the given arguments,
in the current directory, so no separate sqlc install is needed: for example
"lockgen sqlc generate" compiles ./sqlc.yaml (lockgen's own Makefile uses it).
All arguments, -h included, go to sqlc; its exit status is lockgen's.`,
		raw: func(ctx context.Context, out *streams, args []string) int {
			code, err := generator.SQLC(ctx, "", args, os.Stdin, out.stdout, out.stderr)
			if err != nil {
				printError(out.stderr, err)
				return exitFail
			}
			return code
		},
	}
}
