package generator

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockgen/lockgen/generator/spec"
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
			runs, orList(m.runSources())))
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
	doc = append(doc, fmt.Sprintf("The runtime (%s) %s; this package binds the declared %s to it.", runtimePath, andList(does), binds))
	return comment(strings.Join(doc, " "))
}

// andList joins items as in a sentence: "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// orList joins items as in a sentence: "a", "a or b", "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
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

// versionGuardDoc explains the reference to the runtime's version guard.
func (m *model) versionGuardDoc() string {
	return comment("This package builds only against a runtime that fits the code lockgen generated here: " +
		"if runtime." + versionGuard + " is undefined, this package and " + runtimePath + " come from different lockgen versions. " +
		"Run `go tool lockgen generate` with the lockgen of your runtime's version, or require the runtime of your lockgen's.")
}

func (m *model) optionDoc() string {
	if len(m.Locks) == 0 {
		return comment("Option configures New. See WithOwner and WithLogger.")
	}
	return comment("Option configures New. See WithOwner, WithLogger and WithObserver.")
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
	return comment("WithObserver sets the observer of acquisitions, releases, renewal failures, lost leases and leadership changes, " +
		"for metrics: e.g. github.com/lockgen/lockgen/lockgenprom's. Default: none.")
}

func (m *model) withLoggerDoc() string {
	return comment("WithLogger sets the logger that reports lost leases and renewal trouble. Default: slog.Default().")
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
		tables = "The tables " + m.Table + " and " + m.RunsTable + " must exist"
	}
	yours := "never inside a transaction of yours"
	var txMethods []string
	for _, j := range m.Jobs {
		if j.EnqueueTx != "" {
			txMethods = append(txMethods, j.EnqueueTx)
		}
	}
	if len(txMethods) > 0 {
		yours += " unless you pass it to " + orList(txMethods)
	}
	return comment(
		fmt.Sprintf("New returns the %s declared in %s, running their statements on db, each as its own autocommit statement, "+
			"%s. It does not touch the database.", m.declared(), m.SpecName, yours),
		fmt.Sprintf("%s: apply %s (relative to %s) with your migration tool. "+
			"With github.com/go-sql-driver/mysql, open db with parseTime=true.",
			tables, andList(files), m.SpecName),
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
		"not through a multiplexing proxy. On a Galera cluster %s %s with ErrUnsupported.",
		strings.Join(kinds, " and "), locks, strings.Join(names, ", "), keep, strings.Join(what, ", or "), they, fail)
}

func (m *model) namesDoc() string {
	return comment(fmt.Sprintf("Names of the declared locks, as stored in the name column of %s.", m.Table))
}

func (lk *lockModel) nameConstDoc() string {
	if lk.Key == nil {
		return comment(fmt.Sprintf("%s is the name of the %s lock.", lk.NameConst, lk.Name))
	}
	return comment(fmt.Sprintf("%s is the name of the %s lock, keyed by %s.", lk.NameConst, lk.Name, lk.Key.Name))
}

// what names the lock in a sentence: "the master lock" or "the order lock
// for orderID".
func (lk *lockModel) what() string {
	if lk.Key == nil {
		return fmt.Sprintf("the %s lock", lk.Name)
	}
	return fmt.Sprintf("the %s lock for %s", lk.Name, lk.Key.Param)
}

// keyDoc states how the key is used, or "" for an unkeyed lock.
func (lk *lockModel) keyDoc() string {
	k := lk.Key
	if k == nil {
		return ""
	}
	s := fmt.Sprintf("Each %s value is a lock of its own.", k.Param)
	if k.Decimal {
		return s + fmt.Sprintf(" The key stored in the lock row is %s in decimal.", k.Param)
	}
	if k.UUID {
		return s + fmt.Sprintf(" %s must be a UUID (8-4-4-4-12 hex digits, any case); it is stored in lower case, "+
			"so one UUID is one lock however it is spelled. Anything else fails with ErrInvalid.", k.Param)
	}
	return s + fmt.Sprintf(" %s is the key stored in the lock row: it must be 1 to %d bytes, "+
		"otherwise the call fails with ErrInvalid.", k.Param, runtime.MaxKeyLen)
}

// leaseDoc states the lease's timing: for the lease strategy the TTL and
// renewal, for the session strategy the pinned connection and its checks.
func (lk *lockModel) leaseDoc() string {
	if lk.Row {
		return "Strategy row: the lock row stays locked (SELECT ... FOR UPDATE) by a transaction that lasts the holding; " +
			"the server frees it when that transaction ends, also when the holder's connection dies, and then rolls back the transaction's writes"
	}
	if lk.Session {
		return fmt.Sprintf("Strategy session: the server keeps the lock as long as the connection pinned for this holding stays open; "+
			"the holder checks that it still has it every %s", spec.FormatDuration(lk.RenewEvery))
	}
	return fmt.Sprintf("The lease lasts %s by the database clock and is renewed every %s",
		spec.FormatDuration(lk.TTL), spec.FormatDuration(lk.RenewEvery))
}

// sessionLossDoc says when the holder of a session lock learns that it
// lost it; ctx names the context that is then cancelled.
func (lk *lockModel) sessionLossDoc(ctx string) string {
	return fmt.Sprintf("The server frees the lock the moment that connection breaks, "+
		"and the holder learns of it only at its next check (or once no check has succeeded for %s), "+
		"when %s is cancelled with cause ErrLeaseLost: after others may already have taken the lock. "+
		"Protect the critical section's writes with the fencing token (lease.Guard in the same database); "+
		"see docs/strategies.md in github.com/lockgen/lockgen.", spec.FormatDuration(lk.TTL-lk.TTL/10), ctx)
}

// tokenDoc explains the fencing token.
const tokenDoc = "lease.Token() is the fencing token of this holding, greater than that of every earlier holding: " +
	"pass it with the writes that a stale holder must not make."

// waitDoc says how waiting for a busy lock works.
func (lk *lockModel) waitDoc() string {
	if lk.Row {
		return "Waiting happens on the server, in the row lock's queue (innodb_lock_wait_timeout, in whole seconds): no polling, first come first served."
	}
	if lk.Session {
		return "Waiting happens on the server, inside GET_LOCK: no polling, first come first served."
	}
	if lk.WaitOnServer {
		return "Waiting happens on the server (wait_mode server): each holding also holds a GET_LOCK wake lock that it gives back " +
			"right after the release, so the server wakes one waiter, first come first served, without polling; " +
			"where the server cannot help, waiters poll with backoff."
	}
	return "Waiting polls with backoff and wakes at once when a holder in this process releases the lock."
}

func (lk *lockModel) withDoc() string {
	busy := fmt.Sprintf("If another holder has it, %s waits up to %s for it (less if ctx ends first) and then returns ErrNotAcquired.",
		lk.With, spec.FormatDuration(lk.Wait))
	if lk.Session || lk.Row {
		busy += " " + lk.waitDoc()
	}
	if lk.Wait == 0 {
		busy = fmt.Sprintf("It makes one attempt: if another holder has the lock, %s returns ErrNotAcquired at once "+
			"(the lock declares no wait).", lk.With)
	}
	loss := lk.leaseDoc() + " while fn runs. If no renewal succeeds in time, fn's ctx is cancelled with cause ErrLeaseLost " +
		"before anyone else can take the lock (ctx.Err() reads the local deadline itself, so the first check after a pause reports the loss), and " +
		lk.With + " returns an error wrapping ErrLeaseLost even if fn returned nil: " +
		"the critical section may not have been exclusive to its end. A check that returned nil can be stale by the time a write lands: " +
		"pass lease.Token() with the write, or use lease.Guard in its transaction."
	if lk.Row {
		loss = lk.leaseDoc() + ". " + rowLossDoc(lk.With)
	}
	if lk.Session {
		loss = lk.leaseDoc() + " while fn runs. " + lk.sessionLossDoc("fn's ctx") + " " + lk.With +
			" then returns an error wrapping ErrLeaseLost even if fn returned nil: " +
			"the critical section may not have been exclusive to its end."
	}
	return comment(
		fmt.Sprintf("%s runs fn while holding %s and releases the lock when fn returns or panics "+
			"(the panic goes on after the release). fn's ctx is done when ctx is. "+
			"%s returns fn's error, joined with the release error if any. %s", lk.With, lk.what(), lk.With, lk.keyDoc()),
		busy, loss, tokenDoc)
}

// rowLossDoc says when the holder of a row lock learns that it lost it;
// with names the function that reports it.
func rowLossDoc(with string) string {
	return "A row lock is not renewed and has no ttl: if the server ends the transaction early (the connection broke, " +
		"or a deadlock in the transaction's own statements rolled it back), the holder learns of it at the release, " +
		"when " + with + " returns an error wrapping ErrLeaseLost. Writes made in the holding's transaction " +
		"(lease.Tx()) are rolled back with the lock and are always safe; protect other writes with the fencing token."
}

// withTxDoc documents With<Name>LockTx.
func (lk *lockModel) withTxDoc() string {
	return comment(
		fmt.Sprintf("%s is %s with fn also given the holding's transaction, tx, which keeps the lock row locked: "+
			"fn's writes in tx commit atomically with the release when fn returns nil, and roll back, with the lock, "+
			"when fn returns an error or panics. fn must not Commit or Rollback tx. "+
			"Called again inside fn with fn's ctx, it joins the holding and gets the same tx; the outermost call decides commit or rollback.",
			lk.WithTx, lk.With),
		rowLossDoc(lk.WithTx), tokenDoc)
}

// heldDoc describes a lease returned by Try and Acquire.
func (lk *lockModel) heldDoc() string {
	if lk.Row {
		return lk.leaseDoc() + ". The holding lasts until lease.Release, which the caller must call: it commits the transaction (lease.Tx()), " +
			"and writes made in it commit with the release. " + tokenDoc
	}
	doc := lk.leaseDoc() + " in the background until lease.Release, which the caller must call. " +
		"lease.Context() ends when the lease is lost (cause ErrLeaseLost) or released. "
	if lk.Session {
		doc += lk.sessionLossDoc("lease.Context()") + " "
	}
	return doc + tokenDoc
}

func (lk *lockModel) tryDoc() string {
	unknown := fmt.Sprintf("Any other error means the outcome is unknown: the lock may then stay held, unused, for up to %s.",
		spec.FormatDuration(lk.TTL))
	if lk.Session {
		unknown = "Any other error means the lock was not acquired: the runtime releases a server-side lock " +
			"taken on the way before returning."
	}
	if lk.Row {
		unknown = "Any other error means the lock was not acquired: the runtime rolls back the transaction " +
			"(or drops its connection) before returning."
	}
	return comment(
		fmt.Sprintf("%s makes one attempt to acquire %s, without waiting, and returns ErrNotAcquired if another holder has it. %s",
			lk.Try, lk.what(), lk.keyDoc()),
		lk.heldDoc(), unknown)
}

func (lk *lockModel) acquireDoc() string {
	first := fmt.Sprintf("%s acquires %s, waiting up to %s (less if ctx ends first) while another holder has it; "+
		"it then returns ErrNotAcquired, or ctx's error when ctx ended. %s %s",
		lk.Acquire, lk.what(), spec.FormatDuration(lk.Wait), lk.waitDoc(), lk.keyDoc())
	if lk.Wait == 0 {
		first = fmt.Sprintf("%s acquires %s like %s: the lock declares no wait, so it makes one attempt "+
			"and returns ErrNotAcquired if another holder has it. %s", lk.Acquire, lk.what(), lk.Try, lk.keyDoc())
	}
	return comment(first, lk.heldDoc())
}

func (lk *lockModel) holderDoc() string {
	if lk.Row {
		return comment(fmt.Sprintf("%s reads who holds %s, reading the lock row uncommitted (a row holding commits only at its release): "+
			"Holder.Held is whether a holding is live, Holder.Owner and Holder.Token are those of the current or last holding. "+
			"Holder.Remaining is always 0: a row lock lasts as long as its transaction.", lk.Holder, lk.what()))
	}
	if lk.Session {
		return comment(fmt.Sprintf("%s reads who holds %s: Holder.Held is whether the server has the session lock "+
			"(GET_LOCK's IS_USED_LOCK), Holder.Owner and Holder.Token are those of the current or last holding, "+
			"from the lock row. Holder.Remaining is always 0: a session lock lasts as long as its holder's connection.", lk.Holder, lk.what()))
	}
	return comment(fmt.Sprintf("%s reads who holds %s, by the database clock. "+
		"Holder.Held is false when nobody does (never acquired, released or expired); "+
		"Holder.Token is the fencing token of the current or last holding.", lk.Holder, lk.what()))
}

// exclusionDoc says how far two leaders are kept apart.
func (lk *lockModel) exclusionDoc() string {
	if lk.Session {
		return fmt.Sprintf("Strategy session: the server frees the lock the moment the leader's connection breaks, "+
			"and the leader learns of it only at its next check (every %s): a follower may be elected before the old leader's fn "+
			"sees its ctx end. Fence the leader's writes with lease.Token() or lease.Guard; see docs/strategies.md in github.com/lockgen/lockgen.",
			spec.FormatDuration(lk.RenewEvery))
	}
	return "Two leaders never run fn at the same time as long as fn stops when its ctx ends: " +
		"the lease's local deadline cancels it before the database lets a follower in."
}

// takeoverDoc says how soon a follower replaces a crashed leader.
func (lk *lockModel) takeoverDoc() string {
	if lk.Session {
		return "A leader that crashes is replaced at once: the server frees its lock as soon as it sees the connection close " +
			"(a host that vanishes without closing it is noticed only when the server's connection gives up)."
	}
	return fmt.Sprintf("A leader that crashes is replaced within about its TTL (%s) plus one poll.", spec.FormatDuration(lk.TTL)) + lk.leaderWaitDoc()
}

// leaderWaitDoc says how followers learn that a leader stepped down.
func (lk *lockModel) leaderWaitDoc() string {
	if lk.WaitOnServer {
		return " Followers wait on the server (wait_mode server) and are woken as soon as the leader steps down; " +
			"they may see a new leader (OnNewLeader) up to one TTL late."
	}
	return ""
}

func (lk *lockModel) runAsDoc() string {
	ld := lk.Leader
	return comment(
		fmt.Sprintf("%s campaigns for leadership of the %s lock until ctx ends. Each time it is elected it runs fn "+
			"with a ctx that is cancelled, with cause ErrLeaseLost, as soon as leadership is lost (and when ctx ends), "+
			"waits for fn to return, gives leadership up and campaigns again after one poll. "+
			"fn's lease.Token() is the fencing token of the term.", ld.RunAs, lk.Name),
		lk.exclusionDoc(),
		"A leader that steps down (fn returned or ctx ended) is replaced by a follower within about one poll. "+lk.takeoverDoc(),
		fmt.Sprintf("%s returns nil when ctx ends, and an error wrapping ErrInvalid for a nil fn "+
			"or ErrUnsupported when the strategy cannot run safely on the server; "+
			"other server errors are logged and retried. Options: OnElected, OnRevoked, OnNewLeader "+
			"and PollEvery (default %s: the smaller of ttl/4 and %s).", ld.RunAs,
			spec.FormatDuration(min(lk.TTL/4, runtime.DefaultPollEvery)), spec.FormatDuration(runtime.DefaultPollEvery)))
}

func (lk *lockModel) isLeaderDoc() string {
	return comment(fmt.Sprintf("%s reports whether a %s call of these Locks leads right now: "+
		"it is in a term whose lease is neither lost nor released.", lk.Leader.IsLeader, lk.Leader.RunAs))
}

func (lk *lockModel) currentLeaderDoc() string {
	what := "by the database clock. Holder.Held is false when nobody leads, Holder.Owner is the leader's owner (see WithOwner), " +
		"Holder.Token the fencing token of its term and Holder.Remaining what is left of its lease"
	if lk.Session {
		what = "from the server and the lock row. Holder.Held is whether the server has the lock, Holder.Owner is the leader's owner (see WithOwner) " +
			"and Holder.Token the fencing token of its term (Holder.Remaining is always 0 for a session lock)"
	}
	return comment(fmt.Sprintf("%s reads the current leader of the %s lock as any observer sees it, %s.",
		lk.Leader.Current, lk.Name, what))
}

func (m *model) storeDoc() string {
	what := "driver.Store"
	if len(m.Jobs) > 0 {
		what = "driver.Store and driver.JobStore"
	}
	return comment(fmt.Sprintf("Store implements %s (github.com/lockgen/lockgen/runtime/driver) with the queries of this package, "+
		"for the generated package %s, which is what applications use. "+
		"Each call of the lease strategy is one autocommit statement on the pool; "+
		"the session strategy pins one connection of the pool per holding (see sessionConn), "+
		"and the row strategy one connection and transaction (see rowTx).", what, m.Package))
}

// storeGuardDoc explains the compile-time assertions of the store.
func (m *model) storeGuardDoc() string {
	return comment("The runtime calls Store through these interfaces: a method missing here is a build error, " +
		"which means this package was generated by a lockgen that does not match the runtime; run `go tool lockgen generate`.")
}

func (m *model) newStoreDoc() string {
	return comment("NewStore returns the store of db; every statement runs on db's pool.")
}

func (m *model) sessionNamespaceDoc() string {
	return comment(fmt.Sprintf("SessionNamespace implements driver.Store: the GET_LOCK names of session locks "+
		"are \"%s<lock name>[/<key>]\" (or a hash of that when longer than 64 bytes or when it holds a character outside the Basic Multilingual Plane, which MySQL refuses in lock names). "+
		"They are server-wide, shared by every database on the server, so applications sharing a server "+
		"need distinct table_prefix values in %s.", m.TablePrefix, m.SpecName))
}

const (
	leaseAcquireDoc = "// LeaseAcquire implements driver.Store. The fencing token is the statement's\n" +
		"// LastInsertId; it is 0 when another holder has the row."
	leaseRenewDoc = "// LeaseRenew implements driver.Store. ok is true when the statement changed\n" +
		"// the row: id still held it and it had not expired."
	leaseReleaseDoc = "// LeaseRelease implements driver.Store. ok is true when the statement\n" +
		"// changed the row: id still held it."
	leaseGetDoc = "// LeaseGet implements driver.Store. found is false when the row does not\n" +
		"// exist."
	leaseGuardDoc = "// LeaseGuard implements driver.Store. It runs in tx, the caller's\n" +
		"// transaction; ok is true when id still holds the row, which then stays\n" +
		"// share-locked until tx ends."

	sessionConnDoc = "// SessionConn implements driver.Store: it pins one connection of the\n" +
		"// pool for one holding, until the runtime closes it."
	sessionIsUsedDoc = "// SessionIsUsed implements driver.Store: whether any connection\n" +
		"// holds the named GET_LOCK lock."
	serverGaleraDoc = "// ServerGalera implements driver.Store: whether the server is a\n" +
		"// Galera node (wsrep_on), where the session strategy is refused."
	sessionConnTypeDoc = "// sessionConn implements driver.SessionConn: the connection pinned for one\n" +
		"// session-lock holding and the queries bound to it. The server frees the\n" +
		"// lock when the connection itself ends (it breaks, or the pool closes it)."
	getLockDoc = "// GetLock implements driver.SessionConn: GET_LOCK waiting up to timeout on\n" +
		"// the server; 1 acquired, 0 timed out, -1 error."
	holdsLockDoc = "// HoldsLock implements driver.SessionConn: whether this connection holds the\n" +
		"// named lock."
	releaseLockDoc = "// ReleaseLock implements driver.SessionConn: RELEASE_LOCK; 1 released, 0\n" +
		"// held by another connection, -1 not held at all."
	sessionTokenDoc = "// Token implements driver.SessionConn: it records the holding in the lock\n" +
		"// row and returns the new fencing token, the statement's LastInsertId."
	leaseRenewManyDoc = "// LeaseRenewMany implements driver.Store: one statement renews the\n" +
		"// holdings (keys[i], tokens[i]) of lock name by owner; each row is matched\n" +
		"// with its own key's token through the holding column."
	leaseGetManyDoc = "// LeaseGetMany implements driver.Store. Missing rows are absent\n" +
		"// from the map."
	leasePruneDoc = "// LeasePrune implements driver.Store: one statement deletes up to\n" +
		"// limit keyed rows of lock name that have been free for longer than\n" +
		"// olderThan by the database clock and whose newest fencing token is more\n" +
		"// than olderThan below that clock in microseconds."
	freeDoc = "// Free implements driver.SessionConn: it marks the row free, on the\n" +
		"// pinned connection, if id still holds it."
	connRenewDoc = "// Renew implements driver.SessionConn: it extends the row held by id to\n" +
		"// ttl from now by the database clock, on the pinned connection."
	discardDoc = "// Discard implements driver.SessionConn: it closes the connection itself\n" +
		"// (marking it bad so the pool drops it), so the server frees any session\n" +
		"// lock it still holds."
	rowBeginDoc = "// RowBegin implements driver.Store: it pins a connection, sets its lock\n" +
		"// wait timeout and begins the holding's READ COMMITTED transaction."
	rowPeekDoc = "// RowPeek implements driver.Store: LeaseGet in a READ UNCOMMITTED\n" +
		"// transaction, so a live row-strategy holding (uncommitted) shows."
	rowTxTypeDoc = "// rowTx implements driver.RowTx: the transaction of one row-strategy\n" +
		"// holding and the queries bound to it."
	lockNowaitDoc = "// LockNowait implements driver.RowTx: SELECT ... FOR UPDATE NOWAIT on the\n" +
		"// lock row; false when the row does not exist."
	lockWaitDoc = "// LockWait implements driver.RowTx: it creates the lock row or waits for\n" +
		"// its row lock."
	rowTakeDoc = "// Take implements driver.RowTx: it records the holding in the locked row\n" +
		"// and returns the new fencing token, the statement's LastInsertId."
	rowHoldsDoc = "// Holds implements driver.RowTx: whether the holding id is still in force\n" +
		"// in the transaction (false after the server rolled it back)."
	rowFreeDoc = "// Free implements driver.RowTx: it marks the row free, in the holding's\n" +
		"// transaction, if id still holds it."
	closeDoc = "// Close implements driver.SessionConn: it returns the connection to the\n" +
		"// pool."
)

func (m *model) checkServerDoc() string {
	return comment("CheckServer probes the server now, as the first lock or job call does anyway: it fails with an error wrapping " +
		"ErrUnsupported when lockgen cannot run safely on it (TiDB or another engine it does not know, MySQL before 8.0, " +
		"MariaDB before 10.6, session or row locks on a Galera or Group Replication cluster), and with ErrInvalid when db " +
		"was opened without parseTime=true or the lock table is missing. Call it at startup to fail fast; " +
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

func (m *model) ownerDoc() string {
	return comment("Owner returns the identity recorded in the lock rows held through these Locks (see WithOwner).")
}

// pruneDoc documents Prune<Name>Locks.
func (lk *lockModel) pruneDoc() string {
	return comment(fmt.Sprintf("%s deletes the rows of the %s lock whose %s values have been free (released or expired) "+
		"for longer than olderThan and whose last fencing token was issued more than olderThan ago, both by the database clock, "+
		"%d rows per statement, and returns how many it deleted. Held keys are never touched. "+
		"olderThan must be at least the lock's ttl (ErrInvalid otherwise): a pruned %s acquired again starts its tokens "+
		"from the database clock at the start of the acquiring statement, and an acquisition whose answer takes ttl minus the safety margin or longer "+
		"is given back unused, so every token a holder uses comes from a statement that started after the pruned row's last token "+
		"and tokens keep rising. What remains: the database clock must not step back past the pruned tokens, and while a rollout "+
		"lengthens the ttl, prune with the longest one any node uses. "+
		"Call it from a leader or a timer so the lock table does not grow with every key ever used.",
		lk.Prune, lk.Name, lk.Key.Param, runtime.PruneBatch, lk.Key.Param))
}
