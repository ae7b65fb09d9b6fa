package generator

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionGuard builds generated code against a copy of this
// repository's runtime module that lacks the version constant the code
// refers to, as a runtime of another lockgen version would: the build must
// fail with that single error, and the compiler's message must tell the
// reader to run lockgen generate.
func TestVersionGuard(t *testing.T) {
	t.Parallel()
	goExe, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to build generated code")

	specPath := goldenSpec(t, "quickstart")
	dir := filepath.Dir(specPath)
	res, err := Generate(context.Background(), Options{SpecPath: specPath})
	require.NoError(t, err)
	require.NoError(t, res.Write())

	// The runtime as it would be without this version: its sources, minus
	// tests, with the constant gone.
	other := filepath.Join(t.TempDir(), "runtime")
	copySources(t, findRuntimeModule(t), other)
	version := filepath.Join(other, "version.go")
	src, err := os.ReadFile(version)
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^const ` + versionGuard + ` = true$`)
	require.Regexp(t, decl, string(src), "runtime/version.go declares the guard")
	writeFile(t, version, decl.ReplaceAllString(string(src), ""))

	writeFile(t, filepath.Join(dir, "go.work"), "go 1.24.0\n\nuse (\n\t.\n\t"+filepath.ToSlash(other)+"\n)\n")
	cmd := exec.Command(goExe, "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "generated code built against a runtime without %s:\n%s", versionGuard, out)
	t.Logf("go build:\n%s", out)

	var errs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "#") {
			errs = append(errs, line)
		}
	}
	require.Len(t, errs, 1, "the guard is the only error:\n%s", out)
	// versionGuard (RegenerateWithLockgenGenerateV9) is the whole message
	// the user sees: it names the command that fixes the build.
	require.Regexp(t, `lockgen\.go:\d+:\d+: undefined: runtime\.`+regexp.QuoteMeta(versionGuard)+`$`, errs[0])
}

// copySources copies the Go module in from to to, leaving out tests.
func copySources(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		switch {
		case d.IsDir() && d.Name() == "testdata":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case strings.HasSuffix(path, "_test.go") || !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	require.NoError(t, err)
}
