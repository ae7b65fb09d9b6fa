// Package sqlstore implements runtime.Store over the sqlc queries compiled
// from the repository's queries/ (default table prefix), for the runtime's
// own tests. It is the same glue lockgen generates into applications.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/sqlcdb"
)

// Store implements runtime.Store; every call is one autocommit statement.
type Store struct{ q *sqlcdb.Queries }

var _ runtime.Store = Store{}

// New returns a Store running on db.
func New(db sqlcdb.DBTX) Store { return Store{q: sqlcdb.New(db)} }

// LeaseAcquire implements runtime.Store.
func (s Store) LeaseAcquire(ctx context.Context, name, key, owner string, ttl time.Duration) (int64, error) {
	res, err := s.q.LeaseAcquire(ctx, sqlcdb.LeaseAcquireParams{Name: name, LockKey: key, Owner: owner, TtlUs: ttl.Microseconds()})
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// LeaseRenew implements runtime.Store.
func (s Store) LeaseRenew(ctx context.Context, id runtime.LeaseID, ttl time.Duration) (bool, error) {
	n, err := s.q.LeaseRenew(ctx, sqlcdb.LeaseRenewParams{TtlUs: ttl.Microseconds(), Name: id.Name, LockKey: id.Key, Owner: id.Owner, Token: id.Token})
	return n > 0, err
}

// LeaseRelease implements runtime.Store.
func (s Store) LeaseRelease(ctx context.Context, id runtime.LeaseID) (bool, error) {
	n, err := s.q.LeaseRelease(ctx, sqlcdb.LeaseReleaseParams{Name: id.Name, LockKey: id.Key, Owner: id.Owner, Token: id.Token})
	return n > 0, err
}

// LeaseGet implements runtime.Store.
func (s Store) LeaseGet(ctx context.Context, name, key string) (runtime.LeaseRow, bool, error) {
	r, err := s.q.LeaseGet(ctx, sqlcdb.LeaseGetParams{Name: name, LockKey: key})
	if errors.Is(err, sql.ErrNoRows) {
		return runtime.LeaseRow{}, false, nil
	}
	if err != nil {
		return runtime.LeaseRow{}, false, err
	}
	return runtime.LeaseRow{
		Owner:      r.Owner,
		Token:      r.Token,
		AcquiredAt: r.AcquiredAt,
		ExpiresAt:  r.ExpiresAt,
		Remaining:  time.Duration(r.RemainingUs) * time.Microsecond,
	}, true, nil
}

// LeaseGuard implements runtime.Store.
func (s Store) LeaseGuard(ctx context.Context, tx *sql.Tx, id runtime.LeaseID) (bool, error) {
	_, err := s.q.WithTx(tx).LeaseGuard(ctx, sqlcdb.LeaseGuardParams{Name: id.Name, LockKey: id.Key, Owner: id.Owner, Token: id.Token})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
