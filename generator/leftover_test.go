package generator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/templates"
)

// TestLeftoverMigrations: after migrations.format changes, the migrations
// lockgen wrote in the old format are reported by Check and removed by
// Write; files of those names that lockgen did not write are left alone.
func TestLeftoverMigrations(t *testing.T) {
	t.Parallel()
	const locks = "version: 1\npackage: locks\nmigrations: {dir: db, format: %s}\nlocks: [{name: master, ttl: 3s}]\n"
	const withJobs = locks + "jobs: [{name: report, schedule: '@daily'}]\n"
	header := "-- " + templates.Header + "\n"
	for _, tc := range []struct {
		name string
		// spec is a format string taking the migrations format.
		spec     string
		was, now string
		// onDisk are the files in db/ before, besides those generated in
		// the old format.
		onDisk map[string]string
		// want are the leftovers Check reports and Write removes; kept
		// are files Write must not touch.
		want, kept []string
	}{
		{
			name: "golang-migrate to goose",
			spec: locks, was: "golang-migrate", now: "goose",
			want: []string{"db/0001_lockgen_locks.down.sql", "db/0001_lockgen_locks.up.sql"},
		},
		{
			name: "goose to golang-migrate, with jobs",
			spec: withJobs, was: "goose", now: "golang-migrate",
			want: []string{"db/00001_lockgen_locks.sql", "db/00002_lockgen_runs.sql"},
		},
		{
			name: "golang-migrate to goose, with jobs",
			spec: withJobs, was: "golang-migrate", now: "goose",
			want: []string{"db/0001_lockgen_locks.down.sql", "db/0001_lockgen_locks.up.sql", "db/0002_lockgen_runs.down.sql", "db/0002_lockgen_runs.up.sql"},
		},
		{
			name: "jobs added with the switch: no old runs migration",
			spec: withJobs, was: "", now: "goose",
			onDisk: map[string]string{
				"db/0001_lockgen_locks.up.sql":   header + "CREATE TABLE lockgen_locks (x INT);\n",
				"db/0001_lockgen_locks.down.sql": header + "DROP TABLE lockgen_locks;\n",
			},
			want: []string{"db/0001_lockgen_locks.down.sql", "db/0001_lockgen_locks.up.sql"},
		},
		{
			name: "files of those names without lockgen's header are not lockgen's",
			spec: locks, was: "", now: "goose",
			onDisk: map[string]string{
				"db/0001_lockgen_locks.up.sql":   "-- mine\nCREATE TABLE lockgen_locks (x INT);\n",
				"db/0001_lockgen_locks.down.sql": "",
				"db/0003_orders.up.sql":          header + "CREATE TABLE orders (id INT);\n",
			},
			kept: []string{"db/0001_lockgen_locks.down.sql", "db/0001_lockgen_locks.up.sql", "db/0003_orders.up.sql"},
		},
		{
			name: "no switch",
			spec: withJobs, was: "goose", now: "goose",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/app\n\ngo 1.24\n")
			specPath := filepath.Join(dir, "lockgen.yaml")
			generate := func(format string) *Result {
				writeFile(t, specPath, fmt.Sprintf(tc.spec, format))
				res, err := Generate(context.Background(), Options{SpecPath: specPath})
				require.NoError(t, err)
				return res
			}
			if tc.was != "" {
				require.NoError(t, generate(tc.was).Write())
			}
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "db"), 0o755))
			for p, data := range tc.onDisk {
				writeFile(t, filepath.Join(dir, p), data)
			}
			kept := map[string][]byte{}
			for _, p := range tc.kept {
				data, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err)
				kept[p] = data
			}

			res := generate(tc.now)
			require.NoError(t, res.Write(), "first write the new format's files")
			res = generate(tc.now)
			// Put the leftovers back, as an earlier lockgen left them.
			var wantStale []Stale
			for _, p := range tc.want {
				_, err := os.Stat(filepath.Join(dir, p))
				if os.IsNotExist(err) {
					writeFile(t, filepath.Join(dir, p), header+"-- old\n")
				}
				wantStale = append(wantStale, Stale{Path: p, Leftover: "a " + other(tc.now) + " migration lockgen wrote, but migrations.format is " + tc.now})
			}
			leftovers, err := res.Leftovers()
			require.NoError(t, err)
			assert.Len(t, leftovers, len(tc.want))
			stale, err := res.Check()
			require.NoError(t, err)
			assert.Equal(t, wantStale, stale)
			for _, s := range stale {
				assert.Regexp(t, `^db/\S+: left over: a \S+ migration lockgen wrote, but migrations.format is \S+; generate removes it$`, s.String())
			}

			require.NoError(t, res.Write())
			for _, p := range tc.want {
				_, err := os.Stat(filepath.Join(dir, p))
				assert.True(t, os.IsNotExist(err), "%s removed", p)
			}
			for p, data := range kept {
				got, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err, p)
				assert.Equal(t, string(data), string(got), "%s untouched", p)
			}
			stale, err = res.Check()
			require.NoError(t, err)
			assert.Empty(t, stale, "up to date after the write")
		})
	}
}

// other is the migrations format that is not f.
func other(f string) string {
	if f == "goose" {
		return "golang-migrate"
	}
	return "goose"
}

// TestWriteRestoresRemovedLeftovers: when a write fails after leftovers
// were removed, they are restored.
func TestWriteRestoresRemovedLeftovers(t *testing.T) {
	t.Parallel()
	r := testResult(t)
	header := "-- " + templates.Header + "\n"
	r.leftovers = []Leftover{{Path: "migrations/00001_x.sql", Why: "old"}}
	writeFile(t, filepath.Join(r.Dir, "a.txt"), "old a\n")
	require.NoError(t, os.MkdirAll(filepath.Join(r.Dir, "migrations"), 0o755))
	writeFile(t, filepath.Join(r.Dir, "migrations", "00001_x.sql"), header+"CREATE TABLE x (id INT);\n")
	require.NoError(t, os.Chmod(filepath.Join(r.Dir, "migrations", "00001_x.sql"), 0o600))
	before := readTree(t, r.Dir)

	var tx writeTx
	for _, p := range r.Paths() {
		require.NoError(t, tx.stage(filepath.Join(r.Dir, filepath.FromSlash(p)), r.Files[p]))
	}
	require.NoError(t, tx.stageRemove(filepath.Join(r.Dir, "migrations", "00001_x.sql")))
	require.NoError(t, tx.stageRemove(filepath.Join(r.Dir, "migrations", "absent.sql")), "a file already gone is no error")
	require.NoError(t, tx.commit())
	_, err := os.Stat(filepath.Join(r.Dir, "migrations", "00001_x.sql"))
	require.True(t, os.IsNotExist(err), "commit removed the leftover")
	require.NoError(t, tx.rollback())

	assert.Equal(t, before, readTree(t, r.Dir), "written files undone, the removed one restored")
	info, err := os.Stat(filepath.Join(r.Dir, "migrations", "00001_x.sql"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "restored with its mode")
}

// TestLeftoverStoreGlue: the store glue an earlier lockgen wrote into the
// package (<out>/lockgen_store.go, which no longer compiles next to the
// sqlc package's Store) is reported by Check and removed by Write; a file
// of that name without lockgen's header is the user's and is left alone.
func TestLeftoverStoreGlue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		leftover   bool
	}{
		{"lockgen's", "// " + templates.Header + "\n\npackage locks\n", true},
		{"the user's", "// my own store\npackage locks\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/app\n\ngo 1.24\n")
			specPath := filepath.Join(dir, "lockgen.yaml")
			writeFile(t, specPath, "version: 1\npackage: locks\nout: locks\nlocks: [{name: master, ttl: 3s}]\n")
			res, err := Generate(context.Background(), Options{SpecPath: specPath})
			require.NoError(t, err)
			require.NoError(t, res.Write())
			old := filepath.Join(dir, "locks", "lockgen_store.go")
			writeFile(t, old, tc.data)

			stale, err := res.Check()
			require.NoError(t, err)
			if !tc.leftover {
				assert.Empty(t, stale)
				require.NoError(t, res.Write())
				got, err := os.ReadFile(old)
				require.NoError(t, err)
				assert.Equal(t, tc.data, string(got), "untouched")
				return
			}
			require.Len(t, stale, 1)
			assert.Equal(t, "locks/lockgen_store.go: left over: the store glue an earlier lockgen wrote into the package; it is now lockgendb/lockgen_store.go; generate removes it", stale[0].String())
			require.NoError(t, res.Write())
			_, err = os.Stat(old)
			assert.True(t, os.IsNotExist(err), "removed")
			stale, err = res.Check()
			require.NoError(t, err)
			assert.Empty(t, stale)
		})
	}
}
