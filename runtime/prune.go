package runtime

import (
	"context"
	"fmt"
	"time"
)

// PruneStore is a Store that deletes long-free rows of keyed locks.
type PruneStore interface {
	Store
	// LeasePrune deletes up to limit rows of lock name (keyed rows only)
	// that have been free for longer than olderThan by the database clock,
	// and returns how many it deleted.
	LeasePrune(ctx context.Context, name string, olderThan time.Duration, limit int) (int64, error)
}

// PruneBatch is the most rows one prune statement deletes.
const PruneBatch = 1000

// Prune deletes the rows of this keyed lock whose keys have been free
// (released or expired) for longer than olderThan, PruneBatch rows per
// statement, so that a lock keyed by order or tenant IDs does not grow
// forever. Held rows are never touched. A pruned key acquired again starts
// its tokens from the database clock in microseconds, above every token it
// had before, so fencing tokens keep rising (as long as the database clock
// does not step back past the pruned tokens). Run it from a leader or a
// timer. It returns how many rows it deleted, and ErrInvalid for an unkeyed
// lock, a negative olderThan or a store without PruneStore.
func (l *Lock) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	ps, ok := l.client.store.(PruneStore)
	switch {
	case !l.cfg.Keyed:
		return 0, fmt.Errorf("%w: lock %q is not keyed; there is nothing to prune", ErrInvalid, l.cfg.Name)
	case olderThan < 0:
		return 0, fmt.Errorf("%w: negative prune age %v", ErrInvalid, olderThan)
	case !ok:
		return 0, fmt.Errorf("%w: the store of lock %q does not implement PruneStore", ErrInvalid, l.cfg.Name)
	}
	var total int64
	for {
		n, err := ps.LeasePrune(ctx, l.cfg.Name, olderThan, PruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("lockgen: prune %s: %w", l.describe(""), err)
		}
		if n < PruneBatch {
			return total, nil
		}
	}
}
