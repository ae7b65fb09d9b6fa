package generator

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenDir holds one directory per case: lockgen.yaml, an optional go.mod,
// and either want/ (the expected files, by Result path) or stderr.txt (the
// expected error text, with the case's directory removed from paths).
const goldenDir = "testdata/golden"

func TestGolden(t *testing.T) {
	cases, err := os.ReadDir(goldenDir)
	require.NoError(t, err)
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(goldenDir, c.Name())
			res, err := generateCase(t, dir)
			if *update {
				updateGolden(t, dir, res, err)
				return
			}
			checkGolden(t, dir, res, err)
		})
	}
}

// generateCase copies the inputs of the golden case in dir to a fresh
// directory outside any module and generates there. An error's text has
// that directory removed from paths.
func generateCase(t *testing.T, dir string) (*Result, error) {
	t.Helper()
	tmp := t.TempDir()
	for _, name := range []string{"lockgen.yaml", "go.mod"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tmp, name), data, 0o644))
	}
	res, err := Generate(context.Background(), Options{SpecPath: filepath.Join(tmp, "lockgen.yaml")})
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), tmp+string(filepath.Separator), ""))
	}
	return res, nil
}

func checkGolden(t *testing.T, dir string, res *Result, err error) {
	wantErr, readErr := os.ReadFile(filepath.Join(dir, "stderr.txt"))
	if readErr == nil {
		require.Error(t, err, "want the error in stderr.txt")
		assert.Equal(t, strings.TrimSuffix(string(wantErr), "\n"), err.Error())
		return
	}
	require.NoError(t, err)
	want := readTree(t, filepath.Join(dir, "want"))
	require.NotEmpty(t, want, "no want/ and no stderr.txt; run go test -update")
	assert.ElementsMatch(t, keys(want), res.Paths(), "generated files differ from want/ (go test -update rewrites it)")
	for _, p := range res.Paths() {
		if w, ok := want[p]; ok {
			assert.Equal(t, string(w), string(res.Files[p]), "%s differs from want/ (go test -update rewrites it)", p)
		}
	}
}

func updateGolden(t *testing.T, dir string, res *Result, err error) {
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "want")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "stderr.txt")))
	if err != nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stderr.txt"), []byte(err.Error()+"\n"), 0o644))
		return
	}
	for p, data := range res.Files {
		target := filepath.Join(dir, "want", filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
		require.NoError(t, os.WriteFile(target, data, 0o644))
	}
}

// readTree returns the regular files under root by slash path relative to
// root; none when root does not exist.
func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return fs.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	require.NoError(t, err)
	return files
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
