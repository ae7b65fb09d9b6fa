package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// RunRow is a row of the runs table as the checker reads it after a run.
type RunRow struct {
	ID    int64
	Job   string
	State string
	// Tick is a scheduled run's tick (UTC); zero otherwise.
	Tick time.Time
}

// Facts is what the checker reads besides the workers' histories: what
// the database holds at the end and what the controller saw.
type Facts struct {
	// Guarded are the tokens of the accepted guarded writes, in the
	// order the table's AUTO_INCREMENT gave them; RowWrites those of the
	// writes made in row holdings' transactions.
	Guarded, RowWrites []int64
	// Windows are the locks whose holders learn of a loss only after
	// the server dropped it, with how long after at most: a session
	// holder at its next check (the server frees a session lock the
	// moment the connection breaks). A negative window exempts a lock
	// from the checks of beliefs: a row holder learns at the release,
	// and its writes are checked instead (RowWrites).
	Windows map[string]time.Duration
	// Runs are the runs table's rows.
	Runs []RunRow
	// TickJob names the scheduled job, TickFrom and TickTo the window
	// (by the database clock) whose every tick must have run exactly
	// once: from a few ticks after the first worker started to the start
	// of the quiet phase.
	TickJob          string
	TickFrom, TickTo time.Time
	TickEvery        time.Duration
	// Singletons are the jobs whose runs must never overlap.
	Singletons []string
	// Stuck are the locks nobody could take within their TTL plus a
	// margin once every worker was dead, with what the attempt said.
	Stuck []string
	// Crashes are worker exits not caused by the controller (panics,
	// fatal errors, data races), with the output's first line.
	Crashes []string
}

// Report is the checker's verdict.
type Report struct {
	// Counts counts events by kind, checks by result, and the sections,
	// handler calls and runs checked.
	Counts map[string]int
	// Violations are the safety and liveness violations found, each a
	// sentence naming the processes and times involved.
	Violations []string
}

// section is one critical section, leader term or handler call, with
// the checks made in it.
type section struct {
	proc, inc, sec int
	obj, key       string
	token          int64
	run, tick      int64
	start, entry   int64 // T0 and T1 of the hold or handle event
	checks         []Event
	// first and last nil checks: the section believed it held from
	// first.T1 to last.T0 at least.
	first, last *Event
}

func (s *section) name() string {
	k := s.obj
	if s.key != "" {
		k += "[" + s.key + "]"
	}
	if s.run != 0 {
		k = fmt.Sprintf("%s run %d claim %d", s.obj, s.run, s.token)
	} else {
		k = fmt.Sprintf("%s token %d", k, s.token)
	}
	return fmt.Sprintf("p%d.%d#%d (%s)", s.proc, s.inc, s.sec, k)
}

// Check reads a run's history and facts and returns every violation.
// Times in the history are CLOCK_MONOTONIC; base is subtracted from them
// in messages.
func Check(events []Event, f Facts, base int64) Report {
	r := Report{Counts: map[string]int{}}
	at := func(ns int64) string { return Dur(ns - base) }
	sections := map[[3]int]*section{}
	var order []*section
	for i := range events {
		e := &events[i]
		r.Counts["event "+e.Kind]++
		id := [3]int{e.Proc, e.Inc, e.Sec}
		switch e.Kind {
		case KindHold, KindHandle:
			s := &section{proc: e.Proc, inc: e.Inc, sec: e.Sec, obj: e.Obj, key: e.Key, token: e.Token,
				run: e.Run, tick: e.Tick, start: e.T0, entry: e.T1}
			sections[id] = s
			order = append(order, s)
		case KindCheck:
			if e.OK {
				r.Counts["checks nil"]++
			} else {
				r.Counts["checks lost"]++
			}
			s := sections[id]
			if s == nil {
				continue
			}
			s.checks = append(s.checks, *e)
			if e.OK {
				if s.first == nil {
					s.first = e
				}
				s.last = e
			}
		case KindError:
			r.Counts["error "+e.What]++
		}
	}
	add := func(format string, args ...any) { r.Violations = append(r.Violations, fmt.Sprintf(format, args...)) }

	// Locks and leader terms, per lock and key; job handler calls per run.
	holdings := map[string][]*section{}
	for _, s := range order {
		if s.run != 0 {
			holdings[fmt.Sprintf("run %d", s.run)] = append(holdings[fmt.Sprintf("run %d", s.run)], s)
			r.Counts["handler calls"]++
			continue
		}
		holdings[s.obj+"\x00"+s.key] = append(holdings[s.obj+"\x00"+s.key], s)
		r.Counts["sections"]++
	}
	keys := make([]string, 0, len(holdings))
	for k := range holdings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hs := holdings[k]
		window := f.Windows[hs[0].obj]
		if hs[0].run != 0 {
			window = 0
		}
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].token < hs[j].token })
		for i := 1; i < len(hs); i++ {
			if hs[i].token == hs[i-1].token {
				add("token reused: %s and %s got the same token", hs[i-1].name(), hs[i].name())
			}
		}
		// A holding that made a nil check after a holding with a higher
		// token (a later acquisition or claim) was entered believed it
		// held the lock while the other held it.
		minLater := int64(1<<63 - 1)
		var minSec *section
		for i := len(hs) - 1; i >= 0; i-- {
			a := hs[i]
			if window >= 0 && minSec != nil && a.token < minSec.token && a.last != nil && a.last.T0 > minLater+int64(window) {
				add("two holders: %s checked %s at %s and got nil, after %s had been entered at %s",
					a.name(), a.last.What, at(a.last.T0), minSec.name(), at(minLater))
			}
			if a.entry < minLater {
				minLater, minSec = a.entry, a
			}
		}
		// Tokens rise with the order of acquisition: a holding entered
		// before another's acquire call was made has a lower token.
		for _, a := range hs {
			for _, b := range hs {
				if a.entry < b.start && a.token >= b.token {
					add("token did not rise: %s was entered at %s, before %s began acquiring at %s, with a token not below it",
						a.name(), at(a.entry), b.name(), at(b.start))
				}
			}
		}
		if window >= 0 {
			overlaps(hs, window, at, add)
		}
	}

	// Singleton jobs: no two handler calls believe at once, whatever run.
	for _, job := range f.Singletons {
		var hs []*section
		for _, s := range order {
			if s.run != 0 && s.obj == job {
				hs = append(hs, s)
			}
		}
		overlaps(hs, 0, at, add)
	}

	// Guarded writes and row holdings' writes: accepted tokens never go
	// back.
	for _, w := range []struct {
		what   string
		tokens []int64
	}{{"guarded write", f.Guarded}, {"row holding's write", f.RowWrites}} {
		var maxTok int64
		for i, tok := range w.tokens {
			if tok < maxTok {
				add("%s %d accepted with token %d after token %d had been accepted", w.what, i+1, tok, maxTok)
			}
			maxTok = max(maxTok, tok)
		}
		r.Counts[w.what+"s"] = len(w.tokens)
	}

	checkRuns(events, f, &r, add)
	for _, s := range f.Stuck {
		add("stuck lock: %s", s)
	}
	for _, c := range f.Crashes {
		add("worker crashed: %s", c)
	}
	return r
}

// overlaps adds a violation for any two sections whose believed
// intervals (first nil check to last nil check) surely overlap by more
// than window.
func overlaps(hs []*section, window time.Duration, at func(int64) string, add func(string, ...any)) {
	var live []*section
	for _, s := range hs {
		if s.first != nil {
			live = append(live, s)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].first.T1 < live[j].first.T1 })
	for i, a := range live {
		for _, b := range live[i+1:] {
			if b.first.T1+int64(window) >= a.last.T0 {
				break
			}
			if a.proc == b.proc && a.inc == b.inc && a.sec == b.sec {
				continue
			}
			add("overlap: %s believed it held from %s to %s, %s from %s to %s",
				a.name(), at(a.first.T1), at(a.last.T0), b.name(), at(b.first.T1), at(b.last.T0))
		}
	}
}

// checkRuns checks the jobs: every enqueued run finished, every tick of
// the window ran exactly once.
func checkRuns(events []Event, f Facts, r *Report, add func(string, ...any)) {
	rows := map[int64]RunRow{}
	for _, row := range f.Runs {
		rows[row.ID] = row
		r.Counts["runs "+row.Job+" "+row.State]++
	}
	enqueued := map[int64]bool{}
	for _, e := range events {
		if e.Kind == KindEnqueue {
			enqueued[e.Run] = true
		}
	}
	ids := make([]int64, 0, len(enqueued))
	for id := range enqueued {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		row, ok := rows[id]
		switch {
		case !ok:
			add("enqueued run %d is not in the runs table", id)
		case row.State != "completed":
			add("enqueued run %d (%s) never finished: state %s", id, row.Job, row.State)
		}
	}
	for _, row := range f.Runs {
		if row.Job != f.TickJob && row.State != "completed" && !enqueued[row.ID] {
			add("run %d (%s, enqueued with an unknown outcome) never finished: state %s", row.ID, row.Job, row.State)
		}
	}
	if f.TickJob == "" {
		return
	}
	// Ticks: by the history (instants, whatever a node's loc) and by the
	// table.
	runsOfTick := map[int64]map[int64]bool{}
	for _, e := range events {
		if e.Kind == KindHandle && e.Obj == f.TickJob {
			if runsOfTick[e.Tick] == nil {
				runsOfTick[e.Tick] = map[int64]bool{}
			}
			runsOfTick[e.Tick][e.Run] = true
		}
	}
	for tick, runs := range runsOfTick {
		if len(runs) > 1 {
			add("tick %s ran as %d runs: %v", time.UnixMicro(tick).UTC().Format(time.RFC3339Nano), len(runs), keysOf(runs))
		}
	}
	completed := map[int64]int{}
	for _, row := range f.Runs {
		if row.Job == f.TickJob && row.State == "completed" {
			completed[row.Tick.UnixMicro()]++
		}
	}
	var missing []string
	n := 0
	for t := f.TickFrom.Truncate(f.TickEvery).Add(f.TickEvery); t.Before(f.TickTo); t = t.Add(f.TickEvery) {
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
	}
	r.Counts["ticks in the window"] = n
	if len(missing) > 0 {
		add("%d of %d ticks of the window never completed: %s", len(missing), n, strings.Join(missing, " "))
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
