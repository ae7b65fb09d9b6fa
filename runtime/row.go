package runtime

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// StrategyRow holds the lock row's exclusive row lock (SELECT ... FOR UPDATE)
// in a transaction that lasts the critical section: the server itself
// excludes other holders and serves waiters in arrival order, and a
// holder's writes in that transaction commit atomically with its release.
const StrategyRow = "row"

// RowStore is a Store that also runs the row strategy's statements. The
// generated code implements it.
type RowStore interface {
	Store
	// RowBegin pins a connection, sets its innodb_lock_wait_timeout to
	// lockWait (whole seconds, rounded up, at least 1) and begins a READ
	// COMMITTED transaction on it for one holding.
	RowBegin(ctx context.Context, lockWait time.Duration) (RowTx, error)
	// RowPeek reads the lock row as a READ UNCOMMITTED reader sees it, so a
	// live row-strategy holding (not committed until its release) shows.
	RowPeek(ctx context.Context, name, key string) (row LeaseRow, found bool, err error)
	// ServerGalera reports whether the server is a Galera node (wsrep_on).
	ServerGalera(ctx context.Context) (bool, error)
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
	// and returns its fencing token, or 0 when the committed row shows a
	// live lease of another strategy (as during a rolling change).
	Take(ctx context.Context, name, key, owner string) (int64, error)
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

// abortOnRelease makes the release of a row holding roll its transaction
// back instead of committing it.
func (ls *Lease) abortOnRelease() {
	ls.mu.Lock()
	ls.abort = true
	ls.mu.Unlock()
}

// rowHolding is what a Lease of the row strategy holds besides its row: the
// transaction that keeps the row lock.
type rowHolding struct {
	tx RowTx
}

// rowSentinel is the expires_at of a row-strategy holding (see RowTake):
// in the past, so a holding committed by mistake looks free.
var rowSentinel = time.Date(1970, 1, 1, 0, 0, 2, 0, time.UTC)

// rowReleaseTimeout bounds the statements that end a row holding (a row
// lock has no ttl to bound them by).
const rowReleaseTimeout = 30 * time.Second

// rowStore returns the client's store as a RowStore, refusing Galera.
func (l *Lock) rowStore(ctx context.Context) (RowStore, error) {
	rs, ok := l.client.store.(RowStore)
	if !ok {
		return nil, fmt.Errorf("%w: lock %q uses strategy row but the store does not implement RowStore", ErrInvalid, l.cfg.Name)
	}
	if err := l.client.refuseGalera(ctx, rs, StrategyRow); err != nil {
		return nil, err
	}
	return rs, nil
}

// tryRow acquires a row lock: with NOWAIT when wait is 0, else waiting up
// to wait on the server (InnoDB serves row lock waiters in arrival order).
func (l *Lock) tryRow(ctx context.Context, key string, wait time.Duration) (*Lease, error) {
	rs, err := l.rowStore(ctx)
	if err != nil {
		return nil, err
	}
	start := l.client.clock.Now()
	for attempt := 0; ; attempt++ {
		left := wait - l.client.clock.Now().Sub(start)
		lease, err := l.tryRowOnce(ctx, rs, key, max(left, 0))
		if !isDeadlock(err) || attempt == maxRetries || ctx.Err() != nil {
			return lease, err
		}
		// A deadlock while creating the row (two first acquirers): the
		// server rolled back; try again while the wait lasts.
		if wait > 0 && left <= 0 {
			return nil, ErrNotAcquired
		}
	}
}

func (l *Lock) tryRowOnce(ctx context.Context, rs RowStore, key string, wait time.Duration) (*Lease, error) {
	lockWait := max(wait, time.Second) // Try's Take waits only for a first insert
	rtx, err := rs.RowBegin(ctx, lockWait)
	if err != nil {
		return nil, fmt.Errorf("lockgen: acquire %s: begin: %w", l.describe(key), err)
	}
	fail := func(err error) (*Lease, error) {
		_ = rtx.Rollback()
		switch {
		case isLockWaitFailure(err):
			return nil, ErrNotAcquired
		case isDeadlock(err):
			return nil, fmt.Errorf("lockgen: acquire %s: %w", l.describe(key), err)
		}
		return nil, fmt.Errorf("lockgen: acquire %s: %w", l.describe(key), err)
	}
	found := false
	if wait == 0 {
		if found, err = rtx.LockNowait(ctx, l.cfg.Name, key); err != nil {
			return fail(err)
		}
	}
	if !found {
		if err := rtx.LockWait(ctx, l.cfg.Name, key); err != nil {
			return fail(err)
		}
	}
	// A separate statement, so that its clock reads after the grant.
	token, err := rtx.Take(ctx, l.cfg.Name, key, l.client.owner)
	if err != nil {
		return fail(err)
	}
	if token == 0 {
		_ = rtx.Rollback()
		return nil, fmt.Errorf("%w: %s is held by a lease-strategy holder", ErrNotAcquired, l.describe(key))
	}
	if err := rtx.RestoreLockWait(ctx); err != nil {
		return fail(err)
	}
	return newLease(ctx, l, key, token, l.client.clock.Now(), holding{row: &rowHolding{tx: rtx}}), nil
}

// Tx returns the transaction of a row-strategy holding, which keeps the lock
// row locked until the holding ends: writes made in it commit atomically
// with the release, and roll back with the lock when the holder dies. It is
// nil for the other strategies. Do not Commit or Rollback it: the release
// does (a holding whose transaction ended early reports ErrLeaseLost).
func (ls *Lease) Tx() *sql.Tx {
	if ls.row == nil {
		return nil
	}
	return ls.row.tx.Tx()
}

// releaseRowTx ends a row holding: it marks the row free and commits
// (writes made in the transaction commit with it), or, when abort is set,
// rolls everything back.
func (ls *Lease) releaseRowTx(ctx context.Context, abort bool) error {
	rtx := ls.row.tx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rowReleaseTimeout)
	defer cancel()
	if abort {
		// Everything rolls back; still tell the caller if the holding had
		// already ended under fn.
		held, herr := rtx.Holds(ctx, ls.id)
		rerr := rtx.Rollback()
		switch {
		case errors.Is(herr, sql.ErrTxDone):
			// fn ended the transaction itself (a Commit would have kept
			// its writes, and the holding, committed): free the row.
			_, _ = ls.lock.client.store.LeaseRelease(ctx, ls.id)
			return fmt.Errorf("%w: %s token %d: its transaction ended before the release (fn must not Commit or Rollback Lease.Tx)", ErrLeaseLost, ls.describe(), ls.id.Token)
		case herr == nil && !held:
			return fmt.Errorf("%w: %s token %d: the server ended the holding's transaction before the release (a deadlock or a killed connection rolls back the lock too)", ErrLeaseLost, ls.describe(), ls.id.Token)
		case herr != nil && !errors.Is(herr, sql.ErrTxDone):
			return fmt.Errorf("%w: %s token %d: %w", ErrLeaseLost, ls.describe(), ls.id.Token, herr)
		case rerr != nil && !errors.Is(rerr, sql.ErrTxDone):
			return fmt.Errorf("lockgen: release %s token %d: rollback: %w", ls.describe(), ls.id.Token, rerr)
		}
		return nil
	}
	ok, err := rtx.Free(ctx, ls.id)
	switch {
	case errors.Is(err, sql.ErrTxDone):
		// The holding's transaction ended before the release: fn ended it,
		// or the context it began with did. The row lock ended then.
		_ = rtx.Rollback() // returns (discards) the pinned connection
		// Had fn committed, the row would show this holding: free it.
		_, _ = ls.lock.client.store.LeaseRelease(ctx, ls.id)
		return fmt.Errorf("%w: %s token %d: its transaction ended before the release (fn must not Commit or Rollback Lease.Tx)", ErrLeaseLost, ls.describe(), ls.id.Token)
	case err != nil:
		_ = rtx.Rollback()
		return fmt.Errorf("%w: %s token %d: the release failed and the transaction's writes were rolled back: %w", ErrLeaseLost, ls.describe(), ls.id.Token, err)
	case !ok:
		// The server rolled the transaction back under fn (a deadlock in
		// fn's own statements, or a killed connection): the lock was free
		// before fn ended, and fn's writes after that were not guarded.
		_ = rtx.Rollback()
		return fmt.Errorf("%w: %s token %d: the server ended the holding's transaction before the release (a deadlock or a killed connection rolls back the lock too)", ErrLeaseLost, ls.describe(), ls.id.Token)
	}
	if err := rtx.Commit(); err != nil {
		return fmt.Errorf("%w: %s token %d: commit failed, the transaction's writes may not be committed: %w", ErrLeaseLost, ls.describe(), ls.id.Token, err)
	}
	return nil
}

// rowHolder reads a row lock's holder as a READ UNCOMMITTED reader sees
// the row: a live holding is not committed until it ends.
func (l *Lock) rowHolder(ctx context.Context, key string) (Holder, error) {
	rs, ok := l.client.store.(RowStore)
	if !ok {
		return Holder{}, fmt.Errorf("%w: lock %q uses strategy row but the store does not implement RowStore", ErrInvalid, l.cfg.Name)
	}
	row, found, err := rs.RowPeek(ctx, l.cfg.Name, key)
	if err != nil {
		return Holder{}, fmt.Errorf("lockgen: read holder of %s: %w", l.describe(key), err)
	}
	if !found {
		return Holder{}, nil
	}
	// A live row holding shows its owner and the row sentinel expiry.
	held := row.Owner != "" && row.ExpiresAt.Equal(rowSentinel)
	return Holder{Held: held, Owner: row.Owner, Token: row.Token}, nil
}

// WithTx is With for the row strategy, with fn also given the holding's
// transaction: fn's writes in tx commit atomically with the release when
// fn returns nil, and roll back (with the lock) when fn returns an error or
// panics. fn must not Commit or Rollback tx. On other strategies WithTx
// fails with ErrInvalid. It is reentrant like With: a nested call with fn's
// context joins the holding and gets the same tx.
//
// If a statement of fn fails with a deadlock (1213), the server has rolled
// back the whole transaction, lock included: fn must return that error;
// WithTx then reports ErrLeaseLost.
func (l *Lock) WithTx(ctx context.Context, key string, fn func(ctx context.Context, tx *sql.Tx, lease *Lease) error) error {
	if l.cfg.Strategy != StrategyRow {
		return fmt.Errorf("%w: lock %q: WithTx needs strategy row, not %s", ErrInvalid, l.cfg.Name, l.cfg.Strategy)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil fn for lock %q", ErrInvalid, l.cfg.Name)
	}
	key, err := l.checkKey(key)
	if err != nil {
		return err
	}
	// With commits the holding's transaction when fn returns nil and rolls
	// it back when fn fails or panics; a nested call joins the holding, and
	// the outermost call decides.
	return l.With(ctx, key, func(ctx context.Context, lease *Lease) error { return fn(ctx, lease.Tx(), lease) })
}

// RowConn is the connection and transaction of one row-strategy holding.
// Stores embed it in their RowTx; it runs the statements that are the same
// for every table prefix.
type RowConn struct {
	conn     *sql.Conn
	tx       *sql.Tx
	restored bool
}

// rowSessionSet is run before the holding's transaction begins: it saves
// and sets the lock wait, and turns autocommit off for the holding, so that
// statements fn runs after the server rolled the transaction back (a
// deadlock) open a new transaction that the release rolls back, instead of
// committing one by one without the lock.
const rowSessionSet = "SET @lockgen_lock_wait = @@SESSION.innodb_lock_wait_timeout, @lockgen_autocommit = @@SESSION.autocommit, " +
	"SESSION innodb_lock_wait_timeout = ?, SESSION autocommit = 0"

// BeginRow pins a connection of db, sets its innodb_lock_wait_timeout to
// lockWait (whole seconds, rounded up, at least 1; the previous value is
// kept in the session variable @lockgen_lock_wait), turns autocommit off
// for the holding and begins a READ COMMITTED transaction on it. The
// transaction does not end with ctx: only Commit or Rollback end it. On
// failure the connection is discarded.
func BeginRow(ctx context.Context, db *sql.DB, lockWait time.Duration) (*RowConn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	secs := max(int64((lockWait+time.Second-1)/time.Second), 1)
	if _, err := conn.ExecContext(ctx, rowSessionSet, secs); err != nil {
		discardConn(conn)
		return nil, err
	}
	// Not ctx: database/sql rolls a transaction back when the context it
	// began with ends, which would free the lock under a running fn.
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		discardConn(conn)
		return nil, err
	}
	return &RowConn{conn: conn, tx: tx}, nil
}

// Tx returns the holding's transaction.
func (c *RowConn) Tx() *sql.Tx { return c.tx }

// RestoreLockWait sets the connection's innodb_lock_wait_timeout back to
// what it was before BeginRow.
func (c *RowConn) RestoreLockWait(ctx context.Context) error {
	if _, err := c.tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = @lockgen_lock_wait"); err != nil {
		return err
	}
	c.restored = true
	return nil
}

// Commit commits the transaction, restores autocommit and returns the
// connection to the pool (or discards it when any of that failed or its
// lock wait was not restored).
func (c *RowConn) Commit() error { return c.end(c.tx.Commit()) }

// Rollback rolls the transaction back and returns the connection to the
// pool (or discards it, as Commit does).
func (c *RowConn) Rollback() error { return c.end(c.tx.Rollback()) }

func (c *RowConn) end(err error) error {
	if err != nil || !c.restored {
		discardConn(c.conn)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rowReleaseTimeout)
	defer cancel()
	if _, rerr := c.conn.ExecContext(ctx, "SET SESSION autocommit = @lockgen_autocommit"); rerr != nil {
		discardConn(c.conn)
		return nil // the transaction itself ended as asked
	}
	_ = c.conn.Close()
	return nil
}

// discardConn closes conn itself instead of returning it to the pool.
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // marks it bad: not pooled
	_ = conn.Close()
}

// PeekRow runs read inside a READ UNCOMMITTED read-only transaction on db,
// so a live row-strategy holding, not committed until its release, is seen.
// Stores call it from RowPeek.
func PeekRow(ctx context.Context, db *sql.DB, read func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return read(tx)
}
