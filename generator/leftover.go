package generator

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/templates"
)

// Leftover is a file that lockgen wrote for an earlier version of the spec
// or an earlier lockgen and no longer generates: a migration in the
// migrations.format the spec no longer names (switching the format would
// otherwise leave the old tool's files next to the new ones, and check
// would still pass), or the store glue that lockgen wrote into the
// package itself before it moved to the sqlc package (it would no longer
// compile). Write removes it; Check reports it.
type Leftover struct {
	// Path is the file's slash-separated path relative to Result.Dir.
	Path string
	// Why says what the file is and why it is left over.
	Why string
}

// leftoverFiles returns every candidate leftover of s, in path order.
func leftoverFiles(s *spec.Spec) []Leftover {
	out := append(leftoverMigrations(s), leftoverStore(s.Out))
	slices.SortFunc(out, func(a, b Leftover) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// leftoverMigrations returns the migration files lockgen would write for s
// in the other format, in path order: the candidates for leftovers.
func leftoverMigrations(s *spec.Spec) []Leftover {
	other := s.Migrations
	other.Format = spec.FormatGoose
	if s.Migrations.Format == spec.FormatGoose {
		other.Format = spec.FormatGolangMigrate
	}
	files := append(migrations(other, s.TablePrefix), runsMigrations(other, s.TablePrefix)...)
	files = append(files, locksSessionMigrations(other, s.TablePrefix)...)
	why := fmt.Sprintf("a %s migration lockgen wrote, but migrations.format is %s", other.Format, s.Migrations.Format)
	var out []Leftover
	for _, f := range files {
		out = append(out, Leftover{Path: f.Path, Why: why})
	}
	slices.SortFunc(out, func(a, b Leftover) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// leftoverStore is the store glue an earlier lockgen wrote next to the
// wrappers, in outDir (the package directory relative to the spec).
func leftoverStore(outDir string) Leftover {
	return Leftover{
		Path: path.Join(outDir, storeFile),
		Why:  "the store glue an earlier lockgen wrote into the package; it is now " + path.Join(dbPackage, storeFile),
	}
}

// Leftovers returns the leftover files under r.Dir, in path order: the
// candidates that exist and start with lockgen's generated-file header. A
// file of that name without the header is not lockgen's, and is left alone.
func (r *Result) Leftovers() ([]Leftover, error) {
	var found []Leftover
	for _, l := range r.leftovers {
		ours, err := generatedByLockgen(filepath.Join(r.Dir, filepath.FromSlash(l.Path)))
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", l.Path, err)
		}
		if ours {
			found = append(found, l)
		}
	}
	return found, nil
}

// generatedByLockgen reports whether the file at path exists and its first
// line is lockgen's header: "-- <header>" in SQL, "// <header>" in Go.
func generatedByLockgen(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && len(line) == 0 {
		return false, nil // empty, or unreadable past its start: not ours
	}
	want := "-- " + templates.Header + "\n"
	if strings.HasSuffix(path, ".go") {
		want = "// " + templates.Header + "\n"
	}
	return line == want, nil
}
