package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// checkRuns checks the jobs: every enqueued run finished (a one-attempt
// run may end discarded when none of its handler calls succeeded), and no
// run whose handler returned nil ended other than completed.
func checkRuns(events []Event, order []*section, f Facts, r *Report, at func(int64) string, add func(string, ...any)) {
	rows := map[int64]RunRow{}
	for _, row := range f.Runs {
		rows[row.ID] = row
		r.Counts["runs "+row.Job+" "+row.State]++
	}
	tl := newTimeline(f)
	// successes are the handler calls that returned nil and whose process
	// lived long enough, fault-free, to record the outcome.
	successes := map[int64]*section{}
	for _, s := range order {
		if s.run != 0 && s.succeeded() && !tl.killedBeforeRecording(s) {
			if successes[s.run] == nil {
				successes[s.run] = s
			}
		}
	}
	enqueued := map[int64]bool{}
	for _, e := range events {
		if e.Kind == KindEnqueue {
			enqueued[e.Run] = true
		}
	}
	finished := func(row RunRow, how string) {
		if row.State == "completed" {
			return
		}
		if s := successes[row.ID]; s != nil {
			add("run %d (%s) ended %s although its handler succeeded: %s returned nil at %s",
				row.ID, row.Job, row.State, s.name(), at(s.endT))
			return
		}
		if slices.Contains(f.OneAttempt, row.Job) && row.State != "available" && row.State != "running" {
			r.Counts["runs "+row.Job+" ended "+row.State+" with no handler call that succeeded"]++
			return
		}
		msg := fmt.Sprintf("%s run %d (%s) never finished: state %s", how, row.ID, row.Job, row.State)
		if f.Locked[row.ID] {
			msg += ", and an open transaction still held its row locked (a claim whose client is gone?)"
		}
		add("%s", msg)
	}
	ids := make([]int64, 0, len(enqueued))
	for id := range enqueued {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		row, ok := rows[id]
		if !ok {
			add("enqueued run %d is not in the runs table", id)
			continue
		}
		finished(row, "enqueued")
	}
	for _, row := range f.Runs {
		if row.Job != f.TickJob && row.Job != f.PrunedTickJob && !enqueued[row.ID] {
			finished(row, "unacknowledged")
		}
	}
}

// checkTicks checks the scheduled jobs: no tick ran as two runs (compared
// as instants, whatever a node's loc), no tick has a run in the table
// other than the one that ran it, and every tick of the window ran once:
// completed once in the table (TickJob), or handled successfully
// (PrunedTickJob, whose finished runs are pruned).
func checkTicks(events []Event, f Facts, r *Report, add func(string, ...any)) {
	for _, job := range []string{f.TickJob, f.PrunedTickJob} {
		if job == "" {
			continue
		}
		runsOfTick := map[int64]map[int64]bool{}
		for _, e := range events {
			if e.Kind == KindHandle && e.Obj == job {
				if runsOfTick[e.Tick] == nil {
					runsOfTick[e.Tick] = map[int64]bool{}
				}
				runsOfTick[e.Tick][e.Run] = true
			}
		}
		var twice []string
		for tick, runs := range runsOfTick {
			if len(runs) > 1 {
				twice = append(twice, fmt.Sprintf("tick %s of %s ran as %d runs: %v", time.UnixMicro(tick).UTC().Format(time.RFC3339Nano), job, len(runs), keysOf(runs)))
			}
		}
		sort.Strings(twice)
		for _, t := range twice {
			add("%s", t)
		}
		r.Counts["ticks run twice "+job] = len(twice)
		for _, row := range f.Runs {
			runs := runsOfTick[row.Tick.UnixMicro()]
			if row.Job == job && len(runs) > 0 && !runs[row.ID] {
				add("tick %s of %s has run %d in the table, although runs %v ran it: it was inserted again after they were pruned",
					row.Tick.Format(time.RFC3339), job, row.ID, keysOf(runs))
			}
		}
		if job == f.TickJob {
			tableTicks(runsOfTick, f, r, add)
		} else {
			handledTicks(events, f, job, r, add)
		}
	}
}

// window calls fn for every tick of the checked window.
func window(f Facts, fn func(t time.Time)) {
	for t := f.TickFrom.Truncate(f.TickEvery).Add(f.TickEvery); t.Before(f.TickTo); t = t.Add(f.TickEvery) {
		fn(t)
	}
}

// tableTicks checks that every tick of the window completed exactly once
// in the table, with a handler call recorded.
func tableTicks(runsOfTick map[int64]map[int64]bool, f Facts, r *Report, add func(string, ...any)) {
	completed := map[int64]int{}
	for _, row := range f.Runs {
		if row.Job == f.TickJob && row.State == "completed" {
			completed[row.Tick.UnixMicro()]++
		}
	}
	var missing []string
	n := 0
	window(f, func(t time.Time) {
		n++
		switch c := completed[t.UnixMicro()]; {
		case c == 0:
			missing = append(missing, t.Format("15:04:05"))
		case c > 1:
			add("tick %s completed %d times", t.Format(time.RFC3339), c)
		}
		if len(runsOfTick[t.UnixMicro()]) == 0 && completed[t.UnixMicro()] > 0 {
			add("tick %s is completed in the table but no handler call was recorded", t.Format(time.RFC3339))
		}
	})
	r.Counts["ticks in the window"] = n
	if len(missing) > 0 {
		add("%d of %d ticks of the window never completed: %s", len(missing), n, strings.Join(missing, " "))
	}
}

// handledTicks checks that every tick of the window of job had a handler
// call that returned nil.
func handledTicks(events []Event, f Facts, job string, r *Report, add func(string, ...any)) {
	type id struct{ proc, inc, sec int }
	tickOf := map[id]int64{}
	ok := map[int64]bool{}
	for _, e := range events {
		switch {
		case e.Kind == KindHandle && e.Obj == job:
			tickOf[id{e.Proc, e.Inc, e.Sec}] = e.Tick
		case e.Kind == KindEnd && e.Err == "":
			if t, found := tickOf[id{e.Proc, e.Inc, e.Sec}]; found {
				ok[t] = true
			}
		}
	}
	var missing []string
	n := 0
	window(f, func(t time.Time) {
		n++
		if !ok[t.UnixMicro()] {
			missing = append(missing, t.Format("15:04:05"))
		}
	})
	r.Counts["ticks in the window "+job] = n
	if len(missing) > 0 {
		add("%d of %d ticks of %s in the window had no handler call that succeeded: %s", len(missing), n, job, strings.Join(missing, " "))
	}
}

func keysOf(m map[int64]bool) []int64 {
	var ks []int64
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}
