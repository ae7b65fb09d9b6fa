package generator

import (
	"fmt"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
)

// The doc comments of each lock's generated methods.

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
		idle := lk.IdleTimeout
		if idle == 0 {
			idle = driver.RowIdleBound
		}
		return "Strategy row: the lock row stays locked (SELECT ... FOR UPDATE) by a transaction that lasts the holding; " +
			"the server frees it when that transaction ends, also when the holder's connection dies " +
			fmt.Sprintf("or stays silent for %s (idle_timeout: a holder cut off by a partition, or a holding that sends no statement that long), ", spec.FormatDuration(idle)) +
			"and then rolls back the transaction's writes"
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
			"(GET_LOCK's IS_USED_LOCK), Holder.Owner is that of the current or last holding and Holder.Token the lock row's, "+
			"at least that holding's token (holdings that took theirs from a reservation show its bound). "+
			"Holder.Remaining is always 0: a session lock lasts as long as its holder's connection.", lk.Holder, lk.what()))
	}
	return comment(fmt.Sprintf("%s reads who holds %s, by the database clock. "+
		"Holder.Held is false when nobody does (never acquired, released or expired); "+
		"Holder.Token is the fencing token of the current or last holding.", lk.Holder, lk.what()))
}

// exclusionDoc says how far two leaders are kept apart. Only a lease lock
// can be a leader (the spec refuses the others).
func (lk *lockModel) exclusionDoc() string {
	return "Two leaders never run fn at the same time as long as fn stops when its ctx ends: " +
		"the lease's local deadline cancels it before the database lets a follower in."
}

// takeoverDoc says how soon a follower replaces a crashed leader.
func (lk *lockModel) takeoverDoc() string {
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
	return comment(fmt.Sprintf("%s reads the current leader of the %s lock as any observer sees it, %s.",
		lk.Leader.Current, lk.Name, what))
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
