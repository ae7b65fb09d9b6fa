package generator

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/internal/prose"
	"github.com/lockgen/lockgen/runtime"
)

// This file writes the doc comments of the generated code. Each states the
// facts of the declaration (TTL, renewal, wait) and what the errors mean;
// the wording is decided here, the jennifer code only prints it.

// docWidth is the width of generated doc comment text, "// " excluded.
const docWidth = 76

// comment formats paragraphs as a // comment wrapped at docWidth, with an
// empty comment line between paragraphs; empty paragraphs are left out. The result starts with "//", which
// makes jennifer print it verbatim.
func comment(paragraphs ...string) string {
	var lines []string
	for _, p := range paragraphs {
		if p == "" {
			continue
		}
		if len(lines) > 0 {
			lines = append(lines, "//")
		}
		for _, l := range wrap(p, docWidth) {
			lines = append(lines, "// "+l)
		}
	}
	return strings.Join(lines, "\n")
}

// wrap splits text into lines of at most width bytes, breaking at spaces;
// a longer word gets a line of its own.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func (m *model) packageDoc() string {
	var doc []string
	switch {
	case len(m.Jobs) == 0:
		doc = append(doc, fmt.Sprintf("Package %s gives typed access to the distributed locks declared in %s.", m.Package, m.SpecName))
	case len(m.Locks) == 0:
		doc = append(doc, fmt.Sprintf("Package %s gives typed access to the jobs declared in %s.", m.Package, m.SpecName))
	default:
		doc = append(doc, fmt.Sprintf("Package %s gives typed access to the distributed locks and the jobs declared in %s.", m.Package, m.SpecName))
	}
	table := "the MySQL/MariaDB table " + m.Table
	groups := m.strategies()
	for i, g := range groups {
		if len(groups) == 1 {
			doc = append(doc, fmt.Sprintf("Each lock is %s.", strategyDesc(g.strategy, table)))
		} else {
			doc = append(doc, fmt.Sprintf("A lock of strategy %s (%s) is %s.", g.strategy, strings.Join(g.names, ", "), strategyDesc(g.strategy, table)))
		}
		if i == 0 {
			table = m.Table
		}
	}
	if len(m.Jobs) > 0 {
		runs := m.RunsTable
		if len(m.Locks) == 0 {
			runs = "the MySQL/MariaDB table " + m.RunsTable
		}
		doc = append(doc, fmt.Sprintf("Each run of a job is a row of %s, inserted by %s, then claimed, run and recorded by RunJobs on every node.",
			runs, prose.Or(m.runSources())))
	}
	var does []string
	switch held := "locks"; {
	case len(groups) == 1 && groups[0].strategy == spec.StrategyRow:
		does = append(does, "acquires and releases the locks")
	case len(groups) == 1 && groups[0].strategy == spec.StrategyLease:
		held = "leases"
		fallthrough
	case len(groups) > 0:
		does = append(does, "acquires, renews and releases the "+held)
	}
	if len(m.Locks) > 0 {
		does = append(does, "hands out fencing tokens")
	}
	binds := "names, keys and timings"
	if len(m.Jobs) > 0 {
		does = append(does, "claims, runs, retries and records the runs")
		binds = "names, keys, arguments and timings"
		if len(m.Locks) == 0 {
			binds = "names, arguments and timings"
		}
	}
	doc = append(doc, fmt.Sprintf("The runtime (%s) %s; this package binds the declared %s to it.", runtimePath, prose.And(does), binds))
	return comment(strings.Join(doc, " "))
}

// strategyDesc says what a lock of strategy is, its row being in table.
func strategyDesc(strategy, table string) string {
	switch strategy {
	case spec.StrategySession:
		return "a server-side named lock (GET_LOCK) held on a pinned connection, with a row of " + table + " for its fencing token"
	case spec.StrategyRow:
		return "the row lock (SELECT ... FOR UPDATE) of a row of " + table + ", held by a transaction that lasts the holding"
	default:
		return "a lease: a row of " + table + " that expires by the database clock unless its holder renews it"
	}
}

// strategyGroup is the locks of one strategy.
type strategyGroup struct {
	strategy string
	names    []string
}

// strategies returns the strategies m's locks use, in the order lease,
// session, row, each with the names of its locks in spec order.
func (m *model) strategies() []strategyGroup {
	var groups []strategyGroup
	for _, st := range []string{spec.StrategyLease, spec.StrategySession, spec.StrategyRow} {
		g := strategyGroup{strategy: st}
		for _, lk := range m.Locks {
			if lk.Strategy == st {
				g.names = append(g.names, lk.Name)
			}
		}
		if len(g.names) > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}

// runSources names what inserts runs: "an Enqueue method", "the
// scheduler", or both.
func (m *model) runSources() []string {
	var enqueued, scheduled bool
	for _, j := range m.Jobs {
		enqueued = enqueued || j.Enqueue != ""
		scheduled = scheduled || j.Scheduled()
	}
	var sources []string
	if enqueued {
		sources = append(sources, "an Enqueue method")
	}
	if scheduled {
		sources = append(sources, "the scheduler")
	}
	return sources
}

// pinsConnection reports whether any lock pins a connection per holding
// (the session and row strategies).
func (m *model) pinsConnection() bool {
	for _, lk := range m.Locks {
		if lk.Session || lk.Row {
			return true
		}
	}
	return false
}

// serverFeatures are the probe features the package uses, by their names
// in runtime/probe: the lease (every package: jobs' singletons are lease
// locks), the session and row strategies when declared, and jobs.
func (m *model) serverFeatures() []string {
	features := []string{"Lease"}
	session, row := false, false
	for _, lk := range m.Locks {
		session, row = session || lk.Session, row || lk.Row
	}
	if session {
		features = append(features, "Session")
	}
	if row {
		features = append(features, "Row")
	}
	if len(m.Jobs) > 0 {
		features = append(features, "Jobs")
	}
	return features
}

// versionGuardDoc explains the reference to the runtime's version guard.
func (m *model) versionGuardDoc() string {
	return comment("This package builds only against a runtime that fits the code lockgen generated here: " +
		"if runtime." + versionGuard + " is undefined, this package and " + runtimePath + " come from different lockgen versions. " +
		"Run `go tool lockgen generate` with the lockgen of your runtime's version, or require the runtime of your lockgen's.")
}

func (m *model) optionDoc() string {
	if len(m.Locks) == 0 {
		return comment("Option configures New. See WithOwner, WithLogger and WithTracer.")
	}
	return comment("Option configures New. See WithOwner, WithLogger, WithObserver and WithTracer.")
}

func (m *model) withTracerDoc() string {
	var traced []string
	if len(m.Locks) > 0 {
		traced = append(traced, "lock waits and holdings")
	}
	if len(m.Jobs) > 0 {
		traced = append(traced, "enqueues and job attempts (when it implements jobs.Middleware too, as lockgenotel's does: "+
			"each attempt's span links to the span that enqueued its run, through the run's headers)")
	}
	return comment("WithTracer sets the tracer of " + prose.And(traced) + ": e.g. github.com/lockgen/lockgen/lockgenotel's " +
		"OpenTelemetry Tracer. Default: none. New fails with ErrInvalid on a nil tracer.")
}

func (m *model) withOwnerDoc() string {
	recorded := "WithOwner sets the identity recorded in the rows of the locks held through the Locks, " +
		"as the Holder methods report it in Holder.Owner"
	switch {
	case len(m.Locks) == 0:
		recorded = "WithOwner sets the identity recorded as the worker of the runs claimed through the Locks (RunInfo.Worker)"
	case len(m.Jobs) > 0:
		recorded += ", and as the worker of the runs it claims (RunInfo.Worker)"
	}
	doc := recorded + ". It must be 1 to " + strconv.Itoa(runtime.MaxOwnerLen) + " bytes; " +
		"New fails with ErrInvalid otherwise. Default: \"<hostname>-<pid>-<random>\", different for every Locks."
	if len(m.Locks) > 0 {
		doc += " The holdings of one Locks share its owner and are told apart by their fencing tokens."
	}
	return comment(doc)
}

func (m *model) withObserverDoc() string {
	doc := "WithObserver sets the observer of acquisitions, releases, renewal failures, lost leases and leadership changes, " +
		"for metrics: e.g. github.com/lockgen/lockgen/lockgenprom's. Default: none."
	if len(m.Jobs) > 0 {
		doc += " When it implements jobs.Observer too (lockgenprom's does), it also hears of the jobs' enqueues, claims, " +
			"attempts with their outcomes and lateness, and rescues."
	}
	return comment(doc)
}

func (m *model) withLoggerDoc() string {
	var reports []string
	if len(m.Locks) > 0 {
		reports = append(reports, "lost leases and renewal trouble")
	}
	if len(m.Jobs) > 0 {
		reports = append(reports, "failed runs and the database errors the workers retry")
	}
	return comment("WithLogger sets the logger that reports " + prose.And(reports) + ". Default: slog.Default().")
}

// declared names what the spec declares: "locks", "jobs" or "locks and
// jobs".
func (m *model) declared() string {
	switch {
	case len(m.Jobs) == 0:
		return "locks"
	case len(m.Locks) == 0:
		return "jobs"
	default:
		return "locks and jobs"
	}
}

func (m *model) locksDoc() string {
	doc := fmt.Sprintf("Locks gives typed access to the %s declared in %s. It is safe for concurrent use; "+
		"create one per process (or per node in tests).", m.declared(), m.SpecName)
	if len(m.Locks) > 0 {
		doc += " Two Locks behave like two nodes: a lock held through one is busy for the other."
	}
	return comment(doc)
}

func (m *model) newDoc() string {
	files := make([]string, 0, len(m.Migrations))
	for _, f := range m.Migrations {
		if !strings.HasSuffix(f.Path, ".down.sql") {
			files = append(files, f.Path)
		}
	}
	tables := "The table " + m.Table + " must exist"
	if m.RunsTable != "" {
		tables = "The tables " + m.Table + ", " + m.RunsTable + " and " + m.QueuesTable + " must exist"
	}
	yours := "never inside a transaction of yours"
	var txMethods []string
	for _, j := range m.Jobs {
		if j.EnqueueTx != "" {
			txMethods = append(txMethods, j.EnqueueTx)
		}
	}
	if len(txMethods) > 0 {
		yours += " unless you pass it to " + prose.Or(txMethods)
	}
	return comment(
		fmt.Sprintf("New returns the %s declared in %s, running their statements on db, "+
			"%s. It does not touch the database.", m.declared(), m.SpecName, yours),
		fmt.Sprintf("%s: apply %s (relative to %s) with your migration tool. "+
			"With github.com/go-sql-driver/mysql, open db with parseTime=true.",
			tables, prose.And(files), m.SpecName),
		m.sessionPoolDoc(),
		"New fails with an error wrapping ErrInvalid when db is nil or an option is invalid.")
}

// sessionPoolDoc states what session and row locks need from the pool, or
// "" when there are none.
func (m *model) sessionPoolDoc() string {
	if !m.pinsConnection() {
		return ""
	}
	var names, what, kinds []string
	for _, g := range m.strategies() {
		switch g.strategy {
		case spec.StrategySession:
			kinds, what = append(kinds, "session"), append(what, "GET_LOCK")
		case spec.StrategyRow:
			kinds, what = append(kinds, "row"), append(what, "the holding's transaction")
		default:
			continue
		}
		names = append(names, g.names...)
	}
	locks, keep, they, fail := "locks", "keep", "they", "fail"
	if len(names) == 1 {
		locks, keep, they, fail = "lock", "keeps", "it", "fails"
	}
	return fmt.Sprintf("The %s %s (%s) %s a connection of db for the whole holding (%s): "+
		"allow for one open connection per holding in db.SetMaxOpenConns, and connect to the server directly, "+
		"not through a multiplexing proxy. On a Galera or Group Replication cluster %s %s with ErrUnsupported.",
		strings.Join(kinds, " and "), locks, strings.Join(names, ", "), keep, strings.Join(what, ", or "), they, fail)
}

func (m *model) namesDoc() string {
	return comment(fmt.Sprintf("Names of the declared locks, as stored in the name column of %s.", m.Table))
}

func (m *model) checkServerDoc() string {
	unsupported := "TiDB or another engine it does not know, MySQL before 8.0, MariaDB before 10.6"
	if m.pinsConnection() {
		unsupported += ", session or row locks on a Galera or Group Replication cluster"
	}
	first, missing := "lock", "the lock table is missing or unlike its migration (a column or an index missing)"
	switch {
	case len(m.Locks) == 0:
		first, missing = "job", "a table is missing or unlike its migration (a column or an index missing; the runs or the queues table, or the lock table that singleton jobs use)"
	case len(m.Jobs) > 0:
		first, missing = "lock or job", "the lock, the runs or the queues table is missing or unlike its migration (a column or an index missing)"
	}
	return comment("CheckServer probes the server now, as the first " + first + " call does anyway: it fails with an error wrapping " +
		"ErrUnsupported when lockgen cannot run safely on it (" + unsupported + "), and with ErrInvalid when db " +
		"was opened without parseTime=true, with a loc other than UTC, a character set other than utf8mb4 or an sql_mode " +
		"that is not strict (the error names the DSN setting to change), or when " + missing + " (the error names the migration). " +
		"Every other method fails the same way. Call it at startup to fail fast; " +
		"`go tool lockgen doctor` prints the same checks.")
}

func (m *model) serverDoc() string {
	return comment("Server implements driver.Store: the pool and tables the runtime checks at first use.")
}

// migrationsHint names the migration directory for the error that says the
// tables are missing.
func (m *model) migrationsHint() string {
	return fmt.Sprintf("%s/ (relative to %s)", strings.TrimSuffix(m.MigrationsDir, "/"), m.SpecName)
}

// fileHint names a migration file for the errors that say its table is
// missing or unlike it.
func (m *model) fileHint(file string) string {
	return fmt.Sprintf("%s (relative to %s)", file, m.SpecName)
}

func (m *model) ownerDoc() string {
	var where []string
	if len(m.Locks) > 0 {
		where = append(where, "in the lock rows held through these Locks")
	}
	if len(m.Jobs) > 0 {
		where = append(where, "as the worker of the runs they claim")
	}
	return comment("Owner returns the identity recorded " + prose.And(where) + " (see WithOwner).")
}
