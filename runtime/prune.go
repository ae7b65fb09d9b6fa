package runtime

import (
	"context"
	"fmt"
	"time"

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
			return total, nil
		}
	}
}
