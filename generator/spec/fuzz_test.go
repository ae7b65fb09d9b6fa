package spec

import (
	"errors"
	"go/token"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/jobs"
)

// FuzzLoad checks that Load never panics, returns either a spec or an
// ErrorList, locates every error, and only returns specs that keep the
// promises of the Spec type.
func FuzzLoad(f *testing.F) {
	for _, tc := range goodSpecs {
		f.Add([]byte(tc.yaml))
	}
	for _, tc := range badSpecs {
		f.Add([]byte(tc.yaml))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Load("lockgen.yaml", data)
		if (s == nil) == (err == nil) {
			t.Fatalf("Load returned spec %v and error %v: want exactly one", s, err)
		}
		if err != nil {
			checkErrors(t, err)
			return
		}
		checkSpec(t, s)
	})
}

// checkErrors checks that err is a sorted ErrorList of located errors, each
// on one line.
func checkErrors(t *testing.T, err error) {
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error %T %q is not a non-empty ErrorList", err, err)
	}
	for i, e := range list {
		if e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" || e.File != "lockgen.yaml" {
			t.Fatalf("bad error %#v", e)
		}
		if strings.Contains(e.Error(), "\n") {
			t.Fatalf("error %q spans lines", e.Error())
		}
		if i > 0 {
			prev := list[i-1].Pos
			if prev.Line > e.Pos.Line || prev.Line == e.Pos.Line && prev.Col > e.Pos.Col {
				t.Fatalf("errors not sorted: %v before %v", prev, e.Pos)
			}
		}
	}
}

// checkSpec checks the invariants of a loaded spec.
func checkSpec(t *testing.T, s *Spec) {
	if s.Version != 1 || s.Package == "" || s.Out == "" || s.Migrations.Dir == "" || s.TablePrefix == "" || len(s.Locks)+len(s.Jobs) == 0 {
		t.Fatalf("incomplete spec %+v", s)
	}
	checkJobs(t, s)
	goNames := make(map[string]bool)
	methods := make(map[string]bool)
	for _, l := range s.Locks {
		switch {
		case !snakeCase.MatchString(l.Name) || l.GoName != CamelCase(l.Name):
			t.Fatalf("bad lock name %q / %q", l.Name, l.GoName)
		case goNames[l.GoName]:
			t.Fatalf("duplicate lock GoName %q", l.GoName)
		case l.Strategy != StrategyLease && l.Strategy != StrategySession && l.Strategy != StrategyRow:
			t.Fatalf("bad strategy %q", l.Strategy)
		case l.Leader && l.Key != nil:
			t.Fatalf("keyed leader %q", l.Name)
		case l.Leader && l.Strategy != StrategyLease:
			t.Fatalf("%s leader %q", l.Strategy, l.Name)
		case l.Strategy == StrategyRow && (l.TTL != 0 || l.RenewEvery != 0 || l.Wait < 0 || l.Wait > maxWait):
			t.Fatalf("bad row durations %+v", l)
		case l.Strategy != StrategyRow && (l.TTL < minTTL || l.TTL > maxTTL || l.RenewEvery <= 0 || l.RenewEvery >= l.TTL || l.Wait < 0 || l.Wait > maxWait):
			t.Fatalf("bad durations %+v", l)
		case l.Pos.Line < 1 || l.Pos.Col < 1:
			t.Fatalf("bad position %+v", l)
		case l.Key != nil && (l.Key.Type == "" || paramProblem(l.Key.GoName) != "" || l.Key.GoName != LowerCamelCase(l.Key.Name)):
			t.Fatalf("bad key %+v", l.Key)
		}
		goNames[l.GoName] = true
		for _, m := range l.Methods() {
			if methods[m] {
				t.Fatalf("two locks generate the method %s", m)
			}
			methods[m] = true
		}
	}
}

// checkJobs checks the invariants of a loaded spec's jobs and queues.
func checkJobs(t *testing.T, s *Spec) {
	if len(s.Jobs) == 0 && len(s.Queues) > 0 {
		t.Fatalf("queues without jobs %+v", s.Queues)
	}
	queues := make(map[string]bool)
	for _, q := range s.Queues {
		if !snakeCase.MatchString(q.Name) || queues[q.Name] || q.Concurrency < minQueueConcurrent || q.Concurrency > maxQueueConcurrent {
			t.Fatalf("bad queue %+v", q)
		}
		queues[q.Name] = true
	}
	goNames := make(map[string]bool)
	for _, j := range s.Jobs {
		switch {
		case !snakeCase.MatchString(j.Name) || j.GoName != CamelCase(j.Name):
			t.Fatalf("bad job name %q / %q", j.Name, j.GoName)
		case j.Pos.Line < 1 || j.Pos.Col < 1:
			t.Fatalf("bad position %+v", j)
		case !queues[j.Queue]:
			t.Fatalf("job %q in undeclared queue %q", j.Name, j.Queue)
		case j.Timeout < minJobTimeout || j.Timeout > maxJobTimeout || j.Retention < minRetention || j.Retention > maxRetention:
			t.Fatalf("bad durations %+v", j)
		case j.BackoffInitial < minBackoff || j.BackoffMax < j.BackoffInitial || j.BackoffMax > maxBackoff:
			t.Fatalf("bad backoff %+v", j)
		case j.MaxAttempts < minMaxAttempts || j.MaxAttempts > maxMaxAttempts || j.Priority < minPriority || j.Priority > maxPriority:
			t.Fatalf("bad numbers %+v", j)
		case j.Concurrency != 0 && j.Concurrency != 1:
			t.Fatalf("bad concurrency %+v", j)
		case !j.Scheduled() && (j.Timezone != "" || j.CatchUp != "" || j.MinInterval != 0):
			t.Fatalf("schedule settings without a schedule %+v", j)
		case j.Args != nil && len(j.Args) == 0:
			t.Fatalf("empty non-nil args %+v", j)
		}
		if j.Scheduled() {
			checkSchedule(t, j)
		}
		for _, name := range j.Names() {
			if goNames[name] {
				t.Fatalf("two jobs generate %s", name)
			}
			goNames[name] = true
		}
		checkArgs(t, j)
	}
}

// checkSchedule checks a scheduled job's schedule settings.
func checkSchedule(t *testing.T, j Job) {
	if _, err := jobs.ParseSchedule(j.Schedule, j.Timezone); err != nil || strings.Contains(j.Schedule, "TZ=") {
		t.Fatalf("bad schedule %q in %q: %v", j.Schedule, j.Timezone, err)
	}
	if _, err := time.LoadLocation(j.Timezone); err != nil || j.Timezone == "" || j.Timezone == "Local" {
		t.Fatalf("bad timezone %q", j.Timezone)
	}
	if j.CatchUp != CatchUpNone && j.CatchUp != CatchUpOne && j.CatchUp != CatchUpAll {
		t.Fatalf("bad catch_up %q", j.CatchUp)
	}
	if every, ok := strings.CutPrefix(j.Schedule, cronEvery); ok {
		if d, err := time.ParseDuration(every); err != nil || d < time.Second || d%time.Second != 0 || j.MinInterval > d {
			t.Fatalf("bad @every schedule %+v", j)
		}
	}
	if j.MinInterval < 0 || j.MinInterval > maxMinInterval {
		t.Fatalf("bad min_interval %+v", j)
	}
}

// checkArgs checks a job's args.
func checkArgs(t *testing.T, j Job) {
	goNames := make(map[string]bool)
	for _, a := range j.Args {
		if !snakeCase.MatchString(a.Name) || a.GoName != CamelCase(a.Name) || goNames[a.GoName] || a.Pos.Line < 1 || a.Pos.Col < 1 {
			t.Fatalf("bad arg %+v", a)
		}
		goNames[a.GoName] = true
		if a.Type == ArgJSON {
			if !validImportPath(a.Import) || !token.IsExported(a.GoType) || !token.IsIdentifier(a.GoType) {
				t.Fatalf("bad json arg %+v", a)
			}
			continue
		}
		if !slices.Contains(argTypeNames, a.Type) || a.GoType == "" || a.Import != "" {
			t.Fatalf("bad arg type %+v", a)
		}
	}
}
