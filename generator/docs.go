package generator

import (
	"fmt"
	"strings"
	"time"
)

// This file writes the doc comments of the generated code. Each states the
// facts of the declaration (TTL, renewal, wait) and what the errors mean;
// the wording is decided here, the jennifer code only prints it.

// docWidth is the width of generated doc comment text, "// " excluded.
const docWidth = 76

// comment formats paragraphs as a // comment wrapped at docWidth, with an
// empty comment line between paragraphs. The result starts with "//", which
// makes jennifer print it verbatim.
func comment(paragraphs ...string) string {
	var lines []string
	for i, p := range paragraphs {
		if i > 0 {
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

// formatDuration writes d as in the spec: "3s", "1m", "1m30s", "1.5s",
// "500ms" (time.Duration.String without trailing zero units).
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (m *model) packageDoc() string {
	return comment(fmt.Sprintf("Package %s gives typed access to the distributed locks declared in %s. "+
		"Each lock is a lease: a row of the MySQL/MariaDB table %s that expires by the database clock unless its holder renews it. "+
		"The runtime (%s) acquires, renews and releases the leases and hands out fencing tokens; "+
		"this package binds the declared names, keys and timings to it.",
		m.Package, m.SpecName, m.Table, runtimePath))
}

func (m *model) optionDoc() string {
	return comment("Option configures New. See WithOwner and WithLogger.")
}

func (m *model) withOwnerDoc() string {
	return comment("WithOwner sets the identity recorded in the rows of the locks held through the Locks, " +
		"as the Holder methods report it in runtime.Holder.Owner. It must be 1 to 191 bytes; " +
		"New fails with runtime.ErrInvalid otherwise. Default: \"<hostname>-<pid>-<random>\", different for every Locks. " +
		"The holdings of one Locks share its owner and are told apart by their fencing tokens.")
}

func (m *model) withLoggerDoc() string {
	return comment("WithLogger sets the logger that reports lost leases and renewal trouble. Default: slog.Default().")
}

func (m *model) locksDoc() string {
	return comment(fmt.Sprintf("Locks gives typed access to the locks declared in %s. It is safe for concurrent use; "+
		"create one per process (or per node in tests). Two Locks behave like two nodes: "+
		"a lock held through one is busy for the other.", m.SpecName))
}

func (m *model) newDoc() string {
	files := make([]string, 0, len(m.Migrations))
	for _, f := range m.Migrations {
		if !strings.HasSuffix(f.Path, ".down.sql") {
			files = append(files, f.Path)
		}
	}
	return comment(
		fmt.Sprintf("New returns the locks declared in %s, running their statements on db, each as its own autocommit statement, "+
			"never inside a transaction of yours. It does not touch the database.", m.SpecName),
		fmt.Sprintf("The table %s must exist: apply %s (relative to %s) with your migration tool. "+
			"With github.com/go-sql-driver/mysql, open db with parseTime=true.",
			m.Table, strings.Join(files, " and "), m.SpecName),
		"New fails with an error wrapping runtime.ErrInvalid when db is nil or an option is invalid.")
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
	return s + fmt.Sprintf(" %s is the key stored in the lock row: it must be 1 to 191 bytes, "+
		"otherwise the call fails with runtime.ErrInvalid.", k.Param)
}

// leaseDoc states the lease's timing.
func (lk *lockModel) leaseDoc() string {
	return fmt.Sprintf("The lease lasts %s by the database clock and is renewed every %s",
		formatDuration(lk.TTL), formatDuration(lk.RenewEvery))
}

// tokenDoc explains the fencing token.
const tokenDoc = "lease.Token() is the fencing token of this holding, greater than that of every earlier holding: " +
	"pass it with the writes that a stale holder must not make."

func (lk *lockModel) withDoc() string {
	busy := fmt.Sprintf("If another holder has it, %s waits up to %s for it (less if ctx ends first) and then returns runtime.ErrNotAcquired.",
		lk.With, formatDuration(lk.Wait))
	if lk.Wait == 0 {
		busy = fmt.Sprintf("It makes one attempt: if another holder has the lock, %s returns runtime.ErrNotAcquired at once "+
			"(the lock declares no wait).", lk.With)
	}
	return comment(
		fmt.Sprintf("%s runs fn while holding %s and releases the lock when fn returns or panics "+
			"(the panic goes on after the release). fn's ctx is done when ctx is. "+
			"%s returns fn's error, joined with the release error if any. %s", lk.With, lk.what(), lk.With, lk.keyDoc()),
		busy,
		lk.leaseDoc()+" while fn runs. If no renewal succeeds in time, fn's ctx is cancelled with cause runtime.ErrLeaseLost "+
			"before anyone else can take the lock, and "+lk.With+" returns an error wrapping runtime.ErrLeaseLost even if fn returned nil: "+
			"the critical section may not have been exclusive to its end.",
		tokenDoc)
}

func (lk *lockModel) tryDoc() string {
	return comment(
		fmt.Sprintf("%s makes one attempt to acquire %s, without waiting, and returns runtime.ErrNotAcquired if another holder has it. %s",
			lk.Try, lk.what(), lk.keyDoc()),
		lk.leaseDoc()+" in the background until lease.Release, which the caller must call. "+
			"lease.Context() ends when the lease is lost (cause runtime.ErrLeaseLost) or released. "+tokenDoc,
		fmt.Sprintf("Any other error means the outcome is unknown: the lock may then stay held, unused, for up to %s.",
			formatDuration(lk.TTL)))
}

func (lk *lockModel) acquireDoc() string {
	first := fmt.Sprintf("%s acquires %s, waiting up to %s (less if ctx ends first) while another holder has it; "+
		"it then returns runtime.ErrNotAcquired, or ctx's error when ctx ended. "+
		"Waiting polls with backoff and wakes at once when a holder in this process releases the lock. %s",
		lk.Acquire, lk.what(), formatDuration(lk.Wait), lk.keyDoc())
	if lk.Wait == 0 {
		first = fmt.Sprintf("%s acquires %s like %s: the lock declares no wait, so it makes one attempt "+
			"and returns runtime.ErrNotAcquired if another holder has it. %s", lk.Acquire, lk.what(), lk.Try, lk.keyDoc())
	}
	return comment(first,
		lk.leaseDoc()+" in the background until lease.Release, which the caller must call. "+
			"lease.Context() ends when the lease is lost (cause runtime.ErrLeaseLost) or released. "+tokenDoc)
}

func (lk *lockModel) holderDoc() string {
	return comment(fmt.Sprintf("%s reads who holds %s, by the database clock. "+
		"Holder.Held is false when nobody does (never acquired, released or expired); "+
		"Holder.Token is the fencing token of the current or last holding.", lk.Holder, lk.what()))
}

func (m *model) storeDoc() string {
	return comment(fmt.Sprintf("store implements runtime.Store with the sqlc-generated queries of %s; "+
		"each call is one autocommit statement on the pool.", m.DBPackage))
}

const (
	leaseAcquireDoc = "// LeaseAcquire implements runtime.Store. The fencing token is the statement's\n" +
		"// LastInsertId; it is 0 when another holder has the row."
	leaseRenewDoc = "// LeaseRenew implements runtime.Store. ok is true when the statement changed\n" +
		"// the row: id still held it and it had not expired."
	leaseReleaseDoc = "// LeaseRelease implements runtime.Store. ok is true when the statement\n" +
		"// changed the row: id still held it."
	leaseGetDoc = "// LeaseGet implements runtime.Store. found is false when the row does not\n" +
		"// exist."
	leaseGuardDoc = "// LeaseGuard implements runtime.Store. It runs in tx, the caller's\n" +
		"// transaction; ok is true when id still holds the row, which then stays\n" +
		"// share-locked until tx ends."
)

func (m *model) ownerDoc() string {
	return comment("Owner returns the identity recorded in the lock rows held through these Locks (see WithOwner).")
}
