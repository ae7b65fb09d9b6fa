package driver

import (
	"context"
	"crypto/rand"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// SessionPin is the connection pinned for one session-lock holding (or a
// lease holding's wake lock). Stores embed it in their SessionConn: it
// bounds how long the server keeps the session, and with it the named
// locks, once it stops hearing from the client, and gives the connection
// back to the pool as it found it.
type SessionPin struct {
	db   *sql.DB
	conn *sql.Conn
	// bound: BoundIdle changed the session's wait_timeout, which Close
	// restores; idle is the bound it set, in seconds.
	bound bool
	idle  int64
	// stmts are the queries prepared on the connection (see QueryContext),
	// runs how often each query ran on it; both are used by one holding
	// at a time, under mu (a holding's renewals run beside its Guard).
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	runs  map[string]int
}

// PinSession pins one connection of db for one holding.
func PinSession(ctx context.Context, db *sql.DB) (*SessionPin, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &SessionPin{db: db, conn: conn}, nil
}

// Conn is the pinned connection.
func (p *SessionPin) Conn() *sql.Conn { return p.conn }

// preparedAfter is how many times a query runs on a pinned connection as
// a plain statement before the pin prepares it there: a connection kept
// between holdings (see Keepable) runs the same few queries again and
// again, and a prepared statement is neither parsed again nor sent as
// text, while one used once would pay the extra PREPARE round trip for
// nothing.
const preparedAfter = 1

// stmt is query prepared on the pinned connection, once it has run there
// preparedAfter times (nil before, and when preparing failed: the query
// then runs as a plain statement).
func (p *SessionPin) stmt(ctx context.Context, query string) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.stmts[query]; st != nil {
		return st
	}
	if p.runs == nil {
		p.runs = map[string]int{}
	}
	if p.runs[query]++; p.runs[query] <= preparedAfter {
		return nil
	}
	st, err := p.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if p.stmts == nil {
		p.stmts = map[string]*sql.Stmt{}
	}
	p.stmts[query] = st
	return st
}

// ExecContext runs query on the pinned connection, as a statement
// prepared there once it has run there before (see preparedAfter). With
// QueryContext, QueryRowContext and PrepareContext it makes the pin the
// DBTX of the store's generated queries.
func (p *SessionPin) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.conn.ExecContext(ctx, query, args...)
}

// QueryContext is ExecContext for a query that returns rows.
func (p *SessionPin) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.conn.QueryContext(ctx, query, args...)
}

// QueryRowContext is ExecContext for a query that returns one row.
func (p *SessionPin) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.conn.QueryRowContext(ctx, query, args...)
}

// PrepareContext prepares query on the pinned connection; the caller
// closes the statement.
func (p *SessionPin) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.conn.PrepareContext(ctx, query)
}

// closeStmts closes the statements prepared on the connection, before it
// goes back to the pool or is discarded (the server keeps a prepared
// statement as long as its session, and counts them all against
// max_prepared_stmt_count).
func (p *SessionPin) closeStmts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.stmts {
		_ = st.Close()
	}
	p.stmts, p.runs = nil, nil
}

// maxKept bounds the connections one runtime keeps out of a pool without
// a limit on open connections (see Keepable).
const maxKept = 16

// Keepable reports whether the connection may be kept out of its pool
// after a holding, for the next holding (with the bound idle seconds
// Bound reports), while kept others are: only when the pool's limit on
// open connections (none, or at least four times kept+1, with at most
// half of the pool in use, this connection included) leaves the rest of
// the application connections to spare, and the session is bounded. A
// kept connection holds no named lock but its witness.
func (p *SessionPin) Keepable(kept int) bool {
	if !p.bound || p.idle <= 0 {
		return false
	}
	st := p.db.Stats()
	if st.MaxOpenConnections == 0 {
		return kept < maxKept
	}
	return 4*(kept+1) <= st.MaxOpenConnections && 2*st.InUse <= st.MaxOpenConnections
}

// Bound is the session's wait_timeout in seconds as BoundIdle or
// BoundGetLock set it, 0 when neither did.
func (p *SessionPin) Bound() int64 {
	if !p.bound {
		return 0
	}
	return p.idle
}

// releaseKept releases the named lock held by this connection. 1:
// released; 0: held by another connection; -1: not held.
const releaseKept = "SELECT CAST(IFNULL(RELEASE_LOCK(?), -1) AS SIGNED)"

// Release releases the named lock and keeps the connection pinned, its
// session still bounded, for the next holding: true when this connection
// held the lock. When it did not (false, nil), or on error, the
// connection is discarded, as Discard does.
func (p *SessionPin) Release(ctx context.Context, lockName string) (bool, error) {
	var released int64
	err := p.QueryRowContext(ctx, releaseKept, lockName).Scan(&released)
	if err != nil || released != 1 {
		_ = p.Discard()
		return false, err
	}
	return true, nil
}

// BoundIdle sets the session's wait_timeout to IdleBound(idle), keeping
// the previous value in the session variable @lockgen_session_wait_timeout:
// a server that hears nothing from the client for that long (a partition,
// where the client gave up and closed but the server never learned) ends
// the session and frees its named locks, instead of keeping them for the
// server's wait_timeout (8 hours by default) or until TCP keepalive gives
// up (about 2 hours). A connection blocked in GET_LOCK or running any
// statement is not idle. The same statement makes sure the connection
// holds a witness GET_LOCK (see witnessAssignment). On failure the caller
// discards the connection.
func (p *SessionPin) BoundIdle(ctx context.Context, idle time.Duration) error {
	p.bound = true // a failed SET may still have changed it
	p.idle = IdleBound(idle)
	_, err := p.conn.ExecContext(ctx, fmt.Sprintf("SET @lockgen_session_wait_timeout = @@SESSION.wait_timeout, SESSION wait_timeout = %d, %s", p.idle, witnessAssignment()))
	return err
}

// notAcquired is the CASE branch the one-statement acquire and release
// take when GET_LOCK or RELEASE_LOCK did not answer 1: an addition that
// overflows BIGINT, which fails the whole SET with error 1690 at run time
// (only when the branch is taken: CONNECTION_ID() keeps either server from
// folding it while the statement is prepared, and no session variable can
// change its value). Both servers then change no variable: a failed SET is
// atomic. NULL would not do: both servers take wait_timeout = NULL as 0
// and clamp it to 1 second, with a warning. The branch used to be a
// two-row scalar subquery (error 1242), which both servers prepared on
// every run whether taken or not: about a third of a session pair's server
// time on MariaDB.
const notAcquired = "9223372036854775807 + CAST(CONNECTION_ID() > 0 AS SIGNED)"

// sqlString is s as a SQL string literal that both servers read as the same
// bytes whatever the connection's character set and sql_mode
// (NO_BACKSLASH_ESCAPES): hex with the utf8mb4 introducer. The one-statement
// acquire and release embed the lock name so that they take one round trip
// whatever the DSN's interpolateParams (a statement with arguments is
// prepared, run and closed otherwise: two round trips).
func sqlString(s string) string {
	return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "'"
}

// sqlSeconds is d as GET_LOCK's timeout in seconds, with microseconds.
func sqlSeconds(d time.Duration) string {
	us := max(d, 0).Microseconds()
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// BoundGetLock is BoundIdle and GetLock in one statement (one round trip
// instead of two): it waits up to timeout on the server for the named lock
// and, only when it got it, bounds the session's idle time as BoundIdle
// does, keeping the previous wait_timeout for Close and ReleaseClose. Not
// acquired (GET_LOCK timed out): false, and the statement changed nothing,
// so the connection can go back to the pool as it is (or be bounded with
// BoundIdle for a longer wait). GET_LOCK answering NULL (killed while it
// waited, or refused) is not that branch: MySQL fails the statement with
// the kill's error, and on MariaDB the statement completes with the
// session's wait_timeout kept and true, though the lock is not held; the
// token statement, which checks IS_USED_LOCK, is what refuses the holding
// then. On any other error the caller discards the connection: the lock
// may be held. Acquired, the connection also holds a witness GET_LOCK (see
// witnessAssignment): the assignments of a SET run in order, and one that
// fails stops the rest, so a lock not acquired takes no witness either.
func (p *SessionPin) BoundGetLock(ctx context.Context, idle time.Duration, lockName string, timeout time.Duration) (bool, error) {
	was, wasIdle := p.bound, p.idle
	p.bound = true // a failed SET may still have changed it
	p.idle = IdleBound(idle)
	_, err := p.conn.ExecContext(ctx, fmt.Sprintf(
		"SET @lockgen_session_wait_timeout = @@SESSION.wait_timeout, SESSION wait_timeout = COALESCE(CASE GET_LOCK(%s, %s) WHEN 1 THEN %d WHEN 0 THEN %s END, CAST(@@SESSION.wait_timeout AS SIGNED)), %s",
		sqlString(lockName), sqlSeconds(timeout), p.idle, notAcquired, witnessAssignment()))
	if servererr.IsNotAcquiredBranch(err) {
		p.bound, p.idle = was, wasIdle
		return false, nil
	}
	return err == nil, err
}

// Identity is the connection's id and the name of the witness GET_LOCK it
// holds (the empty string when it holds none), which Guard checks a session holding by:
// one statement, run only when a holding is guarded.
func (p *SessionPin) Identity(ctx context.Context) (connID int64, witness string, err error) {
	err = p.conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), "+heldWitness).Scan(&connID, &witness)
	return connID, witness, err
}

// heldWitness is the connection's witness GET_LOCK (@lockgen_witness)
// while the connection holds it, else the empty string; the generated statements have
// the same expression (templates/clock.sql.tmpl, conn_witness). CASE keeps
// an empty name and NULL from IS_USED_LOCK, which MySQL refuses (error
// 3057).
const heldWitness = "CASE WHEN IFNULL(@lockgen_witness, '') = '' THEN '' " +
	"WHEN IS_USED_LOCK(@lockgen_witness) <=> CONNECTION_ID() THEN @lockgen_witness ELSE '' END"

// witnessAssignment is the SET assignment that makes sure the connection
// holds a witness GET_LOCK, a random name kept in the session variable
// @lockgen_witness, taking a new one when it holds none. The session token
// statement records it in the lock row. A witness is never released: it
// lasts as long as the connection, and no server restart keeps it, so a
// row whose witness is held was written since the server last started
// (docs/strategies.md, "Session tokens without a write").
func witnessAssignment() string {
	name := sqlString(newWitnessName())
	return fmt.Sprintf("@lockgen_witness = IF((%s) = '', IF(GET_LOCK(%s, 0) = 1, %s, ''), @lockgen_witness)", heldWitness, name, name)
}

// witnessPrefix starts every witness GET_LOCK name: not a table prefix,
// nor "lockgen:" (hashed lock names), so that no lock name is a witness.
const witnessPrefix = "lockgen-witness:"

// newWitnessName is a witness GET_LOCK name no other connection has ever
// taken: 128 random bits (lower-case hex, which both servers keep as it
// is).
func newWitnessName() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return witnessPrefix + hex.EncodeToString(b[:])
}

// ReleaseClose releases the named lock and returns the connection to the
// pool with the wait_timeout it had before BoundIdle or BoundGetLock, in
// one statement: true when this connection held the lock (or, on MariaDB,
// when the statement was killed after RELEASE_LOCK answered that it did
// not: the COALESCE then keeps the session's wait_timeout, and the
// connection, which holds no lock, goes back to the pool). When it did not
// (false, nil), or on error, the connection is discarded instead, as
// Discard does: the runtime never pools a connection whose locks it is
// unsure of.
func (p *SessionPin) ReleaseClose(ctx context.Context, lockName string) (bool, error) {
	restore := "CAST(@@SESSION.wait_timeout AS SIGNED)"
	if p.bound {
		restore = "CAST(IFNULL(@lockgen_session_wait_timeout, @@GLOBAL.wait_timeout) AS SIGNED)"
	}
	p.closeStmts()
	_, err := p.conn.ExecContext(ctx, fmt.Sprintf(
		"SET SESSION wait_timeout = COALESCE(CASE RELEASE_LOCK(%s) WHEN 1 THEN %s ELSE %s END, CAST(@@SESSION.wait_timeout AS SIGNED))",
		sqlString(lockName), restore, notAcquired))
	if err != nil {
		_ = p.Discard()
		if servererr.IsNotAcquiredBranch(err) {
			return false, nil
		}
		return false, err
	}
	p.bound = false
	return true, p.conn.Close()
}

// Close returns the connection to the pool, with the wait_timeout it had
// before BoundIdle (one statement, bounded by restoreTimeout); when that
// fails the connection is discarded instead.
func (p *SessionPin) Close() error {
	p.closeStmts()
	if p.bound {
		ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
		_, err := p.conn.ExecContext(ctx, "SET SESSION wait_timeout = @lockgen_session_wait_timeout")
		cancel()
		if err != nil {
			return p.Discard()
		}
	}
	return p.conn.Close()
}

// Discard closes the connection itself (marking it bad so the pool drops
// it), so the server frees any session lock it still holds.
func (p *SessionPin) Discard() error {
	p.closeStmts()
	_ = p.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	// Raw's ErrBadConn closed it already: Close then says ErrConnDone.
	if err := p.conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}
