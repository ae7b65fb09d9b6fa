package spec

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/lockgen/lockgen/runtime"
)

// lockFields are the keys of a lock.
var lockFields = []field{
	{name: "name", required: true, example: "name: master"},
	{name: "strategy", example: "strategy: lease"},
	{name: "ttl", example: "ttl: 3s"}, // required unless strategy is row (checked in timing)
	{name: "renew_every", example: "renew_every: 1s"},
	{name: "wait", example: "wait: 5s"},
	{name: "key", example: "key: {name: order_id, type: int64}"},
	{name: "leader", example: "leader: true"},
	{name: "wait_mode", example: "wait_mode: server"},
	{name: "idle_timeout", example: "idle_timeout: 1m"}, // strategy row only (checked in timing)
}

// waitModes are the values of a lease lock's wait_mode.
var waitModes = []string{WaitModeServer, WaitModePoll}

// keyFields are the keys of a lock's key.
var keyFields = []field{
	{name: "name", required: true, example: "name: order_id"},
	{name: "type", required: true, example: "type: int64"},
}

// strategies are the supported lock strategies; plannedStrategies are
// designed but not built yet.
var (
	strategies        = []string{StrategyLease, StrategySession, StrategyRow}
	plannedStrategies = []string{}
)

// keyTypes are the supported Go types of lock keys.
var keyTypes = []string{"int64", "string", "uuid"}

// Duration limits of a lock.
const (
	minTTL  = runtime.MinTTL
	maxTTL  = 24 * time.Hour
	maxWait = time.Hour
)

// nameSet remembers the names of one kind (locks, jobs) seen so far, to
// report duplicates and names that collide in Go.
type nameSet struct {
	byName   map[string]*yaml.Node // name -> its value node
	byGoName map[string]*yaml.Node // GoName -> the value node of its name
}

// newNameSet returns an empty nameSet.
func newNameSet() *nameSet {
	return &nameSet{byName: map[string]*yaml.Node{}, byGoName: map[string]*yaml.Node{}}
}

// locks validates the list of locks.
func (l *loader) locks(v value) []Lock {
	items, ok := l.list(v)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		l.errorf(v.node, "declare at least one, e.g. "+v.field.example, "locks is empty")
		return nil
	}
	seen := newNameSet()
	locks := make([]Lock, 0, len(items))
	for _, item := range items {
		locks = append(locks, l.lock(resolve(item), seen))
	}
	l.methodClashes(locks, seen)
	return locks
}

// methodClashes reports locks that would generate a method of the same name
// as an earlier lock, e.g. the leader "master" (IsMasterLeader) and the
// leader "is_master" (MasterLeader is IsMasterLeader too). Distinct GoNames
// never clash on the With/Try/Acquire/Holder methods alone; the leader
// methods can. Each lock is reported once, at its name.
func (l *loader) methodClashes(locks []Lock, seen *nameSet) {
	owner := map[string]Lock{} // method -> the first lock generating it
	for _, lk := range locks {
		if lk.Name == "" {
			continue
		}
		reported := false
		for _, m := range lk.Methods() {
			first, clash := owner[m]
			if !clash {
				owner[m] = lk
				continue
			}
			if !reported {
				l.errorf(seen.byName[lk.Name], fmt.Sprintf("%q is at line %d; rename one of them", first.Name, seen.byName[first.Name].Line),
					"locks %q and %q both generate the method %s", first.Name, lk.Name, m)
				reported = true
			}
		}
	}
}

// lock validates one lock and applies its defaults.
func (l *loader) lock(n *yaml.Node, seen *nameSet) Lock {
	lk := Lock{Pos: pos(n), Strategy: StrategyLease}
	fields, ok := l.mapping(n, "each lock", "- {name: master, ttl: 3s}", "", lockFields)
	if !ok {
		return lk
	}
	if v, ok := fields["name"]; ok {
		lk.Name, lk.GoName = l.uniqueName(v, seen, "lock")
	}
	if v, ok := fields["strategy"]; ok {
		lk.Strategy = l.strategy(v)
	}
	if v, ok := fields["key"]; ok {
		lk.Key = l.key(v)
	}
	if v, ok := fields["leader"]; ok {
		lk.Leader = l.leader(v, fields)
	}
	l.timing(&lk, n, fields)
	lk.WaitMode = l.waitMode(lk, fields)
	return lk
}

// waitMode checks a lock's wait_mode and applies its default: server for an
// unkeyed lease lock that waits, poll for other lease locks (a keyed lock
// would pin a connection per held key). It is for lease locks only, and
// only for one that anybody waits for.
func (l *loader) waitMode(lk Lock, fields map[string]value) string {
	v, declared := fields["wait_mode"]
	waits := lk.Wait > 0 || lk.Leader
	if !declared {
		if lk.Strategy == StrategyLease && lk.Key == nil && waits {
			return WaitModeServer
		}
		if lk.Strategy == StrategyLease {
			return WaitModePoll
		}
		return ""
	}
	mode, ok := l.text(v)
	if !ok {
		return ""
	}
	switch {
	case !slices.Contains(waitModes, mode):
		l.errorf(v.node, choiceHint(mode, waitModes, "valid wait modes"), "unknown wait_mode %q", mode)
	case lk.Strategy == StrategySession || lk.Strategy == StrategyRow:
		l.errorf(v.key, "remove wait_mode", "a %s lock always waits on the server; wait_mode is for strategy lease", lk.Strategy)
	case mode == WaitModeServer && !waits:
		l.errorf(v.key, "add wait (e.g. wait: 5s) or remove wait_mode",
			"wait_mode server without wait or leader: nobody waits for this lock, so its holdings would pin a connection for nothing")
	default:
		return mode
	}
	return ""
}

// uniqueName validates the name of a lock or job (what), which must be
// unique among its kind, also once converted to Go, and returns it and its
// GoName.
func (l *loader) uniqueName(v value, seen *nameSet, what string) (name, goName string) {
	name = l.snakeName(v, what+" name")
	if name == "" {
		return "", ""
	}
	goName = CamelCase(name)
	if first, dup := seen.byName[name]; dup {
		l.errorf(v.node, fmt.Sprintf("it is first declared at line %d; %s names must be unique", first.Line, what),
			"duplicate %s name %q", what, name)
		return "", ""
	}
	if first, dup := seen.byGoName[goName]; dup {
		l.errorf(v.node, fmt.Sprintf("%q is at line %d; rename one of them", first.Value, first.Line),
			"%s names %q and %q are both %s in Go", what, first.Value, name, goName)
		return "", ""
	}
	seen.byName[name], seen.byGoName[goName] = v.node, v.node
	return name, goName
}

// snakeName checks that v's value is a snake_case name of at most
// maxNameLen characters; what names it in messages ("lock name"). It returns
// "" if not.
func (l *loader) snakeName(v value, what string) string {
	name, ok := l.text(v)
	if !ok {
		return ""
	}
	switch {
	case !snakeCase.MatchString(name):
		l.errorf(v.node, "use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. "+v.field.example,
			"%s %q is not snake_case", what, name)
	case len(name) > maxNameLen:
		l.errorf(v.node, "shorten it", "%s is %d characters long, the maximum is %d", what, len(name), maxNameLen)
	default:
		return name
	}
	return ""
}

// strategy checks a lock's strategy.
func (l *loader) strategy(v value) string {
	s, ok := l.text(v)
	if !ok {
		return ""
	}
	switch {
	case slices.Contains(strategies, s):
		return s
	case slices.Contains(plannedStrategies, s):
		l.errorf(v.node, "use "+strings.Join(strategies, " or "), "strategy %q is not supported yet", s)
	default:
		l.errorf(v.node, choiceHint(s, strategies, "valid strategies"), "unknown strategy %q", s)
	}
	return ""
}

// leader checks a lock's leader flag: only an unkeyed lease lock can be a
// leader.
func (l *loader) leader(v value, fields map[string]value) bool {
	on, ok := l.boolean(v)
	if !ok || !on {
		return false
	}
	if _, keyed := fields["key"]; keyed {
		l.errorf(v.key, "leader election needs an unkeyed lock; remove key or leader", "a keyed lock cannot be a leader")
		return false
	}
	if st, ok := fields["strategy"]; ok && (st.node.Value == StrategySession || st.node.Value == StrategyRow) {
		l.errorf(v.key, "leader election needs strategy lease; remove strategy or leader",
			"a %s lock cannot be a leader: the server frees it before the old leader learns it lost it, so two leaders could run at once", st.node.Value)
		return false
	}
	return true
}

// timing validates ttl, renew_every and wait, and applies their defaults.
// A row lock has no ttl and is not renewed: the server holds its row lock
// for as long as the holding's transaction.
func (l *loader) timing(lk *Lock, n *yaml.Node, fields map[string]value) {
	if lk.Strategy == StrategyRow {
		for _, k := range []string{"ttl", "renew_every"} {
			if v, ok := fields[k]; ok {
				l.errorf(v.key, "remove "+k+": the server holds a row lock for as long as the holding's transaction, with no lease to renew",
					"strategy row takes no %s", k)
			}
		}
		if v, ok := fields["wait"]; ok {
			lk.Wait = l.wait(v)
		}
		if v, ok := fields["idle_timeout"]; ok {
			lk.IdleTimeout = l.idleTimeout(v)
		}
		return
	}
	if v, ok := fields["idle_timeout"]; ok {
		l.errorf(v.key, "remove idle_timeout: a lease ends with its ttl",
			"idle_timeout is for strategy row (how long the server keeps an idle holding's session), not strategy %s", lk.Strategy)
	}
	if _, ok := fields["ttl"]; !ok {
		l.errorf(n, "add it, e.g. ttl: 3s; only strategy row has none", "missing required key %q", "ttl")
	}
	ttlOK := false
	if v, ok := fields["ttl"]; ok {
		lk.TTL, ttlOK = l.ttl(v)
	}
	if v, ok := fields["renew_every"]; ok {
		lk.RenewEvery = l.renewEvery(v, lk.TTL, ttlOK)
	} else if ttlOK {
		lk.RenewEvery = DefaultRenewEvery(lk.TTL)
	}
	if v, ok := fields["wait"]; ok {
		lk.Wait = l.wait(v)
	}
}

// ttl checks a lock's ttl.
func (l *loader) ttl(v value) (time.Duration, bool) {
	d, ok := l.duration(v)
	switch {
	case !ok:
	case d <= 0:
		l.errorf(v.node, "e.g. "+v.field.example, "ttl must be positive, not %s", v.node.Value)
	case d < minTTL:
		l.errorf(v.node, "a lease must outlast a database round trip; use at least "+FormatDuration(minTTL),
			"ttl %s is shorter than the minimum of %s", v.node.Value, FormatDuration(minTTL))
	case d > maxTTL:
		l.errorf(v.node, "a crashed holder keeps the lock for a whole ttl; use at most "+FormatDuration(maxTTL),
			"ttl %s is longer than the maximum of %s", v.node.Value, FormatDuration(maxTTL))
	default:
		return d, true
	}
	return 0, false
}

// renewEvery checks renew_every against the lock's ttl (when ttlOK).
func (l *loader) renewEvery(v value, ttl time.Duration, ttlOK bool) time.Duration {
	d, ok := l.duration(v)
	hint := "e.g. " + v.field.example
	if ttlOK {
		hint = fmt.Sprintf("remove it to renew every ttl/3, which is %s", FormatDuration(DefaultRenewEvery(ttl)))
	}
	switch {
	case !ok:
	case d <= 0:
		l.errorf(v.node, hint, "renew_every must be positive, not %s", v.node.Value)
	case ttlOK && d >= ttl-ttl/10:
		// The runtime counts a lease as lost ttl/10 before it expires
		// (runtime.LockConfig.SafetyMargin), so renewals must come sooner.
		l.errorf(v.node, hint, "renew_every %s must be shorter than ttl - ttl/10 (%s): a lease counts as lost ttl/10 before it expires", v.node.Value, FormatDuration(ttl-ttl/10))
	default:
		return d
	}
	return 0
}

// wait checks a lock's wait.
func (l *loader) wait(v value) time.Duration {
	d, ok := l.duration(v)
	switch {
	case !ok:
	case d < 0:
		l.errorf(v.node, "use 0 to try once, or e.g. "+v.field.example, "wait must not be negative, not %s", v.node.Value)
	case d > maxWait:
		l.errorf(v.node, "use at most "+FormatDuration(maxWait), "wait %s is longer than the maximum of %s", v.node.Value, FormatDuration(maxWait))
	default:
		return d
	}
	return 0
}

// idleTimeout checks a row lock's idle_timeout: whole seconds (the
// server's wait_timeout), from 1s to the longest ttl.
func (l *loader) idleTimeout(v value) time.Duration {
	d, ok := l.duration(v)
	switch {
	case !ok:
	case d < time.Second:
		l.errorf(v.node, "use at least 1s, e.g. "+v.field.example, "idle_timeout %s is shorter than the server's smallest wait_timeout, 1s", v.node.Value)
	case d > maxTTL:
		l.errorf(v.node, "use at most "+FormatDuration(maxTTL), "idle_timeout %s is longer than the maximum of %s", v.node.Value, FormatDuration(maxTTL))
	case d%time.Second != 0:
		l.errorf(v.node, fmt.Sprintf("use whole seconds, e.g. %s", FormatDuration(d.Truncate(time.Second)+time.Second)),
			"idle_timeout %s is not whole seconds: the server's wait_timeout counts whole seconds", v.node.Value)
	default:
		return d
	}
	return 0
}

// key validates a lock's key.
func (l *loader) key(v value) *Key {
	fields, ok := l.nested(v, keyFields)
	if !ok {
		return nil
	}
	k := &Key{Pos: pos(v.node)}
	if v, ok := fields["name"]; ok {
		k.Name, k.GoName = l.keyName(v)
	}
	if v, ok := fields["type"]; ok {
		k.Type = l.keyType(v)
	}
	return k
}

// keyName validates a key's name, which must also make a usable Go
// parameter name, and returns it and its GoName.
func (l *loader) keyName(v value) (name, goName string) {
	name = l.snakeName(v, "key name")
	if name == "" {
		return "", ""
	}
	goName = LowerCamelCase(name)
	if problem := paramProblem(goName); problem != "" {
		l.errorf(v.node, fmt.Sprintf("rename it, e.g. name: %s_key", name),
			"key name %q becomes the Go parameter %s, which is %s", name, goName, problem)
		return "", ""
	}
	return name, goName
}

// keyType checks a key's type.
func (l *loader) keyType(v value) string {
	t, ok := l.text(v)
	if !ok {
		return ""
	}
	if !slices.Contains(keyTypes, t) {
		l.errorf(v.node, choiceHint(t, keyTypes, "supported key types"), "unsupported key type %q", t)
		return ""
	}
	return t
}

// DefaultRenewEvery is the renewal period of a lock that declares none:
// ttl/3, truncated to the millisecond so generated code reads cleanly.
func DefaultRenewEvery(ttl time.Duration) time.Duration {
	return (ttl / 3).Truncate(time.Millisecond)
}
