package main

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/generator"
	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/internal/goldencase"
)

// TestMain lets the test binary serve as the sqlc child process that the
// generator starts (it re-executes os.Executable()), and as lockgen itself
// for tests that run a command as a process of its own (cliChildEnv).
func TestMain(m *testing.M) {
	if code, ok := generator.RunSQLCChildIfRequested(); ok {
		os.Exit(code)
	}
	if os.Getenv(cliChildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// golden is the generator's golden test data, reused as input here.
const golden = "../../generator/testdata/golden"

// lockgen runs the command line args and returns the exit code, stdout and
// stderr.
func lockgen(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// project copies the golden case's spec and go.mod into a fresh directory
// and returns the spec's path there.
func project(t *testing.T, goldenCase string) string {
	t.Helper()
	return goldencase.Project(t, golden, goldenCase)
}

func TestHelp(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := lockgen("help")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, stderr)
	for _, name := range []string{"generate", "check", "init", "version", "help"} {
		assert.Contains(t, stdout, "\t"+name+" ", "the command list names %s", name)
	}
	assert.NotContains(t, stdout, "\tsqlc", "sqlc is left out of the main help")

	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}} {
		code, out, errOut := lockgen(args...)
		assert.Equal(t, exitOK, code, args)
		assert.Equal(t, stdout, out, args)
		assert.Empty(t, errOut, args)
	}

	code, stdout, stderr = lockgen()
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "Usage:")
}

func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		code, stdout, stderr := lockgen("help", c.name)
		require.Equal(t, exitOK, code, c.name)
		assert.Empty(t, stderr)
		assert.True(t, strings.HasPrefix(stdout, "Usage: "+c.usageLine()+"\n\n"), stdout)
		if c.setup == nil {
			continue
		}
		code, fromFlag, _ := lockgen(c.name, "-h")
		assert.Equal(t, exitOK, code, c.name)
		assert.Equal(t, stdout, fromFlag, "%s -h prints the command's help", c.name)
		// The usage line names every flag the command defines.
		fs := c.flagSet()
		c.setup(fs)
		fs.VisitAll(func(f *flag.Flag) {
			assert.Regexp(t, `\[-`+f.Name+`[ \]]`, c.args, "usage of %s names -%s", c.name, f.Name)
			assert.Contains(t, stdout, "  -"+f.Name, "help of %s lists -%s", c.name, f.Name)
		})
	}
	for _, args := range [][]string{{"help", "-h"}, {"help", "help"}, {"help", "--help"}} {
		code, stdout, _ := lockgen(args...)
		assert.Equal(t, exitOK, code, args)
		assert.True(t, strings.HasPrefix(stdout, "Usage: lockgen help [command]\n"), args)
	}
	code, stdout, _ := lockgen("help", "sqlc")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "lockgen sqlc generate")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frob"}, `lockgen: unknown command "frob"`},
		{[]string{"help", "frob"}, `lockgen help: unknown command "frob"`},
		{[]string{"help", "generate", "check"}, "too many arguments"},
		{[]string{"check", "-x"}, "lockgen check: flag provided but not defined: -x\nUsage: lockgen check [-f lockgen.yaml]"},
		{[]string{"generate", "extra"}, `lockgen generate: unexpected argument "extra"`},
		{[]string{"version", "-f", "x"}, "flag provided but not defined: -f"},
		{[]string{"init", "-f", filepath.Join(t.TempDir(), "l.yaml"), "-package", "Locks"}, `lockgen init: -package: package "Locks" is not a lower-case Go package name`},
	} {
		code, stdout, stderr := lockgen(tc.args...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Empty(t, stdout, tc.args)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
}

// TestUnknownCommandSuggests: a misspelled or abbreviated command is named
// back with the command it probably means, never a hidden one.
func TestUnknownCommandSuggests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gen"}, `lockgen: unknown command "gen" (did you mean "generate"?)` + "\nRun '" + self + " help' for usage.\n"},
		{[]string{"genrate", "-f", "x.yaml"}, `lockgen: unknown command "genrate" (did you mean "generate"?)`},
		{[]string{"chek"}, `lockgen: unknown command "chek" (did you mean "check"?)`},
		{[]string{"Init"}, `lockgen: unknown command "Init" (did you mean "init"?)`},
		{[]string{"docter"}, `lockgen: unknown command "docter" (did you mean "doctor"?)`},
		{[]string{"hlep"}, `lockgen: unknown command "hlep" (did you mean "help"?)`},
		{[]string{"help", "gen"}, `lockgen help: unknown command "gen" (did you mean "generate"?)`},
		{[]string{"statsu"}, `lockgen: unknown command "statsu" (did you mean "status"?)`},
		{[]string{"stats"}, `lockgen: unknown command "stats" (did you mean "status"?)`},
		{[]string{"sq"}, `lockgen: unknown command "sq"` + "\n"}, // sqlc is hidden
	} {
		code, stdout, stderr := lockgen(tc.args...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Empty(t, stdout, tc.args)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
}

func TestGenerateThenCheck(t *testing.T) {
	t.Parallel()
	specPath := project(t, "quickstart")
	code, stdout, stderr := lockgen("generate", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stdout, "generate is quiet")
	assert.Empty(t, stderr, "generate is quiet")

	want := filepath.Join(golden, "quickstart", "want")
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(want, p)
		require.NoError(t, err)
		wantData, err := os.ReadFile(p)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(filepath.Dir(specPath), rel))
		require.NoError(t, err, "generate wrote %s", rel)
		assert.Equal(t, string(wantData), string(got), rel)
		return nil
	})
	require.NoError(t, err)

	code, stdout, stderr = lockgen("check", "-f", specPath)
	assert.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stdout)
	assert.Empty(t, stderr)

	code, _, stderr = lockgen("generate", "-v", "-f", specPath)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stderr, filepath.Join(filepath.Dir(specPath), "internal", "locks", "lockgen.go")+"\n")
}

func TestCheckStale(t *testing.T) {
	t.Parallel()
	specPath := project(t, "quickstart")
	dir := filepath.Dir(specPath)
	code, _, stderr := lockgen("generate", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)

	wrappers := filepath.Join(dir, "internal", "locks", "lockgen.go")
	data, err := os.ReadFile(wrappers)
	require.NoError(t, err)
	edited := strings.Replace(string(data), "package locks\n", "package locks // edited\n", 1)
	require.NotEqual(t, string(data), edited)
	require.NoError(t, os.WriteFile(wrappers, []byte(edited), 0o644))
	down := filepath.Join(dir, "db", "migrations", "0001_lockgen_locks.down.sql")
	require.NoError(t, os.Remove(down))

	code, stdout, stderr := lockgen("check", "-f", specPath)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stdout, down+": missing\n")
	assert.Contains(t, stdout, wrappers+": stale\n-9: package locks // edited\n+9: package locks\n")
	assert.Equal(t, "lockgen: 2 of 12 generated files are stale or missing; run `go tool lockgen generate -f "+specPath+"`\n", stderr)
	assert.Less(t, strings.Count(stdout, "\n"), 10, "the diff is short")

	code, _, _ = lockgen("generate", "-f", specPath)
	require.Equal(t, exitOK, code)
	code, _, _ = lockgen("check", "-f", specPath)
	assert.Equal(t, exitOK, code, "generate fixes stale output")
}

// TestSwitchingMigrationsFormat: the old format's migrations fail check,
// with what to do, until generate removes them (and says so).
func TestSwitchingMigrationsFormat(t *testing.T) {
	t.Parallel()
	specPath := project(t, "quickstart")
	dir := filepath.Dir(specPath)
	code, _, stderr := lockgen("generate", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)
	data, err := os.ReadFile(specPath)
	require.NoError(t, err)
	goose := strings.Replace(string(data), "format: golang-migrate", "format: goose", 1)
	require.NoError(t, os.WriteFile(specPath, []byte(goose), 0o644))

	up := filepath.Join(dir, "db", "migrations", "0001_lockgen_locks.up.sql")
	down := filepath.Join(dir, "db", "migrations", "0001_lockgen_locks.down.sql")
	sessionUp := filepath.Join(dir, "db", "migrations", "0006_lockgen_locks_session.up.sql")
	sessionDown := filepath.Join(dir, "db", "migrations", "0006_lockgen_locks_session.down.sql")
	const why = " (a golang-migrate migration lockgen wrote, but migrations.format is goose)"
	code, stdout, stderr := lockgen("check", "-f", specPath)
	assert.Equal(t, exitFail, code)
	const leftOver = ": left over: a golang-migrate migration lockgen wrote, but migrations.format is goose; generate removes it\n"
	assert.Contains(t, stdout, filepath.Join(dir, "db", "migrations", "00001_lockgen_locks.sql")+": missing\n"+
		filepath.Join(dir, "db", "migrations", "00006_lockgen_locks_session.sql")+": missing\n"+
		down+leftOver+up+leftOver+sessionDown+leftOver+sessionUp+leftOver)
	assert.Contains(t, stdout, filepath.Join(dir, "internal", "locks", "lockgen.go")+": stale\n", "its doc names the migration")
	assert.Contains(t, stdout, filepath.Join(dir, "internal", "locks", "lockgendb", "lockgen_store.go")+": stale\n", "its Server names the migration")
	assert.Equal(t, "lockgen: 4 of 10 generated files are stale or missing and 4 files lockgen no longer generates are left over; run `"+self+" generate -f "+specPath+"`\n", stderr)

	code, stdout, stderr = lockgen("generate", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, "lockgen: removed "+down+why+"\nlockgen: removed "+up+why+"\nlockgen: removed "+sessionDown+why+"\nlockgen: removed "+sessionUp+why+"\n", stderr)
	for _, p := range []string{up, down, sessionUp, sessionDown} {
		_, err := os.Stat(p)
		assert.True(t, os.IsNotExist(err), p)
	}
	code, _, stderr = lockgen("check", "-f", specPath)
	assert.Equal(t, exitOK, code, stderr)
}

func TestSpecErrorsArePrintedAsIs(t *testing.T) {
	t.Parallel()
	specPath := project(t, "spec-errors")
	wantLines, err := os.ReadFile(filepath.Join(golden, "spec-errors", "stderr.txt"))
	require.NoError(t, err)
	want := strings.ReplaceAll(string(wantLines), "lockgen.yaml:", specPath+":")
	for _, cmd := range []string{"generate", "check"} {
		code, stdout, stderr := lockgen(cmd, "-f", specPath)
		assert.Equal(t, exitFail, code, cmd)
		assert.Empty(t, stdout, cmd)
		assert.Equal(t, want, stderr, cmd)
	}
	entries, err := os.ReadDir(filepath.Dir(specPath))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "nothing written")
}

func TestMissingSpecOrModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _, stderr := lockgen("generate", "-f", filepath.Join(dir, "lockgen.yaml"))
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "lockgen: no spec file "+filepath.Join(dir, "lockgen.yaml")+" (create one with `go tool lockgen init`")

	data, err := os.ReadFile(filepath.Join(golden, "no-gomod", "lockgen.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lockgen.yaml"), data, 0o644))
	code, _, stderr = lockgen("check", "-f", filepath.Join(dir, "lockgen.yaml"))
	assert.Equal(t, exitFail, code)
	assert.True(t, strings.HasPrefix(stderr, "lockgen: no go.mod in "), stderr)
}

func TestInitGenerateCheckBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	specPath := filepath.Join(dir, "lockgen.yaml")
	code, stdout, stderr := lockgen("init", "-f", specPath, "-package", "applocks")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "wrote "+specPath+"; edit it, then run `go tool lockgen generate -f "+specPath+"`\n"+
		"To run it with `go generate ./...`, put the line\n"+
		"\t//go:generate go tool lockgen generate\n"+
		"in a .go file next to it. There is none yet in "+dir+", and go generate reads only .go files:\n"+
		"create one, such as "+filepath.Join(dir, "generate.go")+", holding a package clause (e.g. `package app`) and that line.\n", stdout)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/app\n\ngo 1.24\n"), 0o644))

	code, _, stderr = lockgen("generate", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = lockgen("check", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)
	src, err := os.ReadFile(filepath.Join(dir, "internal", "locks", "lockgen.go"))
	require.NoError(t, err)
	assert.Contains(t, string(src), "\npackage applocks\n")
	assert.Contains(t, string(src), "func (l *Locks) WithOrderLock(ctx context.Context, orderID int64, fn func(ctx context.Context, lease *Lease) error) error {")
	assert.Contains(t, string(src), "func (l *Locks) RunAsMaster(ctx context.Context, fn func(ctx context.Context, lease *Lease) error, opts ...LeaderOption) error {")
	assert.Contains(t, string(src), "func (l *Locks) IsMasterLeader() bool {")
	assert.Contains(t, string(src), "func (l *Locks) MasterLeader(ctx context.Context) (Holder, error) {")

	goBuild(t, dir)
}

// goBuild builds and vets the module in dir against this repository's
// runtime module.
func goBuild(t *testing.T, dir string) {
	t.Helper()
	goExe, err := exec.LookPath("go")
	require.NoError(t, err)
	runtimeDir, err := filepath.Abs(filepath.Join("..", "..", "runtime"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(runtimeDir, "go.mod"))
	require.NoError(t, err, "the runtime module is expected at ../../runtime")
	work := "go 1.24.0\n\nuse (\n\t.\n\t" + filepath.ToSlash(runtimeDir) + "\n)\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.work"), []byte(work), 0o644))
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goExe, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %v:\n%s", args, out)
	}
}

// TestStarterAlternatives checks that the starter shows leader election and
// the session strategy, and that uncommenting strategy: session (in place of
// strategy: lease) gives a valid spec.
func TestStarterAlternatives(t *testing.T) {
	t.Parallel()
	data := string(starterSpec("locks"))
	assert.Contains(t, data, "\n    leader: true ")
	const lease, session = "\n    strategy: lease\n    # strategy: session", "\n    # strategy: session "
	require.Contains(t, data, lease)
	require.Contains(t, data, session)

	s, err := spec.Load("lockgen.yaml", []byte(data))
	require.NoError(t, err)
	assert.Equal(t, spec.StrategyLease, s.Locks[0].Strategy)
	assert.True(t, s.Locks[0].Leader)

	swapped := strings.Replace(data, "\n    strategy: lease\n    # strategy: session ", "\n    strategy: session ", 1)
	s, err = spec.Load("lockgen.yaml", []byte(swapped))
	require.NoError(t, err)
	assert.Equal(t, spec.StrategySession, s.Locks[1].Strategy, "the keyed lock can switch to session")
}

// uncommentJobs returns the starter spec with its commented queues and jobs
// uncommented: the lines after "# queues:" that are YAML, not prose.
func uncommentJobs(t *testing.T, starter string) string {
	t.Helper()
	lines := strings.Split(starter, "\n")
	start := slices.Index(lines, "# queues:")
	require.GreaterOrEqual(t, start, 0, "the starter has a commented queues key")
	for i := start; i < len(lines); i++ {
		if rest, ok := strings.CutPrefix(lines[i], "# "); ok && (strings.HasPrefix(rest, "queues:") || strings.HasPrefix(rest, "jobs:") || strings.HasPrefix(rest, "  ")) {
			lines[i] = rest
		}
	}
	return strings.Join(lines, "\n")
}

// TestStarterShowsEverySection: the starter declares a plain lock that is
// a leader and a keyed lock, and, commented out, queues, a scheduled job
// and a job with arguments; uncommented, they load, generate, pass check
// and build.
func TestStarterShowsEverySection(t *testing.T) {
	t.Parallel()
	starter := string(starterSpec("locks"))
	for _, section := range []string{"\nversion: 1\n", "\npackage: locks\n", "\nout: ", "\nmigrations:\n", "\ntable_prefix: ", "\nlocks:\n",
		"\n# queues:\n", "\n# jobs:\n", "\n#     schedule: ", "\n#     args: "} {
		assert.Contains(t, starter, section)
	}
	assert.Contains(t, starter, "//go:generate go tool lockgen generate\n# in a .go file")

	withJobs := uncommentJobs(t, starter)
	s, err := spec.Load("lockgen.yaml", []byte(withJobs))
	require.NoError(t, err, withJobs)
	require.Len(t, s.Locks, 2)
	assert.True(t, s.Locks[0].Leader)
	assert.NotNil(t, s.Locks[1].Key)
	require.Len(t, s.Jobs, 2)
	assert.NotEmpty(t, s.Jobs[0].Schedule, "the first job is scheduled")
	assert.NotEmpty(t, s.Jobs[1].Args, "the second job takes arguments")
	assert.Len(t, s.Queues, 2)

	dir := t.TempDir()
	specPath := filepath.Join(dir, "lockgen.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(withJobs), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/app\n\ngo 1.24\n"), 0o644))
	code, _, stderr := lockgen("generate", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = lockgen("check", "-f", specPath)
	require.Equal(t, exitOK, code, stderr)
	src, err := os.ReadFile(filepath.Join(dir, "internal", "locks", "lockgen_jobs.go"))
	require.NoError(t, err)
	assert.Contains(t, string(src), "func (l *Locks) EnqueueSendReceipt(ctx context.Context, args SendReceiptArgs, opts ...EnqueueOption) (int64, error) {")
	assert.Contains(t, string(src), "NightlyReport(ctx context.Context, run *Run) error")
	goBuild(t, dir)
}

func TestInitRefusesToOverwrite(t *testing.T) {
	t.Parallel()
	specPath := filepath.Join(t.TempDir(), "lockgen.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte("mine\n"), 0o644))
	code, stdout, stderr := lockgen("init", "-f", specPath)
	assert.Equal(t, exitFail, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "lockgen: "+specPath+" already exists; init never overwrites a file (use -f to write elsewhere)\n", stderr)
	data, err := os.ReadFile(specPath)
	require.NoError(t, err)
	assert.Equal(t, "mine\n", string(data))

	code, _, stderr = lockgen("init", "-f", filepath.Join(t.TempDir(), "no", "such", "dir", "lockgen.yaml"))
	assert.Equal(t, exitFail, code, "init does not create directories")
	assert.Contains(t, stderr, "lockgen: open ")
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := lockgen("version")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, stderr)
	assert.Regexp(t, `^lockgen \S+ \(sqlc v1\.31\.1, go\S+\)\n$`, stdout)
}

func TestSQLCPassthrough(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := lockgen("sqlc", "version")
	assert.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "v1.31.1\n", stdout)

	code, _, stderr = lockgen("sqlc", "generate", "-f", filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Equal(t, exitFail, code)
	assert.NotEmpty(t, stderr, "sqlc's error is shown")
}

// TestDoctorNeedsAServer: doctor without -dsn or LOCKGEN_DSN is a usage
// error that says how to name the server (internal/doctor tests the checks
// against both servers).
func TestDoctorNeedsAServer(t *testing.T) {
	t.Setenv("LOCKGEN_DSN", "")
	code, stdout, stderr := lockgen("doctor")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "pass -dsn")
	assert.Contains(t, stderr, "LOCKGEN_DSN")
}
