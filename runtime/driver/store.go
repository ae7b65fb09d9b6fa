package driver

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

// Target is what a Store runs on: the pool and tables the runtime probes at
// first use (server version, flavour, parseTime, missing tables).
type Target struct {
	// DB is the pool the store's statements run on. Only a test's store
	// leaves it nil, to hide its pool: the runtime then neither probes the
	// server nor reads the database clock, and the scheduler keeps time by
	// the Client's clock.
	DB *sql.DB
	// LocksTable is the lock table; RunsTable the runs table and
	// QueuesTable the queues table (queue pauses), both empty when the
	// store has no jobs.
	LocksTable, RunsTable, QueuesTable string
	// Migrations names where the migrations that create the tables are
	// ("db/migrations/ (relative to lockgen.yaml)"), for the error that
	// says they are missing.
	Migrations string
	// LocksMigration, RunsMigration and QueuesMigration name the
	// migration file that creates each table
	// ("db/migrations/0002_app_runs.up.sql (relative to lockgen.yaml)"),
	// for the error that says a table is missing or does not match it.
	// Empty: the error names Migrations.
	LocksMigration, RunsMigration, QueuesMigration string
	// HistoryMigration and HeadersMigration name the migrations that add
	// the runs table's history and headers columns, as LocksMigration
	// does.
	HistoryMigration, HeadersMigration string
	// LocksSessionMigration names the migration that adds the lock
	// table's session reservation columns, which the session strategy
	// needs, as LocksMigration does.
	LocksSessionMigration string
}

// SessionTokenRead is what SessionConn.TokenRead reads.
type SessionTokenRead struct {
	// Held: the connection holds the session lock.
	Held bool
	// Found: the lock row exists; RowToken is its token, the
	// reservation's bound.
	Found    bool
	RowToken int64
	// Mine: the row's owner is the owner asked about.
	Mine bool
	// Armed: the row shows a session holding and its reservation's
	// witness GET_LOCK is held, so no server restart happened since the
	// reservation was written.
	Armed bool
	// NextToken is the reservation's next token: session_offset plus
	// UUID_SHORT() drawn by this read.
	NextToken int64
}

// Reserved reports whether r lets the holding take NextToken as its
// fencing token without a write: the connection holds the session lock,
// the row is the owner's, its reservation is armed, and NextToken was
// drawn (SessionTryReserved answers 0 when its column did not see the
// lock held) and has not passed the reservation's bound, the row's token.
func (r SessionTokenRead) Reserved() bool {
	return r.Held && r.Found && r.Mine && r.Armed && r.NextToken > 0 && r.NextToken <= r.RowToken
}

// SessionTry is what SessionConn.TryReserved reads: GET_LOCK's answer
// (Got: 1 acquired, 0 held by another connection, -1 error) and, when the
// row exists (Found), SessionTokenRead's columns read in the same
// statement.
type SessionTry struct {
	Got int64
	SessionTokenRead
}

// SessionArmed is what RowTx.Takeover returns for a row it may take but
// whose session reservation is still armed: the caller disarms it
// (Store.SessionDisarm) and tries again.
const SessionArmed = 2

// SessionHeld is what LeaseAcquire returns for a row that shows a
// session-strategy holding: never a fencing token (tokens start at the
// database clock in microseconds).
const SessionHeld = 1

// Store runs the lock statements of every strategy. The code lockgen
// generates implements it with sqlc's typed queries for the application's
// lock table.
type Store interface {
	// Server returns the pool, the tables and where their migrations are.
	Server() Target
	// ServerGalera reports whether the server is a Galera node (wsrep_on).
	ServerGalera(ctx context.Context) (bool, error)

	// LeaseAcquire takes the row (name, key) for owner for ttl if it is
	// missing, released or expired by the database clock. It returns the
	// new fencing token, 0 when the row is held by someone else, or
	// SessionHeld when it shows a session-strategy holding, which
	// LeaseTakeover may take.
	LeaseAcquire(ctx context.Context, name, key, owner string, ttl time.Duration) (token int64, err error)
	// LeaseTakeover is LeaseAcquire that also takes a row marked by a
	// session holding whose server-side lock, the GET_LOCK named
	// sessionLock, is free (its holder's connection is gone). sessionLock
	// is the name the session holder computed for (name, key), passed as
	// it is: a name recomputed from the stored row could differ from it
	// and find a free lock while the holder lives. It returns the new
	// token, or 0.
	LeaseTakeover(ctx context.Context, name, key, owner, sessionLock string, ttl time.Duration) (token int64, err error)
	// LeaseRenew extends the lease to ttl from now by the database clock if
	// id still holds it and it has not expired. ok is false otherwise, and
	// may be false when the row already expires later (the caller reads
	// the row before it takes that as a loss). It must never move the
	// expiry back: a renewal that started first and stalled on the server
	// would otherwise write, after a later one, an expiry earlier than the
	// one the holder's deadline counts on.
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
	// LeaseRenewMany renews the holdings (keys[i], tokens[i]) of lock name
	// by owner that are still held and unexpired, to ttl from now by the
	// database clock, and returns how many it renewed. Each row is matched
	// with its own key's token. Like LeaseRenew, it never moves an expiry
	// back.
	LeaseRenewMany(ctx context.Context, name, owner string, keys []string, tokens []int64, ttl time.Duration) (renewed int64, err error)
	// LeaseGetMany reads the rows of lock name for keys; missing rows are
	// absent from the map.
	LeaseGetMany(ctx context.Context, name string, keys []string) (map[string]LeaseRow, error)
	// LeasePrune deletes up to limit rows of lock name (keyed rows only)
	// that have been free for longer than olderThan by the database clock
	// and whose token is more than olderThan (in microseconds) below the
	// database clock, and returns how many it deleted. It never waits on a
	// row another transaction holds (that row is kept for a later prune),
	// so a held row delays no acquisition of the lock's other keys.
	LeasePrune(ctx context.Context, name string, olderThan time.Duration, limit int) (int64, error)

	// SessionNamespace prefixes the GET_LOCK names of this store's locks.
	// GET_LOCK names are server-wide (all databases share them), so
	// applications sharing a server need distinct namespaces.
	SessionNamespace() string
	// SessionConn pins one connection of the pool for one holding.
	SessionConn(ctx context.Context) (SessionConn, error)
	// SessionIsUsed reports whether any connection holds the named lock.
	SessionIsUsed(ctx context.Context, lockName string) (bool, error)
	// SessionGuard runs inside tx, the caller's transaction: ok is true
	// when owner's session holding of the row (name, key) is still
	// current: connection connID, whose witness GET_LOCK is witness
	// (SessionConn.Identity), holds its session lock lockName. The row
	// then stays share-locked until tx ends.
	SessionGuard(ctx context.Context, tx *sql.Tx, name, key, owner, lockName string, connID int64, witness string) (ok bool, err error)
	// SessionDisarm ends, durably, the session reservation of the row
	// (name, key), so that no token is issued from it without a write.
	SessionDisarm(ctx context.Context, name, key string) error

	// RowBegin pins a connection, sets its innodb_lock_wait_timeout to
	// lockWait and its wait_timeout to idle (whole seconds, rounded up, at
	// least 1) and begins a READ COMMITTED transaction on it for one
	// holding (see BeginRow).
	RowBegin(ctx context.Context, lockWait, idle time.Duration) (RowTx, error)
	// RowPeek reads the lock row as a READ UNCOMMITTED reader sees it, so a
	// live row-strategy holding (not committed until its release) shows.
	RowPeek(ctx context.Context, name, key string) (row LeaseRow, found bool, err error)
}

// SessionConn is a connection pinned for one session-lock holding (or one
// lease holding's wake lock).
type SessionConn interface {
	// GetLock waits up to timeout on the server for the named lock:
	// 1 acquired, 0 timed out, -1 error (killed or refused).
	GetLock(ctx context.Context, lockName string, timeout time.Duration) (int64, error)
	// HoldsLock reports whether this connection holds the named lock.
	HoldsLock(ctx context.Context, lockName string) (bool, error)
	// ReleaseLock releases the named lock: 1 released, 0 held by another
	// connection, -1 not held at all.
	ReleaseLock(ctx context.Context, lockName string) (int64, error)
	// TokenRead reads, right after the session lock lockName was
	// acquired on this connection, whether owner's holding can take its
	// token from the row's reservation (SessionTokenRead.Reserved): one
	// locking read, no write. A missing row reads as not reserved.
	TokenRead(ctx context.Context, name, key, owner, lockName string) (SessionTokenRead, error)
	// Token returns the holding's fencing token, only while this
	// connection holds the session lock lockName: 0 when it does not, or
	// when the row (name, key) is held by a lease. It takes the token from
	// the row's reservation without writing when the reservation allows,
	// else records the holding in the row and, when the row was already
	// owner's, arms a reservation for reserve tokens more with this
	// connection's witness (see SessionPin.BoundGetLock). reserved: the
	// token came from the reservation (the statement changed no row).
	//
	// Identity is the connection's id and its witness GET_LOCK's name,
	// which Guard checks a session holding by (see Store.SessionGuard).
	Token(ctx context.Context, name, key, owner, lockName string, reserve int64) (token int64, reserved bool, err error)
	Identity(ctx context.Context) (connID int64, witness string, err error)
	// TryReserved takes the session lock lockName without waiting and
	// reads, in the same statement, what TokenRead reads: for a
	// connection kept from an earlier holding (Keepable), whose session
	// is bounded already. It locks the row with NOWAIT: on any error,
	// and when the row is missing (Found false, GET_LOCK not run), the
	// caller discards the connection and takes the longer way.
	TryReserved(ctx context.Context, name, key, owner, lockName string) (SessionTry, error)
	// Release releases the named lock and keeps the connection pinned,
	// its session bounded, for another holding: true when this
	// connection held the lock; otherwise, or on error, it discards the
	// connection (see SessionPin.Release).
	Release(ctx context.Context, lockName string) (bool, error)
	// Keepable reports whether the connection may be kept out of its
	// pool for the next holding while kept others are (see
	// SessionPin.Keepable); Bound is the session's wait_timeout in
	// seconds, 0 when unbounded.
	Keepable(kept int) bool
	Bound() int64
	// Free marks the row free if id still holds it (as Store.LeaseRelease),
	// on this connection, so releasing needs no second connection.
	Free(ctx context.Context, id LeaseID) (bool, error)
	// Renew extends the row held by id to ttl from now by the database
	// clock (as Store.LeaseRenew), on this connection: a lease holding
	// that pinned a connection for its wake lock renews on it, so it needs
	// nothing from a pool that may have no connection to spare.
	Renew(ctx context.Context, id LeaseID, ttl time.Duration) (bool, error)
	// BoundIdle makes the server end the session, freeing its named
	// locks, once it has heard nothing from the client for
	// IdleBound(idle), and keeps the previous wait_timeout for Close; the
	// connection then also holds a witness GET_LOCK, which Token records
	// (see SessionPin.BoundIdle).
	BoundIdle(ctx context.Context, idle time.Duration) error
	// BoundGetLock is BoundIdle and GetLock in one statement; not acquired,
	// it changed nothing (see SessionPin.BoundGetLock).
	BoundGetLock(ctx context.Context, idle time.Duration, lockName string, timeout time.Duration) (bool, error)
	// ReleaseClose releases the named lock and returns the connection to
	// the pool with its wait_timeout restored, in one statement; it
	// discards the connection instead when it did not hold the lock or on
	// error (see SessionPin.ReleaseClose).
	ReleaseClose(ctx context.Context, lockName string) (bool, error)
	// Close returns the connection to the pool, with the wait_timeout it
	// had before BoundIdle.
	Close() error
	// Discard closes the connection itself instead of returning it to the
	// pool, so the server drops any session lock it may still hold. The
	// runtime discards a connection whenever a holding's outcome is unsure.
	Discard() error
}

// RowTx is the transaction of one row-strategy holding.
type RowTx interface {
	// Tx is the transaction itself, handed to the holder's fn.
	Tx() *sql.Tx
	// LockNowait locks the row (name, key) FOR UPDATE NOWAIT; found is
	// false when the row does not exist (then nothing is locked). A held
	// row fails with the server's lock-wait error (1205 or 3572).
	LockNowait(ctx context.Context, name, key string) (found bool, err error)
	// LockWait creates the row (name, key) or waits for its row lock, up
	// to the transaction's lock wait timeout.
	LockWait(ctx context.Context, name, key string) error
	// Take records the holding in the row locked by LockNowait or LockWait
	// and returns its fencing token, 0 when the committed row shows a live
	// lease of another strategy (as during a rolling change), or
	// SessionHeld when it shows a session holding, which Takeover may
	// take.
	Take(ctx context.Context, name, key, owner string) (int64, error)
	// Takeover is Take that also takes a row marked by a session holding
	// whose server-side lock, the GET_LOCK named sessionLock (see
	// Store.LeaseTakeover), is free. It returns the new token, 0, or
	// SessionArmed when that row's session reservation is still armed
	// (then nothing changed).
	Takeover(ctx context.Context, name, key, owner, sessionLock string) (int64, error)
	// RestoreLockWait gives the connection back its previous
	// innodb_lock_wait_timeout, so fn's statements and later users of the
	// pooled connection are not affected by the lock's wait.
	RestoreLockWait(ctx context.Context) error
	// Holds reports whether the holding id is still in force in the
	// transaction: false when the server rolled it back (a deadlock, a
	// killed connection).
	Holds(ctx context.Context, id LeaseID) (bool, error)
	// Free marks the row free if id still holds it, inside the transaction.
	Free(ctx context.Context, id LeaseID) (bool, error)
	// Commit commits the transaction and returns the connection to the
	// pool; Rollback rolls it back and does the same. After a failed
	// Commit or Rollback the connection is discarded, never pooled.
	Commit() error
	Rollback() error
}
