// Package sqlstore implements runtime.Store over the sqlc queries compiled
// from the repository's queries/ (default table prefix), for the runtime's
// own tests. It is the same glue lockgen generates into applications.
package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
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

// Namespace is the GET_LOCK namespace of the test store: the default table
// prefix.
const Namespace = "lockgen_"

// SessionStore adds the session strategy to Store; it needs the pool
// itself to pin connections.
type SessionStore struct {
	Store
	db      *sql.DB
	inserts *runtime.InsertStmts
}

var (
	_ runtime.SessionStore = SessionStore{}
	_ runtime.ServerStore  = SessionStore{}
)

// NewSession returns a SessionStore running on db.
func NewSession(db *sql.DB) SessionStore {
	return SessionStore{Store: New(db), db: db, inserts: runtime.NewInsertStmts(db, Namespace+"runs")}
}

// Server implements runtime.ServerStore.
func (s SessionStore) Server() runtime.ServerTarget {
	return runtime.ServerTarget{DB: s.db, LocksTable: Namespace + "locks", RunsTable: Namespace + "runs", Migrations: "queries/schema.sql"}
}

// SessionNamespace implements runtime.SessionStore.
func (s SessionStore) SessionNamespace() string { return Namespace }

// SessionConn implements runtime.SessionStore.
func (s SessionStore) SessionConn(ctx context.Context) (runtime.SessionConn, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return sessionConn{conn: conn, q: sqlcdb.New(conn)}, nil
}

// SessionIsUsed implements runtime.SessionStore.
func (s SessionStore) SessionIsUsed(ctx context.Context, lockName string) (bool, error) {
	n, err := s.q.SessionIsUsed(ctx, lockName)
	return n == 1, err
}

// ServerGalera implements runtime.SessionStore.
func (s SessionStore) ServerGalera(ctx context.Context) (bool, error) {
	n, err := s.q.ServerGalera(ctx)
	return n == 1, err
}

type sessionConn struct {
	conn *sql.Conn
	q    *sqlcdb.Queries
}

func (c sessionConn) GetLock(ctx context.Context, lockName string, timeout time.Duration) (int64, error) {
	return c.q.SessionGetLock(ctx, sqlcdb.SessionGetLockParams{LockName: lockName, TimeoutUs: timeout.Microseconds()})
}

func (c sessionConn) HoldsLock(ctx context.Context, lockName string) (bool, error) {
	n, err := c.q.SessionHoldsLock(ctx, lockName)
	return n == 1, err
}

func (c sessionConn) ReleaseLock(ctx context.Context, lockName string) (int64, error) {
	return c.q.SessionReleaseLock(ctx, lockName)
}

func (c sessionConn) Token(ctx context.Context, name, key, owner string) (int64, error) {
	res, err := c.q.SessionToken(ctx, sqlcdb.SessionTokenParams{Name: name, LockKey: key, Owner: owner})
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (c sessionConn) Free(ctx context.Context, id runtime.LeaseID) (bool, error) {
	n, err := c.q.LeaseRelease(ctx, sqlcdb.LeaseReleaseParams{Name: id.Name, LockKey: id.Key, Owner: id.Owner, Token: id.Token})
	return n > 0, err
}

func (c sessionConn) Renew(ctx context.Context, id runtime.LeaseID, ttl time.Duration) (bool, error) {
	n, err := c.q.LeaseRenew(ctx, sqlcdb.LeaseRenewParams{TtlUs: ttl.Microseconds(), Name: id.Name, LockKey: id.Key, Owner: id.Owner, Token: id.Token})
	return n > 0, err
}

func (c sessionConn) Close() error { return c.conn.Close() }

func (c sessionConn) Discard() error {
	_ = c.conn.Raw(func(any) error { return driver.ErrBadConn }) // marks it bad: not pooled
	return c.conn.Close()
}

// LeaseRenewMany implements runtime.BatchStore.
func (s Store) LeaseRenewMany(ctx context.Context, name, owner string, keys []string, tokens []int64, ttl time.Duration) (int64, error) {
	holdings := make([]sql.NullString, len(keys))
	for i, k := range keys {
		holdings[i] = sql.NullString{String: k + ":" + strconv.FormatInt(tokens[i], 10), Valid: true}
	}
	return s.q.LeaseRenewMany(ctx, sqlcdb.LeaseRenewManyParams{TtlUs: ttl.Microseconds(), Name: name, Owner: owner, LockKeys: keys, Holdings: holdings})
}

// LeaseGetMany implements runtime.BatchStore.
func (s Store) LeaseGetMany(ctx context.Context, name string, keys []string) (map[string]runtime.LeaseRow, error) {
	rows, err := s.q.LeaseGetMany(ctx, sqlcdb.LeaseGetManyParams{Name: name, LockKeys: keys})
	if err != nil {
		return nil, err
	}
	m := make(map[string]runtime.LeaseRow, len(rows))
	for _, r := range rows {
		m[r.LockKey] = runtime.LeaseRow{Owner: r.Owner, Token: r.Token, Remaining: time.Duration(r.RemainingUs) * time.Microsecond}
	}
	return m, nil
}

// LeasePrune implements runtime.PruneStore.
func (s Store) LeasePrune(ctx context.Context, name string, olderThan time.Duration, limit int) (int64, error) {
	return s.q.LeasePrune(ctx, sqlcdb.LeasePruneParams{Name: name, OlderThanUs: olderThan.Microseconds(), Limit: int32(limit)})
}

var _ runtime.RowStore = SessionStore{}

// RowBegin implements runtime.RowStore.
func (s SessionStore) RowBegin(ctx context.Context, lockWait time.Duration) (runtime.RowTx, error) {
	rc, err := runtime.BeginRow(ctx, s.db, lockWait)
	if err != nil {
		return nil, err
	}
	return rowTx{RowConn: rc, q: s.q.WithTx(rc.Tx())}, nil
}

// RowPeek implements runtime.RowStore.
func (s SessionStore) RowPeek(ctx context.Context, name, key string) (row runtime.LeaseRow, found bool, err error) {
	err = runtime.PeekRow(ctx, s.db, func(tx *sql.Tx) error {
		row, found, err = Store{q: s.q.WithTx(tx)}.LeaseGet(ctx, name, key)
		return err
	})
	return row, found, err
}

type rowTx struct {
	*runtime.RowConn
	q *sqlcdb.Queries
}

func (t rowTx) LockNowait(ctx context.Context, name, key string) (bool, error) {
	_, err := t.q.RowLockNowait(ctx, sqlcdb.RowLockNowaitParams{Name: name, LockKey: key})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (t rowTx) LockWait(ctx context.Context, name, key string) error {
	return t.q.RowLock(ctx, sqlcdb.RowLockParams{Name: name, LockKey: key})
}

func (t rowTx) Take(ctx context.Context, name, key, owner string) (int64, error) {
	res, err := t.q.RowTake(ctx, sqlcdb.RowTakeParams{Name: name, LockKey: key, Owner: owner})
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (t rowTx) Holds(ctx context.Context, id runtime.LeaseID) (bool, error) {
	_, err := t.q.RowHolds(ctx, sqlcdb.RowHoldsParams{Name: id.Name, LockKey: id.Key, Owner: id.Owner, Token: id.Token})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (t rowTx) Free(ctx context.Context, id runtime.LeaseID) (bool, error) {
	n, err := t.q.LeaseRelease(ctx, sqlcdb.LeaseReleaseParams{Name: id.Name, LockKey: id.Key, Owner: id.Owner, Token: id.Token})
	return n > 0, err
}
