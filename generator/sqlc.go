package generator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sqlc-dev/sqlc/pkg/cli"
)

// sqlcChildEnv is set to "1" in the environment of a process started to run
// sqlc's command line.
const sqlcChildEnv = "LOCKGEN_SQLC_CHILD"

// RunSQLCChildIfRequested runs sqlc's command line with os.Args[1:] and
// returns its exit code and true when this process was started as the sqlc
// child of lockgen (LOCKGEN_SQLC_CHILD=1). Otherwise it does nothing and
// returns false.
//
// sqlc calls os.Exit on SQL and configuration errors, so lockgen never runs
// it in its own process: it re-executes its own binary with the marker set.
// Every binary used as Options.SQLCExe (the lockgen command, and test
// binaries through TestMain) must call this first thing and exit with the
// code when ok is true.
func RunSQLCChildIfRequested() (exitCode int, ok bool) {
	if os.Getenv(sqlcChildEnv) != "1" {
		return 0, false
	}
	return cli.Run(os.Args[1:]), true
}

// SQLC runs sqlc's command line with args in a child process of exe (which
// must call RunSQLCChildIfRequested), connected to stdin, stdout and stderr,
// in the current directory. It returns sqlc's exit code; the error is
// non-nil only when the child could not be run.
func SQLC(ctx context.Context, exe string, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	exe, err := sqlcExecutable(exe)
	if err != nil {
		return 0, err
	}
	cmd, err := sqlcCommand(ctx, exe, args)
	if err != nil {
		return 0, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) && exitErr.Exited() {
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("run sqlc: %w", err)
	}
	return 0, nil
}

// sqlcCommand returns the command that runs sqlc with args in a child
// process of exe. It refuses to start one from a child: a binary that does
// not call RunSQLCChildIfRequested would otherwise start itself forever.
func sqlcCommand(ctx context.Context, exe string, args []string) (*exec.Cmd, error) {
	if os.Getenv(sqlcChildEnv) == "1" {
		return nil, fmt.Errorf("%s is set in this process: its binary must call generator.RunSQLCChildIfRequested first thing", sqlcChildEnv)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), sqlcChildEnv+"=1")
	return cmd, nil
}

// sqlcConfig is the sqlc.yaml that compiles schema.sql and queries.sql in
// its directory into the Go package %s in the directory "out".
const sqlcConfig = `version: "2"
sql:
  - engine: mysql
    schema: schema.sql
    queries: queries.sql
    gen:
      go:
        package: %s
        out: out
        omit_sqlc_version: true
        overrides:
          # A run's headers: NULL or a JSON object, read and written by
          # the runtime's type (a sql.Scanner and driver.Valuer).
          - column: "*.headers"
            go_type:
              import: "github.com/lockgen/lockgen/runtime/driver"
              type: "Headers"
`

// runSQLC compiles schema and queries with sqlc in a child process of exe
// and returns the Go files it wrote for package pkg, keyed by file name.
// Nothing is written outside a temporary directory. When sqlc fails, the
// error holds its output.
func runSQLC(ctx context.Context, exe string, schema, queries []byte, pkg string) (files map[string][]byte, err error) {
	tmp, err := os.MkdirTemp("", "lockgen-sqlc-")
	if err != nil {
		return nil, fmt.Errorf("sqlc: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	inputs := map[string][]byte{
		"schema.sql":  schema,
		"queries.sql": queries,
		"sqlc.yaml":   fmt.Appendf(nil, sqlcConfig, pkg),
	}
	for name, data := range inputs {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("sqlc: %w", err)
		}
	}
	cmd, err := sqlcCommand(ctx, exe, []string{"generate", "-f", filepath.Join(tmp, "sqlc.yaml")})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = tmp, &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("sqlc failed on the rendered queries (%w):\n%s", err, strings.TrimRight(out.String(), "\n"))
	}
	return readGoFiles(filepath.Join(tmp, "out"))
}

// readGoFiles returns the .go files of dir, keyed by name.
func readGoFiles(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read sqlc's output: %w", err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) != ".go" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read sqlc's output: %w", err)
		}
		files[e.Name()] = data
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("sqlc wrote no Go files")
	}
	return files, nil
}
