package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/lockgen/lockgen/runtime/probe"
)

// Severity of a Check.
type Severity string

// Severities. Only Fail makes Result.OK false.
const (
	OK   Severity = "ok"
	Note Severity = "note"
	Fail Severity = "FAIL"
)

// Check is one finding, in plain words.
type Check struct {
	Severity Severity `json:"severity"`
	Topic    string   `json:"topic"`
	Message  string   `json:"message"`
}

// Use is one thing the spec declares (a lock, the jobs) and whether it can
// run on the server.
type Use struct {
	Name     string `json:"name"`
	Strategy string `json:"strategy"`
	Works    bool   `json:"works"`
	Why      string `json:"why,omitempty"`
}

// Result is the doctor's report.
type Result struct {
	// Addr and User say where doctor connected, never with a password.
	Addr     string        `json:"addr"`
	Server   string        `json:"server"`
	Report   *probe.Report `json:"probe"`
	SpecFile string        `json:"spec,omitempty"`
	Uses     []Use         `json:"uses"`
	Checks   []Check       `json:"checks"`
}

// OK tells whether everything the spec declares can run: no Check failed.
func (r *Result) OK() bool {
	for _, c := range r.Checks {
		if c.Severity == Fail {
			return false
		}
	}
	return true
}

func (r *Result) add(s Severity, topic, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Severity: s, Topic: topic, Message: fmt.Sprintf(format, args...)})
}

// WriteText prints the result for people: the server, what the spec
// declares and whether it works there, then every check, failures first.
func (r *Result) WriteText(w io.Writer) {
	p := r.Report
	cluster := "not a cluster node"
	if p.Cluster != probe.NoCluster {
		cluster = "a " + string(p.Cluster) + " node"
	}
	mode := "read-write"
	if p.ReadOnly {
		mode = "READ-ONLY"
	}
	loc := p.Location
	if !p.ParseTime {
		loc = "(no parseTime)"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "server\t%s (VERSION() %q, %s), %s, %s\n", r.Server, p.Version, p.Comment, cluster, mode)
	fmt.Fprintf(tw, "connection\t%s as %s, database %q\n", r.Addr, p.User, p.Database)
	fmt.Fprintf(tw, "settings\tparseTime=%t, loc=%s, time_zone %s, isolation %s\n", p.ParseTime, loc, p.TimeZone, p.Isolation)
	tw.Flush()

	what := "every strategy and the jobs (no spec given)"
	if r.SpecFile != "" {
		what = "what " + r.SpecFile + " declares"
	}
	fmt.Fprintf(w, "\n%s:\n", what)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, u := range r.Uses {
		verdict := "works"
		if !u.Works {
			verdict = "REFUSED: " + u.Why
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", u.Name, u.Strategy, verdict)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nchecks:\n")
	checks := slices.Clone(r.Checks)
	order := map[Severity]int{Fail: 0, Note: 1, OK: 2}
	slices.SortStableFunc(checks, func(a, b Check) int { return order[a.Severity] - order[b.Severity] })
	for _, c := range checks {
		fmt.Fprintf(w, "  %-4s  %s: %s\n", c.Severity, c.Topic, c.Message)
	}
	fails := 0
	for _, c := range checks {
		if c.Severity == Fail {
			fails++
		}
	}
	if fails == 0 {
		fmt.Fprintf(w, "\nresult: everything %s can run here\n", strings.TrimPrefix(what, "what "))
	} else {
		fmt.Fprintf(w, "\nresult: %d problem(s), marked FAIL above\n", fails)
	}
}

// WriteJSON prints the result as one JSON object, with "ok" added.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		OK bool `json:"ok"`
		*Result
	}{r.OK(), r})
}
