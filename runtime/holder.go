package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// Holder is the current holder of a lock as the database sees it.
type Holder struct {
	// Held is false when the row is missing, released or expired.
	Held  bool
	Owner string
	// Token is the fencing token of the current (or last) holding; for a
	// session lock, the lock row's token, which is at least that
	// holding's: holdings that took their tokens from a reservation show
	// its bound (docs/strategies.md, "Session tokens without a write").
	Token int64
	// Remaining is the lease time left by the database clock when read;
	// zero for a session-strategy holding, which has no expiry (it lasts
	// as long as its holder's connection).
	Remaining time.Duration
}

// Holder reads who holds the lock for key, by the database clock. Like
// every entry point it first checks the server, once per Client: an error
// wrapping ErrUnsupported or ErrInvalid when the server or the connection
// (parseTime=true missing, say) cannot run the lock, or its table is
// missing or unlike its migration.
func (l *Lock) Holder(ctx context.Context, key string) (Holder, error) {
	key, err := l.admit(ctx, key)
	if err != nil {
		return Holder{}, err
	}
	return l.strategy.holder(ctx, l, key)
}

// leaseHolder reads a lease lock's holder from its row, by the database
// clock.
func (l *Lock) leaseHolder(ctx context.Context, key string) (Holder, error) {
	row, found, err := l.client.store.LeaseGet(ctx, l.cfg.Name, key)
	if err != nil {
		return Holder{}, fmt.Errorf("lockgen: read holder of %s: %w", l.describe(key), err)
	}
	if !found {
		return Holder{}, nil
	}
	if row.ExpiresAt.Year() == 9999 {
		// A session holding (a node on strategy session, as during a
		// rolling change): held while its server-side lock is, which is
		// also when an acquire here would not take the row.
		return l.sessionRowHolder(ctx, key, row)
	}
	held := row.Owner != "" && row.Remaining > 0
	return Holder{Held: held, Owner: row.Owner, Token: row.Token, Remaining: max(row.Remaining, 0)}, nil
}

// sessionRowHolder reads the holder of a row that shows a session holding
// (its far-future expiry would overflow Remaining): held while the session
// lock is.
func (l *Lock) sessionRowHolder(ctx context.Context, key string, row driver.LeaseRow) (Holder, error) {
	ss := l.client.store
	used, err := ss.SessionIsUsed(ctx, sessionLockName(ss.SessionNamespace(), l.cfg.Name, key))
	if err != nil {
		return Holder{}, fmt.Errorf("lockgen: read holder of %s: %w", l.describe(key), err)
	}
	return Holder{Held: used, Owner: row.Owner, Token: row.Token}, nil
}
