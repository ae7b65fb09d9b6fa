package runtime

import (
	"context"
	"database/sql"
	"time"
)

// LeaseID names one holding of a lock: the row (Name, Key) and the holder
// (Owner, Token). Renew and release match all four.
type LeaseID struct {
	Name  string
	Key   string
	Owner string
	Token int64
}

// LeaseRow is a lock row as the database sees it.
type LeaseRow struct {
	Owner      string
	Token      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	// Remaining is the time left by the database clock when the row was
	// read; zero or negative when the lease expired or was released.
	Remaining time.Duration
}

// Store runs the lock statements. Each method is one autocommit statement on
// a pool, never inside a caller's transaction. The code lockgen generates
// implements Store with sqlc's typed queries; implementations only map
// parameters and results, the decisions are the runtime's.
type Store interface {
	// LeaseAcquire takes the row (name, key) for owner for ttl if it is
	// missing, released or expired by the database clock. It returns the new
	// fencing token, or 0 when the row is held by someone else.
	LeaseAcquire(ctx context.Context, name, key, owner string, ttl time.Duration) (token int64, err error)
	// LeaseRenew extends the lease to ttl from now by the database clock if
	// id still holds it and it has not expired. ok is false otherwise.
	LeaseRenew(ctx context.Context, id LeaseID, ttl time.Duration) (ok bool, err error)
	// LeaseRelease frees the row if id still holds it. ok is false when it
	// did not (already released, or taken by another holder).
	LeaseRelease(ctx context.Context, id LeaseID) (ok bool, err error)
	// LeaseGet reads the row; found is false when it does not exist.
	LeaseGet(ctx context.Context, name, key string) (row LeaseRow, found bool, err error)
	// LeaseGuard runs inside tx, the caller's transaction: ok is true when
	// id still holds the row unexpired, and the row is then share-locked
	// until tx ends, so nobody can acquire it before tx commits.
	LeaseGuard(ctx context.Context, tx *sql.Tx, id LeaseID) (ok bool, err error)
}
