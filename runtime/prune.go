package runtime

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/probe"
)

// PruneBatch is the most rows one prune statement deletes.
const PruneBatch = 1000

// Prune deletes the rows of this keyed lock whose keys have been free
// (released or expired) for longer than olderThan and whose last fencing
// token was issued more than olderThan ago, both by the database clock,
// PruneBatch rows per statement, so that a lock keyed by order or tenant
// IDs does not grow forever. Held rows are never touched.
//
// A pruned key acquired again starts its tokens from the database clock in
// microseconds. The clock is read when the acquiring statement starts, so
// a statement that waited in the server's row lock queue carries a clock
// from before its wait; that is why olderThan must be at least the lock's
// TTL: an acquisition whose answer takes TTL − SafetyMargin or longer is
// given back and never used (lease strategy; session strategy, for its
// token statement), so every token a holder uses came from a statement
// that started less than olderThan before this Prune and finds any row
// whose token it has not seen. (Row-strategy holdings take their token in
// a statement of their own after their row lock is granted, so a row lock,
// which has no TTL, may prune at any age; while nodes still run it as a
// lease or session lock, prune with their TTL.) Tokens
// therefore keep rising across a prune as long as the database clock does
// not step back (a row whose token is ahead of the clock is kept), and as
// long as every node uses a TTL no longer than this Lock's for the lock:
// during a rollout that lengthens it, prune with the longer one.
//
// A row a session holding marked (session holdings leave their far-future
// mark when they end) is deleted under the same age rules once its
// server-side lock is free: IS_FREE_LOCK of the name the session holders
// compute for its key, read while the row is locked, so a session holder
// that got its GET_LOCK before keeps the row, and one that gets it after
// waits for the deletion and writes a new row with a token from its
// statement's start, above the deleted one as for any other row.
//
// Run it from a leader or a timer. It returns how many rows it deleted, and
// ErrInvalid for an unkeyed lock or an olderThan below the lock's TTL; like
// every entry point it first checks the server, once per Client, and fails
// as Try does when the server or the connection cannot run the lock.
func (l *Lock) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	ps := l.client.store
	switch {
	case !l.cfg.Keyed:
		return 0, fmt.Errorf("%w: lock %q is not keyed; there is nothing to prune", ErrInvalid, l.cfg.Name)
	case olderThan < 0:
		return 0, fmt.Errorf("%w: negative prune age %v", ErrInvalid, olderThan)
	case olderThan < l.cfg.TTL:
		return 0, fmt.Errorf("%w: prune age %v is below the ttl %v of lock %q: an acquisition still waiting for its answer could re-create a pruned row with a lower fencing token", ErrInvalid, olderThan, l.cfg.TTL, l.cfg.Name)
	}
	if err := l.client.checkServer(ctx, nil, probe.Feature(l.cfg.Strategy)); err != nil {
		return 0, err
	}
	var total int64
	for {
		n, err := ps.LeasePrune(ctx, l.cfg.Name, olderThan, PruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("lockgen: prune lock %q: %w", l.cfg.Name, err)
		}
		if n < PruneBatch {
			break
		}
	}
	after := ""
	for {
		n, last, scanned, err := l.pruneSessionMarks(ctx, olderThan, after)
		total += n
		if err != nil {
			return total, fmt.Errorf("lockgen: prune lock %q: session marks: %w", l.cfg.Name, err)
		}
		if scanned < PruneBatch {
			return total, nil
		}
		after = last // held marks stay: read on from the last key
	}
}

// pruneSessionMarks deletes up to PruneBatch rows marked by session
// holdings whose key is above after, whose token is older than olderThan
// and whose server-side lock is free, in one short READ COMMITTED
// transaction: the rows are read in key order FOR UPDATE SKIP LOCKED (as
// LeasePrunable reads the free rows), and each is deleted only if
// IS_FREE_LOCK of its key's GET_LOCK name, computed here as session holders
// compute it, is 1 when the DELETE runs. It returns the rows deleted, the
// last key read (the next call reads on from it: a held mark is read once
// per Prune, not again and again) and how many rows it read. A store
// without a pool (a test's) has none to prune.
func (l *Lock) pruneSessionMarks(ctx context.Context, olderThan time.Duration, after string) (deleted int64, last string, scanned int, err error) {
	ss := l.client.store
	target := ss.Server()
	if target.DB == nil {
		return 0, "", 0, nil
	}
	table := target.LocksTable
	err = driver.InTxIdle(ctx, target.DB, 1, func(conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, "SELECT lock_key FROM "+table+
			" WHERE name = ? AND lock_key > ? AND expires_at = '9999-12-31 23:59:59'"+
			" AND token < CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', (UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)) AS SIGNED) - ?"+
			" ORDER BY lock_key LIMIT ? FOR UPDATE SKIP LOCKED", l.cfg.Name, after, olderThan.Microseconds(), PruneBatch)
		if err != nil {
			return err
		}
		var keys []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				_ = rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		scanned = len(keys)
		if len(keys) == 0 {
			return nil
		}
		last = keys[len(keys)-1]
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = sessionLockName(ss.SessionNamespace(), l.cfg.Name, k)
		}
		deleted, err = driver.DeleteFreeSessionMarks(ctx, conn, table, l.cfg.Name, keys, names)
		return err
	})
	if err != nil {
		// The commit may not have landed: nothing is known deleted.
		return 0, last, scanned, err
	}
	return deleted, last, scanned, nil
}
