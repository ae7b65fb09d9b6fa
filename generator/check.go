package generator

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Stale is a generated file whose contents on disk are not what lockgen
// generates, or a leftover file lockgen no longer generates.
type Stale struct {
	// Path is the file's slash-separated path relative to Result.Dir.
	Path string
	// Missing is true when the file does not exist.
	Missing bool
	// Leftover, when not empty, says why the file is a Leftover: it is on
	// disk but lockgen no longer generates it, and Write removes it.
	Leftover string
	// Diff shows the first changed lines (at most maxDiffLines of each
	// side), prefixed "-N:" for the file on disk and "+N:" for the
	// generated one, N being the line number; empty when Missing.
	Diff string
}

// String describes s in one line, followed by the lines of its diff if
// any, without a trailing newline.
func (s Stale) String() string {
	switch {
	case s.Missing:
		return s.Path + ": missing"
	case s.Leftover != "":
		return s.Path + ": left over: " + s.Leftover + "; generate removes it"
	}
	return s.Path + ": stale\n" + strings.TrimSuffix(s.Diff, "\n")
}

// Check compares the files of r with those under r.Dir and returns the ones
// that are missing or differ, and r's Leftovers, in path order; none means
// the output on disk is up to date. It writes nothing. Other files on disk
// that lockgen does not generate are ignored.
func (r *Result) Check() ([]Stale, error) {
	var stale []Stale
	for _, p := range r.Paths() {
		onDisk, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(p)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			stale = append(stale, Stale{Path: p, Missing: true})
		case err != nil:
			return nil, fmt.Errorf("check %s: %w", p, err)
		case !bytes.Equal(onDisk, r.Files[p]):
			stale = append(stale, Stale{Path: p, Diff: shortDiff(onDisk, r.Files[p])})
		}
	}
	leftovers, err := r.Leftovers()
	if err != nil {
		return nil, err
	}
	for _, l := range leftovers {
		stale = append(stale, Stale{Path: l.Path, Leftover: l.Why})
	}
	slices.SortStableFunc(stale, func(a, b Stale) int { return strings.Compare(a.Path, b.Path) })
	return stale, nil
}

// maxDiffLines bounds each side of a short diff.
const maxDiffLines = 5

// shortDiff shows the region where onDisk and generated differ: the lines between
// their common prefix and common suffix, at most maxDiffLines of each side,
// with line numbers. It is meant to say where a file went stale, not to be
// applied.
func shortDiff(onDisk, generated []byte) string {
	a, b := splitLines(onDisk), splitLines(generated)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var sb strings.Builder
	side(&sb, "-", a[pre:len(a)-suf], pre)
	side(&sb, "+", b[pre:len(b)-suf], pre)
	return sb.String()
}

// side writes the changed lines of one side of a diff, numbered from
// first+1, eliding those past maxDiffLines.
func side(sb *strings.Builder, sign string, lines []string, first int) {
	for i, l := range lines {
		if i == maxDiffLines {
			fmt.Fprintf(sb, "%s ... %d more lines\n", sign, len(lines)-i)
			return
		}
		fmt.Fprintf(sb, "%s%d: %s\n", sign, first+i+1, l)
	}
}

// splitLines splits data into lines without their "\n". A final line
// without a newline is marked, so that adding one shows in a diff.
func splitLines(data []byte) []string {
	s := string(data)
	noEOL := s != "" && !strings.HasSuffix(s, "\n")
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if s == "" {
		lines = nil
	}
	if noEOL {
		lines[len(lines)-1] += " (no newline at end of file)"
	}
	return lines
}
