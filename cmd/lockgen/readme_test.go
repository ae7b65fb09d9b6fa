package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestREADMEAdoption follows the README's "Using it in your module" in a new
// module, as a user would, with this repository as the checkout: it runs the
// section's shell blocks as written (only the LOCKGEN= line points at this
// repository), writes its YAML block as lockgen.yaml and its go:generate
// file, and puts every complete Go program of the README (package main) in
// the module; the generated code and those programs must then build and vet,
// and lockgen check must pass. Before the spec is replaced, the starter
// lockgen init wrote is generated and built too.
//
// The new module starts at go 1.24.0, as one made by Go 1.24 would: the
// section puts the tool in a module file of its own (lockgen.tool.mod), so
// the module's go.mod must end with its go line unchanged, no toolchain or
// tool line, and no requirement but the runtime and the runtime's own
// requirements (no sqlc, no lockgen tool module); lockgen.tool.mod must hold
// the tool.
//
// The go commands run without a workspace, with the caller's GOCACHE,
// GOMODCACHE and GOPROXY, and GOSUMDB=off: the checksum database would need
// the network for every module the new go.sum lists, while the module cache
// holds them already. A module missing from the cache is downloaded through
// GOPROXY. go mod tidy loads the packages of the tool's dependencies for
// every platform and their tests, so it needs 19 modules (12 MB, such as
// gonum and the otel packages grpc's tests use) that the repository's own
// build never loads (go list -deps -test over its four modules): a first run
// on a machine whose module cache holds only those fetches them once; with
// them cached it passes with GOPROXY=off. It links the lockgen tool once per
// change of its sources (go tool caches the binary): with the build cache
// of the repository's own tests about 2.5 s, 6.5 s for the whole test; a
// cold build cache (compiling sqlc) takes minutes.
func TestREADMEAdoption(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	require.NoError(t, err)
	using := readmeSection(t, string(readme), "Using it in your module")
	jobs := readmeSection(t, string(readme), "Jobs")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOSUMDB=off")
	run := func(name string, args ...string) string {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
		t.Logf("%.1fs  %s %s", time.Since(start).Seconds(), name, strings.Join(args, " "))
		return string(out)
	}
	write := func(name, data string) {
		t.Helper()
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	}

	run("go", "mod", "init", "example.com/app")
	run("go", "mod", "edit", "-go="+appGo)
	require.Contains(t, using, strings.Join(append([]string{"go"}, goTool...), " "),
		"the section runs the tool as the test does")
	var shells, specs, generateFiles, programs int
	for _, b := range fencedBlocks(using) {
		switch {
		case b.lang == "sh":
			shells++
			script := b.text
			if checkout.MatchString(script) {
				script = checkout.ReplaceAllLiteralString(script, "LOCKGEN='"+repo+"'")
			}
			run("sh", "-ec", script)
			if strings.Contains(script, "lockgen init") {
				// The starter generates and builds as init wrote it
				// (with step 3's go mod tidy: the go.mod of step 1 requires
				// the runtime, whose checksums go.sum gets then).
				run("go", append(goTool, "generate")...)
				run("go", "mod", "tidy")
				run("go", "build", "./...")
			}
		case b.lang == "yaml":
			specs++
			write("lockgen.yaml", b.text)
		case b.lang == "go" && strings.Contains(b.text, "//go:generate "):
			generateFiles++
			name, ok := strings.CutPrefix(strings.SplitN(b.text, "\n", 2)[0], "// ")
			require.True(t, ok, "the go:generate block starts with a comment naming its file:\n%s", b.text)
			write(strings.TrimRight(strings.Fields(name)[0], ",:"), b.text)
		case b.lang == "go" && strings.HasPrefix(b.text, "package main\n"):
			programs++
			write(fmt.Sprintf("cmd/readme%d/main.go", programs), b.text)
		}
	}
	require.Equal(t, []int{3, 1, 1, 1}, []int{shells, specs, generateFiles, programs},
		"the section's shell blocks (add the tool, init, generate), spec, go:generate file and program")
	jobPrograms := 0
	for _, b := range fencedBlocks(jobs) {
		if b.lang == "go" && strings.HasPrefix(b.text, "package main\n") {
			jobPrograms++
			write(fmt.Sprintf("cmd/readmejobs%d/main.go", jobPrograms), b.text)
		}
	}
	require.Equal(t, 1, jobPrograms, "the Jobs section has one complete program")

	run("go", "mod", "tidy") // step 4: tidy adds the MySQL driver
	run("go", "build", "./...")
	run("go", "vet", "./...")
	run("go", append(goTool, "check")...)

	// The tool and sqlc stay out of the module's go.mod.
	var app, runtimeMod, tool goMod
	require.NoError(t, json.Unmarshal([]byte(run("go", "mod", "edit", "-json")), &app))
	require.NoError(t, json.Unmarshal([]byte(run("go", "mod", "edit", "-json", filepath.Join(repo, "runtime", "go.mod"))), &runtimeMod))
	require.NoError(t, json.Unmarshal([]byte(run("go", "mod", "edit", "-json", "lockgen.tool.mod")), &tool))
	require.Equal(t, appGo, app.Go, "the module's go line")
	require.Empty(t, app.Toolchain, "the module's toolchain line")
	require.Empty(t, app.Tool, "the module's tool lines")
	allowed := map[string]bool{"github.com/lockgen/lockgen/runtime": true}
	for _, r := range runtimeMod.Require {
		allowed[r.Path] = true
	}
	for _, r := range app.Require {
		require.True(t, allowed[r.Path], "go.mod requires %s, neither the runtime nor one of its requirements", r.Path)
	}
	require.Contains(t, requirePaths(app), "github.com/lockgen/lockgen/runtime")
	require.Equal(t, []string{"github.com/lockgen/lockgen/cmd/lockgen"}, toolPaths(tool), "lockgen.tool.mod's tool lines")
	require.Contains(t, requirePaths(tool), "github.com/sqlc-dev/sqlc")
}

// appGo is the go line of the new module of TestREADMEAdoption: one made
// by Go 1.24, the oldest the runtime supports.
const appGo = "1.24.0"

// goTool is how the README's section runs lockgen: go, then these.
var goTool = []string{"tool", "-modfile=lockgen.tool.mod", "lockgen"}

// goMod is the part of go mod edit -json's output the test reads.
type goMod struct {
	Go, Toolchain string
	Require       []struct{ Path string }
	Tool          []struct{ Path string }
}

func requirePaths(m goMod) []string {
	var paths []string
	for _, r := range m.Require {
		paths = append(paths, r.Path)
	}
	return paths
}

func toolPaths(m goMod) []string {
	var paths []string
	for _, r := range m.Tool {
		paths = append(paths, r.Path)
	}
	return paths
}

// checkout matches the line of the README's first shell block that says
// where the checkout of lockgen is.
var checkout = regexp.MustCompile(`(?m)^LOCKGEN=\S+`)

// readmeSection returns the text of the README section headed "## title",
// up to the next such heading.
func readmeSection(t *testing.T, readme, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n## "+title+"\n")
	require.True(t, ok, "the README has a section %q", title)
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// block is a fenced code block of Markdown: its language and its text,
// unindented as far as its fence was.
type block struct{ lang, text string }

// fence matches an opening or closing code fence.
var fence = regexp.MustCompile("^( *)```(\\w*)$")

// fencedBlocks returns the fenced code blocks of md, in order.
func fencedBlocks(md string) []block {
	var blocks []block
	var cur *block
	indent := ""
	for _, line := range strings.Split(md, "\n") {
		m := fence.FindStringSubmatch(line)
		switch {
		case cur == nil && m != nil:
			cur, indent = &block{lang: m[2]}, m[1]
		case cur != nil && m != nil && m[2] == "":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return blocks
}
