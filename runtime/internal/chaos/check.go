package chaos

import (
	"fmt"
	"sort"
	"time"
)

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
	// lost is the first check that said the holding was over.
	lost *Event
	// ended says the section or handler returned, at endT, with endErr
	// ("" for nil).
	ended  bool
	endT   int64
	endErr string
}

// succeeded reports whether s is a handler call that returned nil.
func (s *section) succeeded() bool { return s.ended && s.endErr == "" && s.lost == nil }

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
			if !e.OK && s.lost == nil {
				s.lost = e
			}
			if e.OK {
				if s.first == nil {
					s.first = e
				}
				s.last = e
			}
		case KindEnd:
			if s := sections[id]; s != nil {
				s.ended, s.endT, s.endErr = true, e.T1, e.Err
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

	checkRuns(events, order, f, &r, at, add)
	checkTicks(events, f, &r, add)
	newTimeline(f).checkHandlers(order, f, &r, at, add)
	for _, s := range f.Strands {
		add("stranded session: %s, longer than the bound of %s on a session whose client is gone", s, f.StrandBound)
	}
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
