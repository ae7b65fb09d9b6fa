// Command testsum reads `go test -json` on standard input and prints what
// plain `go test` prints (a line per package, the output of failing tests
// and of build failures), then one closing line counting the tests, their
// subtests included:
//
//	MariaDB-10.11.19: 431 passed, 0 failed, 0 skipped
//
// and a line naming the slowest top-level tests (where `make test` spends
// its time):
//
//	MariaDB-10.11.19: slowest: TestA (runtime) 41.2s, TestB (runtime/jobs) 30.1s, …
//
// The label (-label) names the server the tests ran against; it is added to
// each package's line too, so that `make test` says which server each
// package's result belongs to. It exits
// 1 when a test or a package failed, or when the input held no test at all.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
	Elapsed    float64 // seconds, on pass and fail
}

// slowestShown is how many of the slowest top-level tests the summary names.
const slowestShown = 8

// timed is a top-level test and how long it took.
type timed struct {
	name    string
	elapsed float64
}

// counts are the tests' outcomes.
type counts struct {
	passed, failed, skipped int
	pkgFailed               bool
	tests                   []timed // top-level tests that passed or failed
}

func main() {
	label := flag.String("label", "tests", "what the closing line calls this run")
	flag.Parse()
	c, err := summarize(os.Stdin, os.Stdout, *label)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
		os.Exit(1)
	}
	if c.failed > 0 || c.pkgFailed || c.passed == 0 {
		os.Exit(1)
	}
}

// withLabel appends the label to go test's line for a package ("ok  \tpkg
// 1.2s" or "FAIL\tpkg 1.2s"), so each package's result names its server.
func withLabel(line, label string) string {
	if (strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "FAIL\t")) && strings.HasSuffix(line, "\n") {
		return strings.TrimSuffix(line, "\n") + "\t[" + label + "]\n"
	}
	return line
}

// summarize copies the plain output of in to out and returns the counts.
func summarize(in io.Reader, out io.Writer, label string) (counts, error) {
	var c counts
	// Output of each running test, printed only if it fails.
	pending := map[string]*strings.Builder{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go vet or the go command itself): pass it on.
			fmt.Fprintln(out, string(line))
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			c.pkgFailed = true
		case e.Test == "":
			// "PASS" is the test binary's own verbose closing line; plain
			// go test prints only the package line after it.
			if e.Action == "output" && e.Output != "PASS\n" {
				fmt.Fprint(out, withLabel(e.Output, label))
			}
			if e.Action == "fail" {
				c.pkgFailed = true
			}
		case e.Action == "output":
			b := pending[key]
			if b == nil {
				b = &strings.Builder{}
				pending[key] = b
			}
			b.WriteString(e.Output)
		case e.Action == "pass", e.Action == "skip", e.Action == "fail":
			if e.Action != "skip" && !strings.Contains(e.Test, "/") {
				c.tests = append(c.tests, timed{e.Test + " (" + shortPackage(e.Package) + ")", e.Elapsed})
			}
			switch e.Action {
			case "pass":
				c.passed++
			case "skip":
				c.skipped++
			case "fail":
				c.failed++
				if b := pending[key]; b != nil {
					fmt.Fprint(out, b.String())
				}
			}
			delete(pending, key)
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	fmt.Fprintf(out, "%s: %d passed, %d failed, %d skipped\n", label, c.passed, c.failed, c.skipped)
	if len(c.tests) > 0 {
		slices.SortStableFunc(c.tests, func(a, b timed) int { return cmp.Compare(b.elapsed, a.elapsed) })
		var names []string
		for _, t := range c.tests[:min(slowestShown, len(c.tests))] {
			names = append(names, fmt.Sprintf("%s %.1fs", t.name, t.elapsed))
		}
		fmt.Fprintf(out, "%s: slowest: %s\n", label, strings.Join(names, ", "))
	}
	return c, nil
}

// shortPackage is a package's import path without the module's.
func shortPackage(path string) string {
	if rest, ok := strings.CutPrefix(path, "github.com/lockgen/lockgen/"); ok {
		return rest
	}
	return path
}
