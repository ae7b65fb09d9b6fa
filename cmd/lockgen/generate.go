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

	"github.com/lockgen/lockgen/generator"
)

func generateCommand() *command {
	return &command{
		name:    "generate",
		args:    "[-f lockgen.yaml] [-v]",
		summary: "write the generated Go code, sqlc queries and migrations",
		doc: `Generate reads the spec, renders every output file in memory, then writes
them all or none: the Go wrappers and the lockgendb package (schema, queries
and sqlc's code) in the spec's out directory, and the migrations in its
migrations directory. Paths in the spec are relative to the spec file.
Files already up to date are left untouched. It also removes the
migrations lockgen wrote in the other migrations.format (left over when the
format changed), naming each on stderr; otherwise it prints nothing on
success.`,
		setup: func(fs *flag.FlagSet) runFunc {
			file := specFlag(fs)
			verbose := fs.Bool("v", false, "list the generated files on stderr")
			return func(ctx context.Context, out *streams, _ []string) int {
				return generate(ctx, out, *file, *verbose)
			}
		},
	}
}

func checkCommand() *command {
	return &command{
		name:    "check",
		args:    "[-f lockgen.yaml]",
		summary: "fail if the generated files on disk are stale, missing or left over",
		doc: `Check generates into memory and compares with the files on disk, writing
nothing. It exits 0 when they are up to date, and 1 when any is stale or
missing, printing each such file with its first changed lines ("-" on disk,
"+" generated, with line numbers), or when a migration lockgen wrote in the
other migrations.format is left over. Run it in CI next to the tests.`,
		setup: func(fs *flag.FlagSet) runFunc {
			file := specFlag(fs)
			return func(ctx context.Context, out *streams, _ []string) int {
				return check(ctx, out, *file)
			}
		},
	}
}

// specFlag defines the -f flag.
func specFlag(fs *flag.FlagSet) *string {
	return fs.String("f", defaultSpec, "the spec `file`")
}

func generate(ctx context.Context, out *streams, file string, verbose bool) int {
	res, ok := load(ctx, out, file)
	if !ok {
		return exitFail
	}
	leftovers, err := res.Leftovers()
	if err == nil {
		err = res.Write()
	}
	if err != nil {
		printError(out.stderr, err)
		return exitFail
	}
	for _, l := range leftovers {
		fmt.Fprintf(out.stderr, "lockgen: removed %s (%s)\n", displayPath(file, l.Path), l.Why)
	}
	if verbose {
		for _, p := range res.Paths() {
			fmt.Fprintln(out.stderr, displayPath(file, p))
		}
	}
	return exitOK
}

func check(ctx context.Context, out *streams, file string) int {
	res, ok := load(ctx, out, file)
	if !ok {
		return exitFail
	}
	stale, err := res.Check()
	if err != nil {
		printError(out.stderr, err)
		return exitFail
	}
	if len(stale) == 0 {
		return exitOK
	}
	leftovers := 0
	for _, s := range stale {
		if s.Leftover != "" {
			leftovers++
		}
		s.Path = displayPath(file, s.Path)
		fmt.Fprintln(out.stdout, s.String())
	}
	regen := self + " generate"
	if file != defaultSpec {
		regen += " -f " + file
	}
	var problems []string
	if n := len(stale) - leftovers; n > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d generated files are stale or missing", n, len(res.Files)))
	}
	switch {
	case leftovers == 1:
		problems = append(problems, "1 file lockgen no longer generates is left over")
	case leftovers > 1:
		problems = append(problems, fmt.Sprintf("%d files lockgen no longer generates are left over", leftovers))
	}
	fmt.Fprintf(out.stderr, "lockgen: %s; run `%s`\n", strings.Join(problems, " and "), regen)
	return exitFail
}

// load generates the output of the spec file, reporting errors to stderr.
func load(ctx context.Context, out *streams, file string) (*generator.Result, bool) {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out.stderr, "lockgen: no spec file %s (create one with `%s init`, or name yours with -f)\n", file, self)
		return nil, false
	}
	res, err := generator.Generate(ctx, generator.Options{SpecPath: file})
	if err != nil {
		printError(out.stderr, err)
		return nil, false
	}
	return res, true
}

// displayPath returns the path of the generated file p (relative to the
// spec's directory) as the user names it: relative to the spec file's path.
func displayPath(specFile, p string) string {
	return filepath.Join(filepath.Dir(specFile), filepath.FromSlash(p))
}
