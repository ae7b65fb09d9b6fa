package runtime_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// sessionNode is a node whose locks use the session strategy.
func sessionNode(t *testing.T, db *sql.DB, opts ...runtime.Option) *node {
	t.Helper()
	c, err := runtime.NewClient(lockgendb.NewStore(db), opts...)
	require.NoError(t, err)
	return &node{db: db, client: c}
}

// uniqueName keeps session lock names (server-wide) apart between tests
// and runs.
func uniqueName(t *testing.T, tdb *testdb.DB) string {
	return strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + tdb.Name[len(tdb.Name)-6:]
}

func TestSessionMutualExclusion(t *testing.T) {
	tdb := testdb.New(t)
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: 2 * time.Second, Wait: time.Minute}
	var locks []*runtime.Lock
	for p := 0; p < 3; p++ {
		locks = append(locks, sessionNode(t, tdb.Open(t)).lock(t, cfg))
	}
	contend(t, locks, 8, 10)
}

// TestSessionStatementsAndHolder: acquire is one SET that waits in
// GET_LOCK and bounds the pinned session's wait_timeout, then the token
// bump; release is one SET that runs RELEASE_LOCK and sets wait_timeout
// back (the row keeps its session mark); Holder tells who holds it, and
// that nobody does after the release.
func TestSessionStatementsAndHolder(t *testing.T) {
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: time.Minute}
	n := sessionNode(t, db, runtime.WithOwner("holder"), runtime.WithClock(frozenClock{now: time.Now()}))
	other := sessionNode(t, tdb.Open(t), runtime.WithOwner("other"))
	l, lo := n.lock(t, cfg), other.lock(t, cfg)
	ctx := context.Background()

	lease, err := l.Try(ctx, "") // first use also checks for Galera once
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))

	before := counter.Count()
	lease, err = l.Try(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, int64(2), counter.Count()-before, "acquire: SET wait_timeout = CASE GET_LOCK + the token statement (which arms a reservation here: TestSessionReservedTokensWriteNothing)")
	_, err = lo.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	h, err := lo.Holder(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, runtime.Holder{Held: true, Owner: "holder", Token: dbToken(t, tdb, cfg.Name, "")}, h)
	assert.GreaterOrEqual(t, h.Token, lease.Token(), "a session holder's row shows the reservation's bound")
	before = counter.Count()
	require.NoError(t, lease.Release(ctx))
	assert.Equal(t, int64(1), counter.Count()-before, "release: SET wait_timeout = CASE RELEASE_LOCK")
	h, err = lo.Holder(ctx, "")
	require.NoError(t, err)
	assert.False(t, h.Held)

	next, err := lo.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, next.Token(), lease.Token(), "tokens go on rising from the lock row")
	require.NoError(t, next.Release(ctx))
}

// TestSessionWaitsOnTheServer: a waiter blocks in GET_LOCK (one statement,
// no polling) and gets the lock when the holder releases it.
func TestSessionWaitsOnTheServer(t *testing.T) {
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	wdb := sql.OpenDB(counter)
	t.Cleanup(func() { _ = wdb.Close() })
	name := uniqueName(t, tdb)
	holder := sessionNode(t, tdb.Open(t)).lock(t, runtime.LockConfig{Name: name, Strategy: runtime.StrategySession, TTL: 5 * time.Second})
	wnode := sessionNode(t, wdb)
	waiter := wnode.lock(t, runtime.LockConfig{Name: name, Strategy: runtime.StrategySession, TTL: 5 * time.Second, Wait: 30 * time.Second})
	ctx := context.Background()
	require.NoError(t, wnode.client.CheckServer(ctx), "the server probe is not counted")
	lease, err := holder.Try(ctx, "")
	require.NoError(t, err)
	got := make(chan *runtime.Lease, 1)
	before := counter.Count()
	go func() {
		next, err := waiter.Acquire(ctx, "")
		assert.NoError(t, err)
		got <- next
	}()
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, lease.Release(ctx))
	next := <-got
	assert.Greater(t, next.Token(), lease.Token())
	// Galera check (first use) + SET wait_timeout + GET_LOCK + token: no
	// polling while waiting.
	assert.LessOrEqual(t, counter.Count()-before, int64(4))
	require.NoError(t, next.Release(ctx))
}

// TestSessionBrokenConnectionEndsTheHolding: killing the pinned connection
// makes the server drop the lock; the holder's ctx is cancelled with
// ErrLeaseLost at its next check, and another node gets the lock with a
// higher token. (The server frees the lock first: see docs/strategies.md.)
func TestSessionBrokenConnectionEndsTheHolding(t *testing.T) {
	tdb := testdb.New(t)
	name := uniqueName(t, tdb)
	cfg := runtime.LockConfig{Name: name, Strategy: runtime.StrategySession, TTL: 2 * time.Second, RenewEvery: 100 * time.Millisecond}
	l := sessionNode(t, tdb.Open(t)).lock(t, cfg)
	rival := sessionNode(t, tdb.Open(t)).lock(t, cfg)
	admin := tdb.Admin(t)
	ctx := context.Background()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	var connID int64
	require.NoError(t, admin.QueryRow("SELECT IS_USED_LOCK(?)", runtime.SessionLockNameForTest("lockgen_", name, "")).Scan(&connID))
	_, err = admin.Exec("KILL ?", connID)
	require.NoError(t, err)
	select {
	case <-lease.Done():
		require.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost)
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told that its connection broke")
	}
	next, err := rival.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, next.Token(), lease.Token())
	require.NoError(t, next.Release(ctx))
	require.ErrorIs(t, lease.Release(ctx), runtime.ErrLeaseLost)
}

func TestSessionGuardAndLeader(t *testing.T) {
	tdb := testdb.New(t)
	tdb.Exec(t, fencedSchema)
	tdb.Grant(t, "fenced")
	db := tdb.Open(t)
	name := uniqueName(t, tdb)
	cfg := runtime.LockConfig{Name: name, Strategy: runtime.StrategySession, TTL: 2 * time.Second}
	a := sessionNode(t, db).lock(t, cfg)
	ctx := context.Background()

	lease, err := a.Try(ctx, "")
	require.NoError(t, err)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, lease.Guard(ctx, tx), "a current session holding passes Guard")
	require.NoError(t, tx.Rollback())
	require.NoError(t, lease.Release(ctx))
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.ErrorIs(t, lease.Guard(ctx, tx), runtime.ErrReleased)
	require.NoError(t, tx.Rollback())

	// Leader election refuses session locks: the server frees them before
	// the old leader learns it lost.
	err = a.RunAsLeader(ctx, func(context.Context, *runtime.Lease) error { return nil })
	require.ErrorIs(t, err, runtime.ErrInvalid)
}

// galeraStore reports wsrep_on, as a Galera node does.
type galeraStore struct{ lockgendb.Store }

func (galeraStore) ServerGalera(context.Context) (bool, error) { return true, nil }

func TestSessionRefusedOnGalera(t *testing.T) {
	tdb := testdb.New(t)
	c, err := runtime.NewClient(galeraStore{lockgendb.NewStore(tdb.Open(t))})
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "galera", Strategy: runtime.StrategySession, TTL: time.Second})
	require.NoError(t, err)
	_, err = l.Try(context.Background(), "")
	require.ErrorIs(t, err, runtime.ErrUnsupported)
	assert.Contains(t, err.Error(), "Galera")
}

func TestSessionLockNames(t *testing.T) {
	assert.Equal(t, "app_order/42", runtime.SessionLockNameForTest("app_", "order", "42"))
	assert.Equal(t, "app_master", runtime.SessionLockNameForTest("app_", "master", ""))
	long := strings.Repeat("x", 100)
	a := runtime.SessionLockNameForTest("app_", long, "1")
	b := runtime.SessionLockNameForTest("app_", long, "2")
	assert.Len(t, a, 64)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, runtime.SessionLockNameForTest("app_", long, "1"), "deterministic")
	assert.True(t, strings.HasPrefix(a, "lockgen:"), fmt.Sprint(a))
}

// TestSessionReleaseNeedsNoSecondConnection: with a pool of two
// connections, two holders pin both; releasing must not need a third.
func TestSessionReleaseNeedsNoSecondConnection(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	db.SetMaxOpenConns(2)
	l := sessionNode(t, db).lock(t, runtime.LockConfig{Name: uniqueName(t, tdb), Keyed: true, Strategy: runtime.StrategySession, TTL: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := l.Try(ctx, "a")
	require.NoError(t, err)
	b, err := l.Try(ctx, "b")
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	require.NoError(t, b.Release(ctx))
}

// TestSessionKilledWaitIsNotAcquired: a GET_LOCK wait killed on the server
// (KILL QUERY makes it return NULL) is an error, never a holding.
func TestSessionKilledWaitIsNotAcquired(t *testing.T) {
	for _, kept := range []bool{false, true} {
		t.Run(map[bool]string{false: "new connection", true: "kept connection"}[kept], func(t *testing.T) {
			tdb := testdb.New(t)
			name := uniqueName(t, tdb)
			holder := sessionNode(t, tdb.Open(t)).lock(t, runtime.LockConfig{Name: name, Strategy: runtime.StrategySession, TTL: 5 * time.Second})
			wnode := sessionNode(t, tdb.Open(t))
			waiter := wnode.lock(t, runtime.LockConfig{Name: name, Strategy: runtime.StrategySession, TTL: 5 * time.Second, Wait: 30 * time.Second})
			admin := tdb.Admin(t)
			ctx := context.Background()
			if kept {
				// A holding that waited keeps its connection, and the
				// next wait runs on it (GET_LOCK alone): killed, it must
				// fail too, not go on waiting on a new connection.
				runtime.SetKeptIdleForTest(t, wnode.client, time.Minute)
				first, err := waiter.Acquire(ctx, "")
				require.NoError(t, err)
				require.NoError(t, first.Release(ctx))
				require.Equal(t, 1, wnode.db.Stats().InUse, "the waiter's connection is kept")
			}
			lease, err := holder.Try(ctx, "")
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				next, err := waiter.Acquire(ctx, "")
				if err == nil {
					_ = next.Release(ctx)
				}
				got <- err
			}()
			var id int64
			require.Eventually(t, func() bool {
				err := admin.QueryRow("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%GET_LOCK(%' AND INFO NOT LIKE '%PROCESSLIST%' AND DB = ?", tdb.Name).Scan(&id)
				return err == nil
			}, 10*time.Second, 10*time.Millisecond)
			_, err = admin.Exec("KILL QUERY ?", id)
			require.NoError(t, err)
			select {
			case err := <-got:
				require.Error(t, err)
				assert.NotErrorIs(t, err, runtime.ErrNotAcquired)
			case <-time.After(10 * time.Second):
				t.Fatal("the killed wait did not return")
			}
			require.NoError(t, lease.Err(), "the holder keeps its lock")
			require.NoError(t, lease.Release(ctx))
		})
	}
}

// TestSessionAndLeaseNeverShareALock: during a rolling change of strategy,
// nodes running lease and nodes running session for the same lock exclude
// each other: GET_LOCK alone does not let a session holder take a row that
// a live lease holds.
func TestSessionAndLeaseNeverShareALock(t *testing.T) {
	tdb := testdb.New(t)
	admin := tdb.Admin(t)
	name := uniqueName(t, tdb)
	lease := newNode(t, tdb.Open(t)).lock(t, runtime.LockConfig{Name: name, TTL: 5 * time.Second})
	session := sessionNode(t, tdb.Open(t)).lock(t, runtime.LockConfig{Name: name, Strategy: runtime.StrategySession, TTL: 5 * time.Second})
	ctx := context.Background()

	held, err := lease.Try(ctx, "")
	require.NoError(t, err)
	_, err = session.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired, "a live lease keeps session holders out")
	var used sql.NullInt64
	require.NoError(t, admin.QueryRow("SELECT IS_USED_LOCK(?)", runtime.SessionLockNameForTest("lockgen_", name, "")).Scan(&used))
	assert.False(t, used.Valid, "the refused session attempt gave its GET_LOCK back")
	require.NoError(t, held.Release(ctx))

	s, err := session.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, s.Token(), held.Token())
	_, err = lease.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired, "a session holding keeps lease holders out")
	require.NoError(t, s.Release(ctx))

	l2, err := lease.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, l2.Token(), s.Token())
	require.NoError(t, l2.Release(ctx))
}

// TestSessionSubSecondWait: MySQL rounds GET_LOCK's timeout to whole
// seconds (a 0.45 s wait returned at once), so a session waiter with a
// sub-second wait must still get a lock released within its wait, on both
// servers; and a wait that runs out ends no earlier than asked.
func TestSessionSubSecondWait(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: 5 * time.Second, Wait: 450 * time.Millisecond}
	holder := sessionNode(t, tdb.Open(t)).lock(t, cfg)
	waiter := sessionNode(t, tdb.Open(t)).lock(t, cfg)

	for round := 0; round < 3; round++ {
		lease, err := holder.Try(ctx, "")
		require.NoError(t, err)
		released := make(chan error, 1)
		go func() {
			time.Sleep(150 * time.Millisecond)
			released <- lease.Release(ctx)
		}()
		next, err := waiter.Acquire(ctx, "")
		require.NoError(t, err, "round %d: released within the wait", round)
		require.NoError(t, <-released)
		assert.Greater(t, next.Token(), lease.Token())
		require.NoError(t, next.Release(ctx))
	}

	lease, err := holder.Try(ctx, "")
	require.NoError(t, err)
	start := time.Now()
	_, err = waiter.Acquire(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	assert.GreaterOrEqual(t, time.Since(start), cfg.Wait, "the wait ran out no earlier than asked")
	require.NoError(t, lease.Release(ctx))
}

// TestSessionReservedTokensWriteNothing: after the token statement armed
// a reservation (the second holding of an owner), each later holding of
// that owner takes its token from it, the lock row unchanged, every token
// above the last; Holder shows the holder with the reservation's bound.
// The first such try pins a connection: the GET_LOCK SET and the token
// statement. Its release keeps the connection, and each later try takes
// the lock and its token in one statement on it (SessionTryReserved),
// which the connection prepares the second time it runs it (PREPARE and
// EXECUTE: two). Another owner's holding writes, with a token above the
// bound.
func TestSessionReservedTokensWriteNothing(t *testing.T) {
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: time.Minute}
	n := sessionNode(t, db, runtime.WithOwner("holder"))
	other := sessionNode(t, tdb.Open(t), runtime.WithOwner("other"))
	l, lo := n.lock(t, cfg), other.lock(t, cfg)
	ctx := context.Background()
	var last int64
	for range 2 { // the first holding writes the row, the second arms the reservation
		lease, err := l.Try(ctx, "")
		require.NoError(t, err)
		assert.Greater(t, lease.Token(), last)
		last = lease.Token()
		require.NoError(t, lease.Release(ctx))
	}
	bound := dbToken(t, tdb, cfg.Name, "")
	require.Greater(t, bound, last, "the row's token is the reservation's bound")
	for i, want := range []int64{2, 1, 2, 1, 1} {
		before := counter.Count()
		lease, err := l.Try(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, want, counter.Count()-before, "statements of acquisition %d", i)
		assert.Greater(t, lease.Token(), last, "every token is above the last")
		assert.LessOrEqual(t, lease.Token(), bound)
		last = lease.Token()
		assert.Equal(t, bound, dbToken(t, tdb, cfg.Name, ""), "a reserved token writes nothing")
		h, err := lo.Holder(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, runtime.Holder{Held: true, Owner: "holder", Token: bound}, h)
		require.NoError(t, lease.Release(ctx))
	}
	next, err := lo.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, next.Token(), bound, "another owner's token passes the bound")
	require.NoError(t, next.Release(ctx))
}

// dbToken reads the token of the lock row (name, key).
func dbToken(t *testing.T, tdb *testdb.DB, name, key string) int64 {
	t.Helper()
	var token int64
	require.NoError(t, tdb.Admin(t).QueryRow("SELECT token FROM lockgen_locks WHERE name = ? AND lock_key = ?", name, key).Scan(&token))
	return token
}

// streak takes and releases l's key "" with Try until the holding took a
// reserved token and left its connection kept (the third try: the first
// writes the row, the second arms the reservation).
func streak(t *testing.T, l *runtime.Lock) {
	t.Helper()
	for range 3 {
		lease, err := l.Try(context.Background(), "")
		require.NoError(t, err)
		require.NoError(t, lease.Release(context.Background()))
	}
}

// TestSessionKeptConnectionGoesBack: a try that took a reserved token
// keeps its connection out of the pool for the next try; unused, it goes
// back within keptIdle (100 ms), with its session's wait_timeout restored.
// A small pool keeps none.
func TestSessionKeptConnectionGoesBack(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: time.Minute}
	streak(t, sessionNode(t, db).lock(t, cfg))
	assert.Equal(t, 1, db.Stats().InUse, "the last try's connection is kept")
	require.Eventually(t, func() bool { return db.Stats().InUse == 0 }, 10*time.Second, 20*time.Millisecond)
	var global, session int64
	require.NoError(t, db.QueryRow("SELECT @@GLOBAL.wait_timeout, @@SESSION.wait_timeout").Scan(&global, &session))
	assert.Equal(t, global, session, "the connection came back with its wait_timeout restored")

	small := tdb.Open(t)
	small.SetMaxOpenConns(2)
	cfg.Name = uniqueName(t, tdb)
	streak(t, sessionNode(t, small).lock(t, cfg))
	assert.Equal(t, 0, small.Stats().InUse, "a pool of two spares no connection")
}

// TestSessionWaitOnAKeptConnection: an acquisition that waits leaves its
// connection kept too, and the next one that waits takes it: GET_LOCK
// alone (its session is bounded already) and the token statement or
// read, each prepared once it ran there before, and RELEASE_LOCK alone
// to release; one connection in all. When the server killed the kept
// connection meanwhile, the next acquisition waits on a new one and
// gets the lock, with a higher token.
func TestSessionWaitOnAKeptConnection(t *testing.T) {
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: time.Minute, Wait: time.Minute}
	n := sessionNode(t, db, runtime.WithOwner("holder"))
	runtime.SetKeptIdleForTest(t, n.client, time.Minute) // kept however slow this machine is
	l := n.lock(t, cfg)
	ctx := context.Background()
	// On the kept connection, each statement runs as text the first time
	// and is prepared (PREPARE and its run: two) the second. Acquisition
	// 1: GET_LOCK, the token statement prepared (it arms the reservation:
	// the second holding of an owner). 2: GET_LOCK prepared, the token
	// statement (reserved from now on). 3: GET_LOCK, the token read,
	// which the reservation answers. 4: the read prepared. Then two
	// statements each, and a release is RELEASE_LOCK alone (prepared at
	// the second).
	keptAcquire := []int64{0, 3, 3, 2, 3, 2, 2, 2, 2, 2}
	keptRelease := []int64{1, 2, 1, 1, 1, 1, 1, 1, 1, 1}
	var last int64
	for i := range 10 {
		before := counter.Count()
		lease, err := l.Acquire(ctx, "")
		require.NoError(t, err)
		acquire := counter.Count() - before
		require.Greater(t, lease.Token(), last)
		last = lease.Token()
		before = counter.Count()
		require.NoError(t, lease.Release(ctx))
		if i > 0 { // the first acquisition pins the connection (and probes the server)
			assert.Equal(t, keptAcquire[i], acquire, "statements of acquisition %d", i)
		}
		assert.Equal(t, keptRelease[i], counter.Count()-before, "statements of release %d", i)
		assert.Equal(t, 1, db.Stats().OpenConnections, "holding %d: one connection", i)
		assert.Equal(t, 1, db.Stats().InUse, "holding %d: its connection is kept for the next", i)
	}

	var id int64
	var conns int
	require.NoError(t, tdb.Admin(t).QueryRow("SELECT MIN(ID), COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", tdb.User).Scan(&id, &conns))
	require.Equal(t, 1, conns, "the kept connection is the application's only one")
	_, err := tdb.Admin(t).Exec(fmt.Sprintf("KILL %d", id))
	require.NoError(t, err)
	lease, err := l.Acquire(ctx, "")
	require.NoError(t, err, "a kept connection the server killed is replaced")
	assert.Greater(t, lease.Token(), last)
	require.NoError(t, lease.Release(ctx))
}

// TestSessionKeepsNoConnectionFromABusyPool: a pool with a limit keeps a
// connection between holdings only while at most half of it is in use,
// the released connection included.
func TestSessionKeepsNoConnectionFromABusyPool(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		others int // connections of the pool in use elsewhere
		kept   bool
	}{{3, true}, {4, false}} {
		db := tdb.Open(t)
		db.SetMaxOpenConns(8)
		for range tc.others {
			conn, err := db.Conn(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
		}
		n := sessionNode(t, db)
		runtime.SetKeptIdleForTest(t, n.client, time.Minute)
		l := n.lock(t, runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: time.Minute, Wait: time.Minute})
		lease, err := l.Acquire(ctx, "")
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		want := tc.others
		if tc.kept {
			want++
		}
		assert.Equal(t, want, db.Stats().InUse, "%d others in use: kept %v", tc.others, tc.kept)
	}
}

// TestSessionTryDoesNotWaitForALockedRow: a try on a kept connection
// locks the row with NOWAIT, so a row share-locked by another holder's
// Guard transaction makes it fall back to GET_LOCK first, which answers
// busy at once, instead of waiting for that transaction (ctx's deadline
// here, far below the TTL, would end such a wait with
// context.DeadlineExceeded).
func TestSessionTryDoesNotWaitForALockedRow(t *testing.T) {
	tdb := testdb.New(t)
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: time.Minute}
	l := sessionNode(t, tdb.Open(t), runtime.WithOwner("holder")).lock(t, cfg)
	other := sessionNode(t, tdb.Open(t), runtime.WithOwner("other")).lock(t, cfg)
	streak(t, l)
	ctx := context.Background()
	lease, err := other.Try(ctx, "")
	require.NoError(t, err)
	tx, err := tdb.Open(t).BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, lease.Guard(ctx, tx), "the row is share-locked until tx ends")
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = l.Try(tctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	require.NoError(t, tx.Rollback())
	require.NoError(t, lease.Release(ctx))
	again, err := l.Try(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, again.Token(), lease.Token())
	require.NoError(t, again.Release(ctx))
}

// TestSessionGuardAfterReleaseDoesNotPassForTheNextHolding: Guard checks a
// session holding by its connection, and the next try of the lock runs on
// that very connection (kept from the holding). A Guard that passed
// Lease.Guard's checks before the release, and runs its statement after
// the next holding took the lock on that connection, must not pass for it:
// the release marks the holding released first (ErrReleased).
func TestSessionGuardAfterReleaseDoesNotPassForTheNextHolding(t *testing.T) {
	tdb := testdb.New(t)
	cfg := runtime.LockConfig{Name: uniqueName(t, tdb), Strategy: runtime.StrategySession, TTL: time.Minute}
	n := sessionNode(t, tdb.Open(t), runtime.WithOwner("holder"))
	l := n.lock(t, cfg)
	streak(t, l)
	ctx := context.Background()
	a, err := l.Try(ctx, "")
	require.NoError(t, err)
	paused, resume := make(chan struct{}), make(chan struct{})
	runtime.PauseGuardForTest(n.client, func() {
		close(paused)
		<-resume
	})
	tx := mustBegin(t, tdb) // rolled back however the test ends: DROP DATABASE waits for it
	guarded := make(chan error, 1)
	go func() { guarded <- a.Guard(ctx, tx) }()
	<-paused
	require.NoError(t, a.Release(ctx))
	runtime.PauseGuardForTest(n.client, nil)
	b, err := l.Try(ctx, "")
	require.NoError(t, err)
	close(resume)
	require.ErrorIs(t, <-guarded, runtime.ErrReleased, "the Guard of a released holding must not pass for the next one")
	require.NoError(t, tx.Rollback())
	require.NoError(t, b.Guard(ctx, mustBegin(t, tdb)), "the next holding's own Guard passes")
	require.NoError(t, b.Release(ctx))
}

// mustBegin begins a transaction on a new pool of tdb, rolled back when
// the test ends.
func mustBegin(t *testing.T, tdb *testdb.DB) *sql.Tx {
	t.Helper()
	tx, err := tdb.Open(t).BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}
