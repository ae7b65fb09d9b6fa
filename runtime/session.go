package runtime

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// maxSessionLockName is GET_LOCK's limit on lock names.
const maxSessionLockName = 64

// ServerLockName is the server-wide named lock (GET_LOCK) that waiters for
// (lock, key) block on in other processes: the session strategy's lock, or,
// with wake true, the wake lock of a lease lock with WaitOnServer. namespace
// is the store's SessionNamespace (its table prefix). Tools that count
// waiters (performance_schema.metadata_locks) match names with it; the
// name is a hash when the plain one would not fit, so it cannot be parsed
// back.
func ServerLockName(namespace, lock, key string, wake bool) string {
	if wake {
		return wakeLockName(namespace, lock, key)
	}
	return sessionLockName(namespace, lock, key)
}

// sessionLockName is the server-wide GET_LOCK name of (name, key): the
// namespace, name and key, or a deterministic hash of them when the server
// would not keep that string as it is (see plainLockName) or it is longer
// than GET_LOCK allows (64 bytes). Lease and row acquires pass it to the
// takeover statements (LeaseTakeover, RowTx.Takeover) as it is, never
// recomputed from the stored row.
func sessionLockName(namespace, name, key string) string {
	full := namespace + name
	if key != "" {
		full += "/" + key
	}
	if len(full) <= maxSessionLockName && plainLockName(full) {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return "lockgen:" + hex.EncodeToString(sum[:])[:maxSessionLockName-len("lockgen:")]
}

// ErrUnsupported reports a strategy the server or the store cannot run
// safely; it comes with what is missing.
var ErrUnsupported = errors.New("lockgen: unsupported")

// galeraCheck remembers, per Client, whether the server was found to be a
// Galera node.
type galeraCheck struct {
	mu      sync.Mutex
	checked bool
	galera  bool
}

func (c *Client) refuseGalera(ctx context.Context, strategy Strategy) error {
	galera, err := c.isGalera(ctx)
	if err != nil {
		return err
	}
	if galera {
		return fmt.Errorf("%w: strategy %q on a Galera cluster (wsrep_on): each node grants GET_LOCK and row locks on its own, so two holders could run at once; use strategy lease", ErrUnsupported, strategy)
	}
	return nil
}

// isGalera tells, asking the server once per Client, whether it is a
// Galera node.
func (c *Client) isGalera(ctx context.Context) (bool, error) {
	g := &c.galera
	g.mu.Lock()
	checked, galera := g.checked, g.galera
	g.mu.Unlock()
	if checked {
		return galera, nil
	}
	// Not under g.mu: each first caller waits only for its own query,
	// bounded by its own ctx (concurrent first callers may each ask).
	galera, err := c.store.ServerGalera(ctx)
	if servererr.IsUnknownVariable(err) { // MySQL has no wsrep_on: not Galera
		galera, err = false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lockgen: checking for Galera: %w", err)
	}
	g.mu.Lock()
	g.checked, g.galera = true, galera
	g.mu.Unlock()
	return galera, nil
}

// sessionHolding is what a Lease of the session strategy holds besides
// its row: the pinned connection and the server-side lock's name, and,
// once Guard asked for it, the connection's identity.
type sessionHolding struct {
	poolChecked
	conn driver.SessionConn
	name string
	// tried: the acquisition did not wait (see keptSessions).
	tried bool
	// gate orders Guard and release: a Guard's statement runs under its
	// read lock, and release takes it for writing, marks the holding
	// released, and only then releases the session lock. Guard checks
	// the holding by its connection, which the next holding may use (a
	// kept connection, or the pool's last idle one): a Guard that found
	// the holding current but ran its statement after the release would
	// pass for that next holding.
	gate     sync.RWMutex
	released bool

	idMu    sync.Mutex
	idKnown bool
	connID  int64
	witness string
}

// sessionReserve is how many tokens the token statement reserves for the
// next holdings of the same owner, which then take theirs without a write
// (docs/strategies.md, "Session tokens without a write"). A reservation
// is spent by UUID_SHORT() calls, one per such holding on the whole
// server; the row's token, which every other strategy's next token
// passes, is the bound, so it runs ahead of the clock by at most this
// many microseconds' worth for each time a reservation is armed.
const sessionReserve = 1_000_000

// sessionToken issues the fencing token of a session holding just
// acquired on conn (GET_LOCK name), in one statement: SessionToken, which
// takes the token from the row's reservation without a write when it
// allows, else writes it (arming a reservation when the row was already
// this owner's). When this Lock's last holding of key took a reserved
// token, the next one is likely to as well, and tries the cheaper locking
// read first (SessionTokenRead); when that read finds no reservation, the
// statement follows, so a lock that changes hands pays no read. A zero
// token: the connection does not hold the session lock, or a live lease
// holds the row.
func (l *Lock) sessionToken(ctx context.Context, conn driver.SessionConn, key, name string) (int64, error) {
	if l.reserved.has(key) {
		r, err := conn.TokenRead(ctx, l.cfg.Name, key, l.client.owner, name)
		switch {
		case err != nil:
			return 0, err
		case r.Reserved():
			return r.NextToken, nil
		case r.Found && !r.Held:
			return 0, nil
		}
	}
	token, reserved, err := conn.Token(ctx, l.cfg.Name, key, l.client.owner, name, sessionReserve)
	l.reserved.set(key, err == nil && reserved)
	return token, err
}

// maxReservedKeys bounds reservedKeys: past it the set starts over (a
// forgotten key costs its next holding the larger statement, once).
const maxReservedKeys = 4096

// reservedKeys is a set of lock keys, safe for concurrent use; its zero
// value is empty.
type reservedKeys struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func (r *reservedKeys) has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.keys[key]
	return ok
}

func (r *reservedKeys) set(key string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !on:
		delete(r.keys, key)
	case r.keys == nil || len(r.keys) >= maxReservedKeys:
		r.keys = map[string]struct{}{key: {}}
	default:
		r.keys[key] = struct{}{}
	}
}

// trySession acquires a session lock, waiting up to wait on the server.
func (l *Lock) trySession(ctx context.Context, key string, wait time.Duration) (*Lease, error) {
	ss := l.client.store
	if err := l.client.refuseGalera(ctx, StrategySession); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	wait = max(wait, 0)
	name := sessionLockName(ss.SessionNamespace(), l.cfg.Name, key)
	if wait == 0 && l.reserved.has(key) {
		if conn := l.client.kept.take(driver.IdleBound(l.cfg.TTL)); conn != nil {
			if ls, done, err := l.tryKept(ctx, conn, key, name); done {
				return ls, err
			}
		}
	}
	waited := wait > 0
	if waited {
		if conn := l.client.kept.take(driver.IdleBound(l.cfg.TTL)); conn != nil {
			start := l.client.clock.Now()
			if ls, done, err := l.waitKept(ctx, conn, key, name, wait); done {
				return ls, err
			}
			wait = max(wait-l.client.clock.Now().Sub(start), 0)
		}
	}
	// Every step is bounded, whatever ctx allows (see bounded): the
	// connection, the server-side wait and one TTL for each statement.
	pctx, cancel := bounded(ctx, wait+l.cfg.TTL)
	conn, err := ss.SessionConn(pctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("lockgen: acquire %s: pin a connection: %w", l.describe(key), err)
	}
	// The first GET_LOCK also bounds the session (one statement): a
	// silent session ends on the server IdleBound(TTL) after its last
	// statement, later than the local deadline, which counts TTL -
	// SafetyMargin from when that statement was sent (see renew).
	gctx, cancel := bounded(ctx, wait+l.cfg.TTL)
	got, err := l.client.boundGetLock(gctx, conn, name, wait, l.cfg.TTL)
	cancel()
	switch {
	case err != nil:
		_ = conn.Discard() // GET_LOCK may have succeeded on the server
		return nil, fmt.Errorf("lockgen: acquire %s: %w", l.describe(key), err)
	case got == 0:
		_ = conn.Close()
		return nil, ErrNotAcquired
	case got != 1:
		_ = conn.Discard()
		return nil, fmt.Errorf("lockgen: acquire %s: GET_LOCK failed (killed or refused)", l.describe(key))
	}
	return l.sessionGranted(ctx, conn, key, name, !waited)
}

// sessionGranted issues the fencing token of a session holding whose
// GET_LOCK just succeeded on conn and ends the acquisition (sessionHeld).
func (l *Lock) sessionGranted(ctx context.Context, conn driver.SessionConn, key, name string, tried bool) (*Lease, error) {
	sent := l.client.clock.Now()
	tctx, cancel := bounded(ctx, l.cfg.TTL)
	token, err := l.sessionToken(tctx, conn, key, name)
	cancel()
	return l.sessionHeld(ctx, conn, key, name, sent, token, err, tried)
}

// waitKept is an acquisition that waits up to wait, on conn, a connection
// kept from an earlier holding (see keptSessions) whose session has the
// bound this lock needs: GET_LOCK alone (the session is bounded already,
// so it needs no SET), then the token statement or read, each prepared
// on the connection once it ran there before. A handoff then parses neither,
// and the holder's release before it was RELEASE_LOCK alone. done is
// false when the connection turned out broken (the server ended it while
// it was kept): conn is discarded, and the caller waits the rest on a new
// connection. Any other error (a KILL QUERY of the wait, a statement
// timeout) fails the acquisition, as on a new connection; conn is
// discarded then too, since the server may have granted the lock.
func (l *Lock) waitKept(ctx context.Context, conn driver.SessionConn, key, name string, wait time.Duration) (ls *Lease, done bool, err error) {
	gctx, cancel := bounded(ctx, wait+l.cfg.TTL)
	got, err := l.client.getLock(gctx, conn, name, wait)
	cancel()
	switch {
	case err != nil:
		_ = conn.Discard()
		if ctx.Err() != nil || !brokenConn(err) {
			return nil, true, fmt.Errorf("lockgen: acquire %s: %w", l.describe(key), err)
		}
		return nil, false, nil
	case got == 0:
		l.client.kept.put(conn)
		return nil, true, ErrNotAcquired
	case got != 1:
		_ = conn.Discard()
		return nil, true, fmt.Errorf("lockgen: acquire %s: GET_LOCK failed (killed or refused)", l.describe(key))
	}
	ls, err = l.sessionGranted(ctx, conn, key, name, false)
	return ls, true, err
}

// sessionHeld ends an acquisition whose GET_LOCK succeeded on conn: the
// holding with its fencing token, which the statement sent at sent
// issued (err: it failed; 0: the connection does not hold the lock, or a
// live lease holds the row), or the connection released and given back or
// discarded. tried: the acquisition did not wait; its connection is
// kept for the next try only when its token was reserved, while one that
// waited is kept for the next acquisition that waits (see keptSessions).
func (l *Lock) sessionHeld(ctx context.Context, conn driver.SessionConn, key, name string, sent time.Time, token int64, err error, tried bool) (*Lease, error) {
	if took := l.client.clock.Now().Sub(sent); err == nil && token != 0 && took >= l.cfg.TTL-l.cfg.SafetyMargin {
		// The token statement waited for the row's lock so long that its
		// token, from the clock at its start, may be below one a pruned
		// row had (see Prune): give the holding back unused, as tryLease
		// does with a slow acquire (the row keeps its session mark, free
		// once the server-side lock is).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.TTL)
		_, _ = conn.ReleaseClose(rctx, name) // discards the connection unless released
		cancel()
		return nil, fmt.Errorf("%w: the fencing token of %s took %v, longer than its lease", ErrNotAcquired, l.describe(key), took)
	}
	if err != nil || token == 0 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.TTL)
		released, rerr := conn.ReleaseLock(rctx, name)
		cancel()
		if err != nil || rerr != nil || released != 1 {
			_ = conn.Discard()
		} else {
			_ = conn.Close()
		}
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// No answer within the TTL: busy, as a slower answer is.
			return nil, fmt.Errorf("%w: the fencing token of %s did not answer within its TTL (%v): %w", ErrNotAcquired, l.describe(key), l.cfg.TTL, err)
		}
		if err != nil {
			return nil, fmt.Errorf("lockgen: acquire %s: fencing token: %w", l.describe(key), err)
		}
		if rerr == nil && released != 1 {
			// The token statement found the connection without the lock:
			// on MariaDB, a GET_LOCK killed while it waited (KILL QUERY)
			// can leave the acquire's statement answering as if it had
			// acquired (see driver.SessionPin.BoundGetLock).
			return nil, fmt.Errorf("lockgen: acquire %s: GET_LOCK failed (killed or refused): the connection does not hold the session lock", l.describe(key))
		}
		// The row is held by a live lease of the same lock (a node still
		// running the lease strategy): busy, whatever GET_LOCK said.
		return nil, fmt.Errorf("%w: %s is held by a lease-strategy holder", ErrNotAcquired, l.describe(key))
	}
	// The local deadline counts from when the token statement was sent:
	// the wait on the server is not part of the holding, and the server
	// keeps the lock until the connection ends or has been silent for
	// IdleBound(TTL) after that statement, which is later.
	return newLease(ctx, l, key, token, sent, &sessionHolding{conn: conn, name: name, tried: tried}), nil
}

// tryKept is a try (no wait) of a session lock whose last holding here
// took a reserved token, on conn, a connection kept from an earlier
// holding with the session bound this lock needs: one statement takes the
// lock and, when the reservation allows, its token
// (SessionConn.TryReserved); otherwise the token statement follows, as
// after GET_LOCK on a new connection. done is false when the statement
// failed or found no row: conn is discarded then (it holds no lock either
// way), and the caller takes the longer way on a new connection.
func (l *Lock) tryKept(ctx context.Context, conn driver.SessionConn, key, name string) (ls *Lease, done bool, err error) {
	sent := l.client.clock.Now()
	tctx, cancel := bounded(ctx, l.cfg.TTL)
	defer cancel()
	r, err := conn.TryReserved(tctx, l.cfg.Name, key, l.client.owner, name)
	switch {
	case err != nil || !r.Found:
		_ = conn.Discard()
		if err != nil && ctx.Err() != nil {
			return nil, true, fmt.Errorf("lockgen: acquire %s: %w", l.describe(key), err)
		}
		return nil, false, nil
	case r.Got == 0:
		l.client.kept.put(conn)
		return nil, true, ErrNotAcquired
	case r.Got != 1:
		_ = conn.Discard()
		return nil, true, fmt.Errorf("lockgen: acquire %s: GET_LOCK failed (killed or refused)", l.describe(key))
	case r.Reserved():
		ls, err := l.sessionHeld(ctx, conn, key, name, sent, r.NextToken, nil, true)
		return ls, true, err
	}
	token, reserved, err := conn.Token(tctx, l.cfg.Name, key, l.client.owner, name, sessionReserve)
	l.reserved.set(key, err == nil && reserved)
	ls, err = l.sessionHeld(ctx, conn, key, name, sent, token, err, true)
	return ls, true, err
}

// keptIdle is how long a kept session connection waits for its next
// holding before it goes back to its pool, with its wait_timeout restored:
// long enough for a caller that tries or waits in a loop, short enough
// that a program that closes its pool right after a holding does not keep a
// connection open for long (it counts as a leaked goroutine in tests that
// check for them), and well within the shortest session bound
// (driver.IdleBound: 2 s), past which the server would end the session.
// It counts in real time, as the server's wait_timeout does.
const keptIdle = 100 * time.Millisecond

// keptSessions are pinned connections kept between session holdings: a
// holding that was tried (no wait) and took a reserved token, or one that
// waited, leaves its connection here, session still bounded. The next try
// of a lock with the same bound takes the lock and its token in one
// statement on it (Lock.tryKept), instead of pinning a connection,
// bounding its session and reading the token in three; the next
// acquisition that waits sends GET_LOCK alone on it (Lock.waitKept), and
// its statements, prepared there once they ran there before, are not
// parsed again: a contended handoff's token statement is the longest the
// runtime sends. A kept connection holds no named lock but its witness;
// it goes back to its pool after keptIdle unused, and only as many are
// kept as the pool can spare (SessionConn.Keepable). The zero value is
// empty; safe for concurrent use.
type keptSessions struct {
	mu    sync.Mutex
	conns []keptSession
	timer *time.Timer
	// idle is how long a connection stays kept: keptIdle, unless a test
	// set it (before the first holding).
	idle time.Duration
}

// keptFor is how long a connection stays kept.
func (k *keptSessions) keptFor() time.Duration {
	if k.idle > 0 {
		return k.idle
	}
	return keptIdle
}

type keptSession struct {
	conn  driver.SessionConn
	since time.Time
}

// take returns the connection kept last with the session bound bound, or
// nil.
func (k *keptSessions) take(bound int64) driver.SessionConn {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := len(k.conns) - 1; i >= 0; i-- {
		if c := k.conns[i]; c.conn.Bound() == bound && time.Since(c.since) < k.keptFor() {
			k.conns = append(k.conns[:i], k.conns[i+1:]...)
			return c.conn
		}
	}
	return nil
}

// put keeps conn, which holds no named lock but its witness, when its
// pool can spare it; otherwise it returns conn to its pool.
func (k *keptSessions) put(conn driver.SessionConn) {
	k.mu.Lock()
	keep := conn.Keepable(len(k.conns))
	if keep {
		k.conns = append(k.conns, keptSession{conn: conn, since: time.Now()})
		if k.timer == nil {
			k.timer = time.AfterFunc(k.keptFor(), k.expire)
		}
	}
	k.mu.Unlock()
	if !keep {
		_ = conn.Close()
	}
}

// keeps reports whether put would keep conn now.
func (k *keptSessions) keeps(conn driver.SessionConn) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return conn.Keepable(len(k.conns))
}

// expire returns the connections kept for keptIdle or longer to their
// pools, and runs again while any is kept.
func (k *keptSessions) expire() {
	k.mu.Lock()
	var old []driver.SessionConn
	live := k.conns[:0]
	for _, c := range k.conns {
		if time.Since(c.since) >= k.keptFor() {
			old = append(old, c.conn)
		} else {
			live = append(live, c)
		}
	}
	clear(k.conns[len(live):])
	k.conns = live
	k.timer = nil
	if len(k.conns) > 0 {
		k.timer = time.AfterFunc(k.keptFor()-time.Since(k.conns[0].since), k.expire)
	}
	k.mu.Unlock()
	for _, c := range old {
		_ = c.Close()
	}
}

// bounded is ctx bounded by d: every statement of an acquisition is, so
// that one sent on a dead connection (after a blackhole, on a half-open
// connection) ends within its bound when the caller's ctx has no
// deadline, instead of holding the caller, and a connection of the pool,
// until readTimeout or the kernel's retransmission timeout ends it.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// plainLockName reports whether both servers keep s as a GET_LOCK name
// as it is, so that two different strings are two locks: ASCII without
// NUL and without capital letters. Both servers cut a lock name at its
// first NUL byte ("a\x00b" and "a\x00c" would be the lock "a"); MySQL
// lower-cases lock names ("A" and "a" would be one lock), by its utf8mb3
// rules beyond ASCII, and refuses characters outside the Basic
// Multilingual Plane (error 3057). Any other name is hashed.
func plainLockName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// brokenConn reports whether err means the pinned connection is gone, in
// which case the server has already released its locks.
func brokenConn(err error) bool {
	// A statement prepared on the pinned connection (see
	// driver.SessionPin) that finds it broken answers sql.ErrConnDone.
	return errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone)
}

// start arms the watchdog and checks the holding every RenewEvery.
func (h *sessionHolding) start(ls *Lease) {
	ls.startWatchdog()
	go ls.renewLoop(h.renew)
}

// renew checks that the pinned connection still holds the lock (the
// session strategy's renewal, which also keeps the connection from idling
// out). A successful check extends the local deadline to TTL -
// SafetyMargin after it was sent; the server ends the session no sooner
// than IdleBound(TTL) > TTL after the check ended, so a holder cut off
// from the server always passes its deadline before its lock is freed.
func (h *sessionHolding) renew(ls *Lease, left time.Duration) bool {
	// Not tied to renewCtx: cancelling a statement makes the driver close
	// the pinned connection, which would drop the lock under a Release
	// that only wants the checks to stop.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ls.renewCtx), left)
	defer cancel()
	cfg := ls.lock.cfg
	sent := ls.clock.Now()
	held, err := h.conn.HoldsLock(ctx, h.name)
	switch {
	case err == nil && held:
		ls.extend(sent.Add(cfg.TTL - cfg.SafetyMargin))
		return true
	case err == nil:
		ls.lose(fmt.Errorf("%w: %s: the server no longer has the session lock", ErrLeaseLost, ls.describe()))
	case brokenConn(err):
		ls.lose(fmt.Errorf("%w: %s: the pinned connection broke: %v", ErrLeaseLost, ls.describe(), err))
	case ls.renewCtx.Err() == nil:
		ls.lock.client.observer.RenewFailed(ls.id.Name, StrategySession)
		ls.lock.client.logger.Warn("lockgen: session lock check failed", "lock", ls.id.Name, "key", ls.id.Key, "token", ls.id.Token, "error", err)
	}
	return false
}

// guard is Guard for a session holding: holdings whose tokens came from
// one reservation leave the row as it was, so the holding is its
// connection, which still holds the session lock and its witness
// (driver.Store.SessionGuard). The connection's identity is read once,
// on the pinned connection, by the first Guard.
func (h *sessionHolding) guard(ctx context.Context, ls *Lease, tx *sql.Tx) error {
	// As guardRow: the probe ran at the acquire, and clusters are refused.
	if err := ls.lock.client.guardRefusal(ctx); err != nil {
		return err
	}
	if pause := ls.lock.client.guardPause; pause != nil {
		pause()
	}
	h.gate.RLock()
	defer h.gate.RUnlock()
	if h.released {
		return fmt.Errorf("%w: guard on %s token %d after release", ErrReleased, ls.describe(), ls.id.Token)
	}
	h.idMu.Lock()
	defer h.idMu.Unlock()
	if !h.idKnown {
		connID, witness, err := h.conn.Identity(ctx)
		if err != nil {
			return ls.guardResult(false, err)
		}
		h.connID, h.witness, h.idKnown = connID, witness, true
	}
	ok, err := ls.lock.client.store.SessionGuard(ctx, tx, ls.id.Name, ls.id.Key, ls.id.Owner, h.name, h.connID, h.witness)
	return ls.guardResult(ok, err)
}

// release releases the server-side lock and returns the pinned
// connection, with its wait_timeout restored, in one statement
// (SessionConn.ReleaseClose), or releases it alone (SessionConn.Release)
// and keeps the connection for the next holding (see keptSessions). The
// row keeps the holding's session mark (the far-future expiry): writing it
// free would cost a second durable write per holding, and a marked row
// whose server-side lock is free is free to every strategy (the next
// session holder's token statement takes it, lease and row acquirers take
// it over after IS_FREE_LOCK, Holder and the ops layer ask the server,
// Prune deletes it once that lock is free).
func (h *sessionHolding) release(ctx context.Context, ls *Lease, _ bool) error {
	// A Guard in flight finishes first (its share lock on the row then
	// holds off the next holding's token until its transaction ends),
	// and none starts after.
	h.gate.Lock()
	h.released = true
	h.gate.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ls.lock.cfg.TTL)
	defer cancel()
	kept := &ls.lock.client.kept
	var released bool
	var err error
	if keep := (!h.tried || ls.lock.reserved.has(ls.id.Key)) && kept.keeps(h.conn); keep {
		// The next try of this key is likely to take a reserved token,
		// or the next acquisition that waits to wait on this
		// connection: it waits for them, its session still bounded.
		if released, err = h.conn.Release(ctx, h.name); released {
			kept.put(h.conn)
		}
	} else {
		released, err = h.conn.ReleaseClose(ctx, h.name)
	}
	switch {
	case brokenConn(err):
		return fmt.Errorf("%w: %s: the pinned connection broke before release", ErrLeaseLost, ls.describe())
	case err != nil:
		return fmt.Errorf("lockgen: release %s token %d: %w", ls.describe(), ls.id.Token, err)
	case !released:
		return fmt.Errorf("%w: %s: the server did not have this holding's session lock", ErrLeaseLost, ls.describe())
	}
	return nil
}

// sessionHolder reads a session lock's holder: the row says who and which
// token, the server says whether it is held.
func (l *Lock) sessionHolder(ctx context.Context, key string) (Holder, error) {
	ss := l.client.store
	used, err := ss.SessionIsUsed(ctx, sessionLockName(ss.SessionNamespace(), l.cfg.Name, key))
	if err != nil {
		return Holder{}, fmt.Errorf("lockgen: read holder of %s: %w", l.describe(key), err)
	}
	row, found, err := l.client.store.LeaseGet(ctx, l.cfg.Name, key)
	if err != nil {
		return Holder{}, fmt.Errorf("lockgen: read holder of %s: %w", l.describe(key), err)
	}
	if !found {
		return Holder{Held: used}, nil
	}
	return Holder{Held: used, Owner: row.Owner, Token: row.Token}, nil
}
