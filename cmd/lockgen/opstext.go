package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockgen/lockgen/runtime/ops"
)

// The operator commands' text forms: tables for people. -json prints the
// API's documents instead, for scripts.

// stamp formats a database time for people: UTC, to the millisecond.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000") + " UTC"
}

// count prints a count, "+" marking a lower bound: when one count of a
// queue (or a lock's rows) stopped at the cap, the others were read from
// the capped rows too, so each is at least what it says.
func count(n int64, exact bool) string {
	if !exact {
		return fmt.Sprintf("%d+", n)
	}
	return fmt.Sprint(n)
}

// table prints aligned columns, without the padding an empty last column
// leaves at the end of a line.
func table(w io.Writer, header string, rows [][]string) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
}

func writeStatus(w io.Writer, st *ops.Status) {
	fmt.Fprintf(w, "database clock %s\n\nLEADERS\n", stamp(&st.Time))
	if len(st.Leaders) == 0 {
		fmt.Fprintln(w, "(no leader lock is held)")
	} else {
		var rows [][]string
		for _, h := range st.Leaders {
			rows = append(rows, []string{h.Lock, h.Owner, fmt.Sprint(h.Token), timeLeft(h)})
		}
		table(w, "LOCK\tOWNER\tTOKEN\tTIME LEFT", rows)
	}
	fmt.Fprintln(w, "\nLOCKS")
	if len(st.Locks) == 0 {
		fmt.Fprintln(w, "(none declared)")
	} else {
		var rows [][]string
		for _, l := range st.Locks {
			kind := "one row"
			if l.Keyed {
				kind = "keyed"
			}
			if l.Leader {
				kind = "leader"
			}
			rows = append(rows, []string{l.Name, l.Strategy, kind, count(l.Held, l.Exact)})
		}
		table(w, "LOCK\tSTRATEGY\tKIND\tHELD", rows)
	}
	fmt.Fprintln(w, "\nQUEUES")
	if len(st.Queues) == 0 {
		fmt.Fprintln(w, "(none declared)")
	} else {
		var rows [][]string
		for _, q := range st.Queues {
			c := q.Counts
			paused := "no"
			if q.Paused {
				paused = "since " + stamp(q.PausedAt)
			}
			n := func(v int64) string { return count(v, c.Exact) }
			rows = append(rows, []string{q.Name, paused, n(c.Due), n(c.Scheduled), n(c.Retrying), n(c.Running), n(c.Orphaned), n(c.Discarded)})
		}
		table(w, "QUEUE\tPAUSED\tDUE\tSCHEDULED\tRETRYING\tRUNNING\tORPHANED\tDISCARDED", rows)
	}
	if len(st.Schedules) > 0 {
		fmt.Fprintln(w, "\nSCHEDULES")
		var rows [][]string
		for _, s := range st.Schedules {
			cron := s.Cron
			if s.Timezone != "" && s.Timezone != "UTC" {
				cron += " (" + s.Timezone + ")"
			}
			last := "-"
			if s.LastTick != nil {
				last = fmt.Sprintf("%s %s (run %d)", stamp(s.LastTick), s.LastState, s.LastRun)
			}
			rows = append(rows, []string{s.Job, cron, stamp(&s.Next), last})
		}
		table(w, "JOB\tSCHEDULE\tNEXT TICK\tNEWEST TICK", rows)
	}
}

func timeLeft(h ops.Holding) string {
	if h.TimeLeftMS == nil {
		return "until released"
	}
	return (time.Duration(*h.TimeLeftMS) * time.Millisecond).String()
}

func writeRuns(w io.Writer, page *ops.RunPage, f ops.RunsFilter) {
	if len(page.Items) == 0 {
		fmt.Fprintln(w, "(no runs)")
	} else {
		var rows [][]string
		for _, r := range page.Items {
			lastErr := r.LastError
			if i := strings.IndexByte(lastErr, '\n'); i >= 0 {
				lastErr = lastErr[:i]
			}
			if len(lastErr) > 60 {
				lastErr = lastErr[:57] + "..."
			}
			rows = append(rows, []string{fmt.Sprint(r.ID), r.Job, r.Queue, r.State, fmt.Sprintf("%d/%d", r.Attempt, r.MaxAttempts), stamp(&r.RunAt), r.Worker, lastErr})
		}
		table(w, "ID\tJOB\tQUEUE\tSTATE\tATTEMPT\tRUN AT\tWORKER\tLAST ERROR", rows)
	}
	if page.Next != "" {
		args := []string{"lockgen runs"}
		for _, kv := range [][2]string{{"job", f.Job}, {"queue", f.Queue}, {"state", f.State}} {
			if kv[1] != "" {
				args = append(args, "-"+kv[0], kv[1])
			}
		}
		if f.Limit != ops.DefaultLimit {
			args = append(args, "-limit", fmt.Sprint(f.Limit))
		}
		fmt.Fprintf(w, "next page: %s -after %s\n", strings.Join(args, " "), page.Next)
	}
}

func writeRun(w io.Writer, r *ops.Run) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	line("run", fmt.Sprint(r.ID))
	line("job", r.Job)
	line("queue", r.Queue)
	line("state", r.State)
	line("priority", fmt.Sprint(r.Priority))
	line("attempt", fmt.Sprintf("%d of %d", r.Attempt, r.MaxAttempts))
	line("timeout", (time.Duration(r.TimeoutMS) * time.Millisecond).String())
	line("run at", stamp(&r.RunAt))
	if r.ScheduledAt != nil {
		line("tick", stamp(r.ScheduledAt))
	}
	line("created", stamp(&r.CreatedAt))
	if r.Deadline != nil {
		line("deadline", stamp(r.Deadline))
	}
	if r.FinishedAt != nil {
		line("finished", stamp(r.FinishedAt))
	}
	line("worker", r.Worker)
	line("unique key", r.UniqueKey)
	_ = tw.Flush()
	if r.LastError != "" {
		fmt.Fprintf(w, "last error:\n  %s\n", strings.ReplaceAll(r.LastError, "\n", "\n  "))
	}
	var args bytes.Buffer
	if json.Indent(&args, r.Args, "  ", "  ") != nil {
		args.Reset()
		args.Write(r.Args)
	}
	fmt.Fprintf(w, "args:\n  %s\n", args.String())
	if len(r.History) > 0 {
		var table bytes.Buffer
		hw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
		for _, e := range r.History {
			at := e.At
			fmt.Fprintf(hw, "  %s\t%s\t%s\t%s\t%s\n", stamp(&at), e.Event, attemptOf(e.Attempt), e.Worker, firstLine(e.Error))
		}
		_ = hw.Flush()
		fmt.Fprintf(w, "history:\n")
		for _, line := range strings.SplitAfter(table.String(), "\n") {
			// Empty trailing cells (no attempt, worker or error) pad
			// nothing at the end of a line.
			if trimmed := strings.TrimRight(line, " \n"); trimmed != "" {
				fmt.Fprintln(w, trimmed)
			}
		}
	}
}

// attemptOf names attempt n in a history line ("" for none yet).
func attemptOf(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("attempt %d", n)
}

// firstLine is the first line of s, marked when more follow.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
