// Package generator turns a lockgen.yaml into the files lockgen writes: SQL
// migrations, the schema and queries of the lockgendb package with sqlc's Go
// code for them, and the typed Go wrappers over the runtime.
//
// Generation happens in two steps that never mix: Generate resolves a model
// from the validated spec (Go names, key types, import paths, file paths)
// and renders every file into memory; Result.Write then writes all of them
// or none. Nothing in this package exits the process or panics on user
// input: sqlc, which calls os.Exit on errors, runs in a child process (see
// RunSQLCChildIfRequested).
package generator

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/templates"
)

// Options configures Generate.
type Options struct {
	// SpecPath is the path of the spec file (lockgen.yaml). Output paths in
	// the spec are relative to its directory. Required.
	SpecPath string
	// SQLCExe is the executable re-run as the sqlc child process; it must
	// call RunSQLCChildIfRequested first thing in main (or TestMain).
	// Default: os.Executable(), the running lockgen binary.
	SQLCExe string

	// render renders an SQL template; nil means templates.Render. Tests
	// replace it to feed sqlc broken SQL.
	render func(name string, data templates.Data) ([]byte, error)
}

// Result is the complete output of one generation, held in memory.
type Result struct {
	// Dir is the absolute directory of the spec file; the paths in Files
	// are relative to it.
	Dir string
	// Files maps slash-separated paths relative to Dir to their contents.
	Files map[string][]byte

	// leftovers are the files lockgen may have written for an earlier
	// version of the spec (see Leftovers).
	leftovers []Leftover
}

// Paths returns the paths of r.Files, sorted.
func (r *Result) Paths() []string {
	return slices.Sorted(maps.Keys(r.Files))
}

// Generate loads and validates the spec at opts.SpecPath and renders every
// file lockgen writes for it. It writes nothing: call Result.Write or
// Result.Check. Spec problems come back unchanged from spec.LoadFile (a
// spec.ErrorList), so callers can print them one per line. The output is
// deterministic: the same spec and go.mod give the same bytes.
func Generate(ctx context.Context, opts Options) (*Result, error) {
	if opts.SpecPath == "" {
		return nil, fmt.Errorf("no spec file given")
	}
	s, err := spec.LoadFile(opts.SpecPath)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(opts.SpecPath))
	if err != nil {
		return nil, fmt.Errorf("locate %s: %w", opts.SpecPath, err)
	}
	m, err := resolve(s, dir)
	if err != nil {
		return nil, err
	}
	exe, err := sqlcExecutable(opts.SQLCExe)
	if err != nil {
		return nil, err
	}
	render := opts.render
	if render == nil {
		render = templates.Render
	}
	files, err := renderAll(ctx, m, render, exe)
	if err != nil {
		return nil, err
	}
	name, api, err := openAPI(m.Ops, m.OutDir)
	if err != nil {
		return nil, err
	}
	files[name] = api
	return &Result{Dir: dir, Files: files, leftovers: leftoverFiles(s)}, nil
}

// sqlcExecutable returns exe, or the running executable when exe is empty.
func sqlcExecutable(exe string) (string, error) {
	if exe != "" {
		return exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the lockgen executable to run sqlc: %w", err)
	}
	return exe, nil
}

// renderAll renders every output file of m.
func renderAll(ctx context.Context, m *model, render func(string, templates.Data) ([]byte, error), exe string) (map[string][]byte, error) {
	files := map[string][]byte{}
	sqlFiles, err := renderSQL(m, render)
	if err != nil {
		return nil, err
	}
	maps.Copy(files, sqlFiles)
	sqlcFiles, err := runSQLC(ctx, exe, sqlFiles[m.SchemaPath], sqlFiles[m.QueriesPath], m.DBPackage)
	if err != nil {
		return nil, err
	}
	for name, src := range sqlcFiles {
		files[m.DBDir+"/"+name] = src
	}
	goFiles, err := renderGo(m)
	if err != nil {
		return nil, err
	}
	maps.Copy(files, goFiles)
	return files, nil
}
