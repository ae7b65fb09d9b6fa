package generator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testResult is a small Result under a fresh directory.
func testResult(t *testing.T) *Result {
	t.Helper()
	return &Result{Dir: t.TempDir(), Files: map[string][]byte{
		"a.txt":                      []byte("a\n"),
		"internal/locks/lockgen.go":  []byte("package locks\n"),
		"internal/locks/db/q.sql":    []byte("SELECT 1;\n"),
		"migrations/0001_x.up.sql":   []byte("CREATE TABLE x (id INT);\n"),
		"migrations/0001_x.down.sql": []byte("DROP TABLE x;\n"),
		"zz/last/in/path/order.txt":  []byte("last\n"),
	}}
}

func TestWriteThenCheck(t *testing.T) {
	t.Parallel()
	r := testResult(t)
	stale, err := r.Check()
	require.NoError(t, err)
	require.Len(t, stale, len(r.Files))
	for _, s := range stale {
		assert.True(t, s.Missing, s.Path)
		assert.Equal(t, s.Path+": missing", s.String())
	}

	require.NoError(t, r.Write())
	stale, err = r.Check()
	require.NoError(t, err)
	assert.Empty(t, stale)
	assert.Equal(t, r.Files, readTree(t, r.Dir), "exactly the files of the result, no temporary files left")
	info, err := os.Stat(filepath.Join(r.Dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())

	require.NoError(t, r.Write(), "writing again is a no-op")
	assert.Equal(t, r.Files, readTree(t, r.Dir))
}

func TestCheckFindsStaleAndMissing(t *testing.T) {
	t.Parallel()
	r := testResult(t)
	r.Files["internal/locks/lockgen.go"] = []byte("package locks\n\n// A is a.\nconst A = 1\n\nconst B = 2\n")
	require.NoError(t, r.Write())
	require.NoError(t, os.WriteFile(filepath.Join(r.Dir, "internal/locks/lockgen.go"),
		[]byte("package locks\n\n// A is a.\nconst A = 10\n\nconst B = 2\n"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(r.Dir, "migrations/0001_x.down.sql")))
	require.NoError(t, os.WriteFile(filepath.Join(r.Dir, "a.txt"), []byte("a"), 0o644))

	stale, err := r.Check()
	require.NoError(t, err)
	assert.Equal(t, []Stale{
		{Path: "a.txt", Diff: "-1: a (no newline at end of file)\n+1: a\n"},
		{Path: "internal/locks/lockgen.go", Diff: "-4: const A = 10\n+4: const A = 1\n"},
		{Path: "migrations/0001_x.down.sql", Missing: true},
	}, stale)
	assert.Equal(t, "internal/locks/lockgen.go: stale\n-4: const A = 10\n+4: const A = 1", stale[1].String())
}

func TestShortDiffIsShort(t *testing.T) {
	t.Parallel()
	var old, cur []byte
	for range 100 {
		old = append(old, []byte("old line\n")...)
		cur = append(cur, []byte("new line\n")...)
	}
	d := shortDiff(append([]byte("same\n"), old...), append([]byte("same\n"), cur...))
	assert.Equal(t, "-2: old line\n-3: old line\n-4: old line\n-5: old line\n-6: old line\n- ... 95 more lines\n"+
		"+2: new line\n+3: new line\n+4: new line\n+5: new line\n+6: new line\n+ ... 95 more lines\n", d)
	assert.Equal(t, "+3: c\n", shortDiff([]byte("a\nb\n"), []byte("a\nb\nc\n")))
	assert.Equal(t, "-1: a\n", shortDiff([]byte("a\nb\n"), []byte("b\n")))
}

func TestWriteAllOrNothing(t *testing.T) {
	t.Parallel()
	r := testResult(t)
	// Existing files keep their contents when the write fails.
	require.NoError(t, os.WriteFile(filepath.Join(r.Dir, "a.txt"), []byte("old a\n"), 0o644))
	// A file where Write needs a directory: every other file is staged
	// before (or after) it fails, in path order.
	require.NoError(t, os.WriteFile(filepath.Join(r.Dir, "migrations"), []byte("not a dir\n"), 0o644))
	before := readTree(t, r.Dir)

	err := r.Write()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "migrations")
	assert.Equal(t, before, readTree(t, r.Dir), "nothing written, no temporary files left")
	_, statErr := os.Stat(filepath.Join(r.Dir, "internal"))
	assert.ErrorIs(t, statErr, os.ErrNotExist, "directories created by the failed write are removed")
}

func TestWriteRollsBackRenamedFiles(t *testing.T) {
	t.Parallel()
	r := testResult(t)
	require.NoError(t, os.WriteFile(filepath.Join(r.Dir, "a.txt"), []byte("old a\n"), 0o600))
	before := readTree(t, r.Dir)

	var tx writeTx
	for _, p := range r.Paths() {
		require.NoError(t, tx.stage(filepath.Join(r.Dir, filepath.FromSlash(p)), r.Files[p]))
	}
	// Make the last rename fail: its temporary file is gone.
	last := tx.staged[len(tx.staged)-1]
	require.NoError(t, os.Remove(last.temp))
	require.Error(t, tx.commit())
	assert.Equal(t, len(tx.staged)-1, tx.committed)
	require.NoError(t, tx.rollback())

	assert.Equal(t, before, readTree(t, r.Dir), "renamed files restored or removed")
	info, err := os.Stat(filepath.Join(r.Dir, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "restored with its mode")
	_, statErr := os.Stat(filepath.Join(r.Dir, "zz"))
	assert.ErrorIs(t, statErr, os.ErrNotExist)
}
