package driver

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// SessionPin is the connection pinned for one session-lock holding (or a
// lease holding's wake lock). Stores embed it in their SessionConn: it
// bounds how long the server keeps the session, and with it the named
// locks, once it stops hearing from the client, and gives the connection
// back to the pool as it found it.
type SessionPin struct {
	conn *sql.Conn
	// bound: BoundIdle changed the session's wait_timeout, which Close
	// restores.
	bound bool
}

// PinSession pins one connection of db for one holding.
func PinSession(ctx context.Context, db *sql.DB) (*SessionPin, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &SessionPin{conn: conn}, nil
}

// Conn is the pinned connection, for the store's queries.
func (p *SessionPin) Conn() *sql.Conn { return p.conn }

// BoundIdle sets the session's wait_timeout to IdleBound(idle), keeping
// the previous value in the session variable @lockgen_session_wait_timeout:
// a server that hears nothing from the client for that long (a partition,
// where the client gave up and closed but the server never learned) ends
// the session and frees its named locks, instead of keeping them for the
// server's wait_timeout (8 hours by default) or until TCP keepalive gives
// up (about 2 hours). A connection blocked in GET_LOCK or running any
// statement is not idle. On failure the caller discards the connection.
func (p *SessionPin) BoundIdle(ctx context.Context, idle time.Duration) error {
	p.bound = true // a failed SET may still have changed it
	_, err := p.conn.ExecContext(ctx, fmt.Sprintf("SET @lockgen_session_wait_timeout = @@SESSION.wait_timeout, SESSION wait_timeout = %d", IdleBound(idle)))
	return err
}

// Close returns the connection to the pool, with the wait_timeout it had
// before BoundIdle (one statement, bounded by restoreTimeout); when that
// fails the connection is discarded instead.
func (p *SessionPin) Close() error {
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
	_ = p.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	// Raw's ErrBadConn closed it already: Close then says ErrConnDone.
	if err := p.conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}
