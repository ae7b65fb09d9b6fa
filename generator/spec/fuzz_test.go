package spec

import (
	"errors"
	"strings"
	"testing"
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
	if s.Version != 1 || s.Package == "" || s.Out == "" || s.Migrations.Dir == "" || s.TablePrefix == "" || len(s.Locks) == 0 {
		t.Fatalf("incomplete spec %+v", s)
	}
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
