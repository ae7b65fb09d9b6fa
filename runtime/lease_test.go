package runtime_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

func TestTryAcquireReleaseAndTokens(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t), runtime.WithOwner("node-a"))
	other := newNode(t, tdb.Open(t), runtime.WithOwner("node-b"))
	cfg := runtime.LockConfig{Name: "master", TTL: 5 * time.Second}
	l, lo := n.lock(t, cfg), other.lock(t, cfg)
	ctx := context.Background()

	var first, last int64
	for i := 0; i < 5; i++ {
		lease, err := l.Try(ctx, "")
		require.NoError(t, err)
		assert.Greater(t, lease.Token(), last, "tokens strictly increase")
		if first == 0 {
			first = lease.Token()
		}
		last = lease.Token()

		_, err = lo.Try(ctx, "")
		require.ErrorIs(t, err, runtime.ErrNotAcquired, "a held lock is not granted twice")
		h, err := lo.Holder(ctx, "")
		require.NoError(t, err)
		assert.True(t, h.Held)
		assert.Equal(t, "node-a", h.Owner)
		assert.Equal(t, lease.Token(), h.Token)
		assert.Greater(t, h.Remaining, 4*time.Second)
		assert.LessOrEqual(t, h.Remaining, 5*time.Second)

		require.NoError(t, lease.Release(ctx))
		require.ErrorIs(t, lease.Err(), runtime.ErrReleased)
		require.ErrorIs(t, lease.Release(ctx), runtime.ErrReleased, "second release")
		h, err = lo.Holder(ctx, "")
		require.NoError(t, err)
		assert.False(t, h.Held)
	}
	assert.GreaterOrEqual(t, last, first+4, "each acquisition adds at least 1")
	assert.InDelta(t, float64(time.Now().UnixMicro()), float64(first), float64(time.Minute.Microseconds()),
		"a new row's first token is the database clock in microseconds")
	assert.InDelta(t, float64(time.Now().UnixMicro()), float64(last), float64(time.Minute.Microseconds()),
		"later tokens follow the database clock: GREATEST(token + 1, clock)")
}

// TestStatementCounts proves acquire, renew and release are one statement
// each, counted on the real driver's connections: one round trip, plus one
// for the prepare on a connection's first call of each (driver.PreparedDB).
func TestStatementCounts(t *testing.T) {
	tdb := testdb.New(t)
	counter := stmtcount.Wrap(testkit.Connector(t, tdb.Config))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1) // one connection: each statement is prepared once
	require.NoError(t, db.Ping())
	// A frozen clock: no renewal runs unless the test asks for one.
	n := newNode(t, db, runtime.WithClock(frozenClock{now: time.Now()}))
	l := n.lock(t, runtime.LockConfig{Name: "counted", TTL: time.Minute})
	store := lockgendb.NewStore(db)
	ctx := context.Background()
	// The server probe, once per Client, is not part of any operation.
	require.NoError(t, n.client.CheckServer(ctx))

	for _, round := range []struct {
		name string
		want int64
	}{{"first (prepare + execute)", 2}, {"again, on a released row", 1}, {"and again", 1}} {
		before := counter.Count()
		lease, err := l.Try(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, round.want, counter.Count()-before, "acquire, %s", round.name)

		before = counter.Count()
		ok, err := store.LeaseRenew(ctx, driver.LeaseID{Name: "counted", Owner: lease.Owner(), Token: lease.Token()}, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, round.want, counter.Count()-before, "renew, %s", round.name)

		before = counter.Count()
		require.NoError(t, lease.Release(ctx))
		assert.Equal(t, round.want, counter.Count()-before, "release, %s", round.name)
	}
}

// TestMutualExclusion: 3 pools x 16 goroutines contend for one lock; an
// overlap checker fails on any overlap or non-increasing token.
func TestMutualExclusion(t *testing.T) {
	tdb := testdb.New(t)
	const pools, workers, perWorker = 3, 16, 12
	cfg := runtime.LockConfig{Name: "contended", TTL: 2 * time.Second, Wait: time.Minute}
	var locks []*runtime.Lock
	for p := 0; p < pools; p++ {
		locks = append(locks, newNode(t, tdb.Open(t)).lock(t, cfg))
	}
	chk := contend(t, locks, workers, perWorker)
	assert.Equal(t, pools*workers*perWorker, chk.entries, "every acquisition ran fn once")
	assert.Greater(t, chk.lastToken, chk.firstToken)
}

// TestKeyedLocksAreIndependent: different keys are different leases, each
// with its own token sequence.
func TestKeyedLocksAreIndependent(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	l := n.lock(t, runtime.LockConfig{Name: "order", Keyed: true, TTL: 5 * time.Second})
	ctx := context.Background()
	a, err := l.Try(ctx, "1")
	require.NoError(t, err)
	b, err := l.Try(ctx, "2")
	require.NoError(t, err)
	_, err = l.Try(ctx, "1")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	assert.NotZero(t, a.Token())
	assert.NotZero(t, b.Token())
	next, err := l.Try(ctx, "3")
	require.NoError(t, err)
	require.NoError(t, next.Release(ctx))
	again, err := l.Try(ctx, "3")
	require.NoError(t, err)
	assert.Greater(t, again.Token(), next.Token(), "each key has its own rising sequence")
	require.NoError(t, again.Release(ctx))
	require.NoError(t, a.Release(ctx))
	require.NoError(t, b.Release(ctx))
}

// TestLongCriticalSectionKeepsLease: fn runs for 3x the TTL; renewal keeps
// the lease, nobody else gets in, and the token never changes.
func TestLongCriticalSectionKeepsLease(t *testing.T) {
	tdb := testdb.New(t)
	a, b := newNode(t, tdb.Open(t)), newNode(t, tdb.Open(t))
	cfg := runtime.LockConfig{Name: "long", TTL: 400 * time.Millisecond}
	la, lb := a.lock(t, cfg), b.lock(t, cfg)
	err := la.With(context.Background(), "", func(ctx context.Context, lease *runtime.Lease) error {
		end := time.Now().Add(3 * cfg.TTL)
		for time.Now().Before(end) {
			_, err := lb.Try(context.Background(), "")
			require.ErrorIs(t, err, runtime.ErrNotAcquired)
			h, err := lb.Holder(context.Background(), "")
			require.NoError(t, err)
			require.Equal(t, lease.Token(), h.Token)
			require.NoError(t, ctx.Err())
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestNonHolderCannotRenewOrRelease: renew and release with a wrong owner or
// token change nothing.
func TestNonHolderCannotRenewOrRelease(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	store := lockgendb.NewStore(db)
	ctx := context.Background()
	token, err := store.LeaseAcquire(ctx, "guarded", "", "holder", 10*time.Second)
	require.NoError(t, err)
	require.NotZero(t, token)
	before, found, err := store.LeaseGet(ctx, "guarded", "")
	require.NoError(t, err)
	require.True(t, found)

	for _, id := range []driver.LeaseID{
		{Name: "guarded", Owner: "intruder", Token: token},
		{Name: "guarded", Owner: "holder", Token: token + 1},
		{Name: "guarded", Owner: "holder", Token: token - 1},
		{Name: "guarded", Key: "other", Owner: "holder", Token: token},
	} {
		ok, err := store.LeaseRenew(ctx, id, time.Hour)
		require.NoError(t, err)
		assert.False(t, ok, "renew by %+v", id)
		ok, err = store.LeaseRelease(ctx, id)
		require.NoError(t, err)
		assert.False(t, ok, "release by %+v", id)
	}
	after, _, err := store.LeaseGet(ctx, "guarded", "")
	require.NoError(t, err)
	assert.Equal(t, before.Owner, after.Owner)
	assert.Equal(t, before.Token, after.Token)
	assert.Equal(t, before.ExpiresAt, after.ExpiresAt)

	// And a second acquisition attempt by anyone fails while held.
	again, err := store.LeaseAcquire(ctx, "guarded", "", "holder", time.Second)
	require.NoError(t, err)
	assert.Zero(t, again)
}

// TestLostConnectionCancelsBeforeExpiry: the holder's network is cut; its
// context is cancelled with ErrLeaseLost while the database still shows the
// row held, and another node gets the lock only after that.
func TestLostConnectionCancelsBeforeExpiry(t *testing.T) {
	for _, skew := range []time.Duration{0, 7 * time.Hour, -7 * time.Hour} {
		t.Run("skew="+skew.String(), func(t *testing.T) {
			testLostConnection(t, skew)
		})
	}
}

func testLostConnection(t *testing.T, skew time.Duration) {
	tdb := testdb.New(t)
	proxy, pdb := testkit.OpenViaProxy(t, tdb)

	observer := tdb.Open(t)
	holder := newNode(t, pdb, runtime.WithClock(skewedClock{offset: skew}))
	rival := newNode(t, tdb.Open(t), runtime.WithClock(skewedClock{offset: -skew}))
	cfg := runtime.LockConfig{Name: "cut", TTL: 600 * time.Millisecond}
	lh, lr := holder.lock(t, cfg), rival.lock(t, cfg)
	ctx := context.Background()

	lease, err := lh.Try(ctx, "")
	require.NoError(t, err)
	proxy.Cut()

	var rivalToken int64
	told := false
	for rivalToken == 0 {
		select {
		case <-lease.Done():
			if !told {
				// The holder knows first: the row is still held by the database clock.
				told = true
				require.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost)
				assert.Greater(t, dbRemaining(t, observer, "cut", "", lease.Token()), time.Duration(0),
					"the holder must learn of the loss before the row expires")
			}
			next, err := lr.Try(context.Background(), "")
			if errors.Is(err, runtime.ErrNotAcquired) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			require.NoError(t, err)
			rivalToken = next.Token()
			require.NoError(t, next.Release(ctx))
		default:
			// Until the holder has been told, nobody else may get in.
			next, err := lr.Try(ctx, "")
			if err == nil {
				select {
				case <-lease.Done():
					t.Fatalf("rival acquired (token %d) before the holder's deadline fired", next.Token())
				default:
					t.Fatalf("rival acquired token %d while the holder still believed it held %d", next.Token(), lease.Token())
				}
			}
			require.ErrorIs(t, err, runtime.ErrNotAcquired)
			time.Sleep(10 * time.Millisecond)
		}
	}
	assert.Greater(t, rivalToken, lease.Token())
	require.ErrorIs(t, lease.Release(ctx), runtime.ErrLeaseLost, "releasing a lost lease reports the loss")
}

// TestKilledConnectionIsReplaced: KILLing the holder's connections makes the
// pool reconnect; the lease survives because renewal runs on a new
// connection before the deadline.
func TestKilledConnectionIsReplaced(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	db.SetMaxOpenConns(1)
	n := newNode(t, db)
	l := n.lock(t, runtime.LockConfig{Name: "killed", TTL: time.Second, RenewEvery: 200 * time.Millisecond})
	ctx := context.Background()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	var id int64
	require.NoError(t, db.QueryRow("SELECT CONNECTION_ID()").Scan(&id))
	admin := tdb.Admin(t)
	_, err = admin.Exec("KILL ?", id)
	require.NoError(t, err)
	time.Sleep(3 * time.Second)
	require.NoError(t, lease.Err(), "the lease survives a killed connection")
	assert.Greater(t, dbRemaining(t, admin, "killed", "", lease.Token()), 500*time.Millisecond)
	require.NoError(t, lease.Release(ctx))
}

// TestSessionTimeZonesAgree: two nodes whose sessions use time zones 25
// hours apart see the same expiry.
func TestSessionTimeZonesAgree(t *testing.T) {
	tdb := testdb.New(t)
	east, west := tdb.Config.Clone(), tdb.Config.Clone()
	east.Params = map[string]string{"time_zone": "'+13:00'"}
	west.Params = map[string]string{"time_zone": "'-12:00'"}
	dbEast := sql.OpenDB(testkit.Connector(t, east))
	dbWest := sql.OpenDB(testkit.Connector(t, west))
	t.Cleanup(func() { _ = dbEast.Close(); _ = dbWest.Close() })
	var tzE, tzW string
	require.NoError(t, dbEast.QueryRow("SELECT @@session.time_zone").Scan(&tzE))
	require.NoError(t, dbWest.QueryRow("SELECT @@session.time_zone").Scan(&tzW))
	require.Equal(t, "+13:00", tzE)
	require.Equal(t, "-12:00", tzW)

	e, w := newNode(t, dbEast), newNode(t, dbWest)
	cfg := runtime.LockConfig{Name: "tz", TTL: 2 * time.Second}
	le, lw := e.lock(t, cfg), w.lock(t, cfg)
	ctx := context.Background()
	lease, err := le.Try(ctx, "")
	require.NoError(t, err)
	_, err = lw.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired, "west must not see east's lease as expired")
	h, err := lw.Holder(ctx, "")
	require.NoError(t, err)
	assert.True(t, h.Held)
	assert.InDelta(t, float64(2*time.Second), float64(h.Remaining), float64(500*time.Millisecond))
	require.NoError(t, lease.Release(ctx))

	// The other way round, with a lease nobody renews: west takes it over
	// after about one TTL, not 25 hours early or late.
	store := lockgendb.NewStore(dbWest)
	token, err := store.LeaseAcquire(ctx, "tz2", "", "crashed", 300*time.Millisecond)
	require.NoError(t, err)
	require.NotZero(t, token)
	le2 := e.lock(t, runtime.LockConfig{Name: "tz2", TTL: time.Second, Wait: 5 * time.Second})
	_, err = le2.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	taken, err := le2.Acquire(ctx, "")
	require.NoError(t, err)
	assert.Greater(t, taken.Token(), token)
	require.NoError(t, taken.Release(ctx))
}

// TestUnknownOutcomes: a renew or release whose reply is lost after the
// server ran it is reconciled by re-reading the row, not taken as lost.
func TestUnknownOutcomes(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	faulty := &faultStore{Store: lockgendb.NewStore(db)}
	l := lockOn(t, faulty, runtime.LockConfig{Name: "unknown", TTL: 500 * time.Millisecond})
	ctx := context.Background()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	faulty.renewReplyLost.Store(true)
	time.Sleep(3 * 500 * time.Millisecond)
	require.NoError(t, lease.Err(), "renewals that ran but lost their reply keep the lease")
	assert.Greater(t, dbRemaining(t, db, "unknown", "", lease.Token()), time.Duration(0))
	faulty.renewReplyLost.Store(false)

	faulty.releaseLost.Store(true)
	require.NoError(t, lease.Release(ctx), "a release that ran but lost its reply is done")
	h, err := l.Holder(ctx, "")
	require.NoError(t, err)
	assert.False(t, h.Held)
}

// TestDeadlineAfterRenewalsPrecedesExpiry: renewals succeed, with replies
// that come back late (or are lost and reconciled by a re-read), then the
// network is partitioned. The holder must still learn of the loss while the
// database shows the row held: each local deadline counts from when the
// renewal (or the re-read) was sent, not from when its reply arrived.
func TestDeadlineAfterRenewalsPrecedesExpiry(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("replyLost=%v", lost), func(t *testing.T) {
			tdb := testdb.New(t)
			db := tdb.Open(t)
			ttl := 600 * time.Millisecond // margin 60ms, renewal every 200ms
			faulty := &faultStore{Store: lockgendb.NewStore(db), renewReplyDelay: 150 * time.Millisecond, partitionAfter: 3}
			faulty.renewReplyLost.Store(lost)
			l := lockOn(t, faulty, runtime.LockConfig{Name: "late", TTL: ttl})
			lease, err := l.Try(context.Background(), "")
			require.NoError(t, err)
			<-lease.Done()
			require.GreaterOrEqual(t, faulty.replies.Load(), int32(3), "late replies alone do not lose the lease")
			require.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost)
			// Measured from the local deadline, the moment Err reports the
			// loss, not from when this goroutine woke: load on the machine
			// cannot make the check pass or fail.
			left := dbRemainingAt(t, db, "late", "", lease.Token(), lease.LocalDeadline())
			assert.Greater(t, left, time.Duration(0), "the holder must learn of the loss before the row expires")
		})
	}
}

// renewedNothingOnce is the real store whose first renewal renews the row
// but reports 0 rows, as a renewal that found a later expiry (a later
// renewal's) does: the expiry never moves back, and the DSN has no
// clientFoundRows.
type renewedNothingOnce struct {
	driver.Store
	done atomic.Bool
}

func (s *renewedNothingOnce) LeaseRenew(ctx context.Context, id driver.LeaseID, ttl time.Duration) (bool, error) {
	ok, err := s.Store.LeaseRenew(ctx, id, ttl)
	if err == nil && s.done.CompareAndSwap(false, true) {
		return false, nil
	}
	return ok, err
}

// TestRenewalThatRenewedNothingIsReadAgain: a renewal that reports no row
// renewed is no proof of a loss; the holder reads the row, finds it still
// its own, and keeps the lease.
func TestRenewalThatRenewedNothingIsReadAgain(t *testing.T) {
	tdb := testdb.New(t)
	store := &renewedNothingOnce{Store: lockgendb.NewStore(tdb.Open(t))}
	l := lockOn(t, store, runtime.LockConfig{Name: "nothing", TTL: 600 * time.Millisecond})
	ctx := context.Background()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	require.Eventually(t, store.done.Load, 10*time.Second, time.Millisecond)
	time.Sleep(2 * 600 * time.Millisecond)
	require.NoError(t, lease.Err(), "a renewal that renewed nothing while the row was still the holder's loses nothing")
	require.NoError(t, lease.Release(ctx))
}

// stallUntil says when the stalled first renewal of stalledFirstRenew
// writes.
type stallUntil int

const (
	// afterSecond: once the hedge's second attempt has committed and
	// answered.
	afterSecond stallUntil = iota
	// afterReread: the second's reply is lost and the first's connection
	// fails at once (the client gives up on it, the server runs it on);
	// it writes once the runtime has read the row again.
	afterReread
	// afterNextRound: once the next renewal round has renewed and
	// answered.
	afterNextRound
)

func (m stallUntil) String() string {
	return [...]string{"after the second attempt", "after the re-read", "after the next round"}[m]
}

// stalledFirstRenew is the real store whose first renewal stalls on the
// server after it started: its statement starts at once, but writes only
// later (see stallUntil), with the expiry its own start gives; the network
// is then partitioned.
type stalledFirstRenew struct {
	driver.Store
	until stallUntil
	// late is a pool of one connection on which the first renewal writes,
	// with the session's clock set back to when it was sent.
	late        *sql.DB
	calls       atomic.Int32
	reads       atomic.Int32
	secondDone  chan struct{}
	release     chan struct{}
	releaseOnce sync.Once
	wrote       chan struct{}
	partitioned atomic.Bool
	// Set before wrote is closed: the expiry the row had before the late
	// write and the one the late write asked for, and what went wrong.
	before, asked time.Time
	err           error
}

func newStalledFirstRenew(t *testing.T, tdb *testdb.DB, until stallUntil) *stalledFirstRenew {
	late := tdb.Open(t)
	late.SetMaxOpenConns(1)
	return &stalledFirstRenew{Store: lockgendb.NewStore(tdb.Open(t)), until: until, late: late,
		secondDone: make(chan struct{}), release: make(chan struct{}), wrote: make(chan struct{})}
}

func (s *stalledFirstRenew) open() { s.releaseOnce.Do(func() { close(s.release) }) }

// wait waits for ch for up to 20 s, and records a failure when it does not
// close.
func (s *stalledFirstRenew) wait(ch chan struct{}, what string) bool {
	select {
	case <-ch:
		return true
	case <-time.After(20 * time.Second):
		s.err = fmt.Errorf("the stalled renewal waited 20 s for %s", what)
		return false
	}
}

// lateWrite runs the first renewal's statement as if it had started at
// sent, then partitions the network.
func (s *stalledFirstRenew) lateWrite(id driver.LeaseID, ttl time.Duration, sent time.Time) {
	defer close(s.wrote)
	defer s.partitioned.Store(true)
	if s.err != nil {
		return
	}
	if err := s.late.QueryRow("SELECT expires_at FROM lockgen_locks WHERE name = ? AND lock_key = ?", id.Name, id.Key).Scan(&s.before); err != nil {
		s.err = err
		return
	}
	s.asked = sent.Add(ttl)
	if _, err := s.late.Exec(fmt.Sprintf("SET timestamp = %d.%06d", sent.Unix(), sent.Nanosecond()/1000)); err != nil {
		s.err = err
		return
	}
	_, s.err = lockgendb.NewStore(s.late).LeaseRenew(context.Background(), id, ttl)
}

func (s *stalledFirstRenew) LeaseRenew(ctx context.Context, id driver.LeaseID, ttl time.Duration) (bool, error) {
	if s.partitioned.Load() {
		return false, errPartitioned
	}
	n := s.calls.Add(1)
	switch {
	case n == 1:
		sent := time.Now()
		if s.until == afterReread {
			s.wait(s.secondDone, "the second attempt")
			go func() {
				s.wait(s.release, "the re-read")
				s.lateWrite(id, ttl, sent)
			}()
			return false, errReplyLost
		}
		s.wait(s.release, s.until.String())
		time.Sleep(50 * time.Millisecond) // the answer is in
		s.lateWrite(id, ttl, sent)
		return false, errReplyLost
	case n == 2:
		ok, err := s.Store.LeaseRenew(ctx, id, ttl)
		close(s.secondDone)
		switch s.until {
		case afterSecond:
			s.open()
		case afterReread:
			return false, errReplyLost
		}
		return ok, err
	case n == 3 && s.until == afterNextRound:
		ok, err := s.Store.LeaseRenew(ctx, id, ttl)
		s.open()
		return ok, err
	}
	s.wait(s.wrote, "the late write")
	return false, errPartitioned
}

func (s *stalledFirstRenew) LeaseGet(ctx context.Context, name, key string) (driver.LeaseRow, bool, error) {
	if s.reads.Add(1) > 1 {
		s.wait(s.wrote, "the late write")
	}
	if s.partitioned.Load() {
		return driver.LeaseRow{}, false, errPartitioned
	}
	row, found, err := s.Store.LeaseGet(ctx, name, key)
	if s.until == afterReread {
		s.open()
	}
	return row, found, err
}

// TestStalledRenewalWritingLateKeepsTheExpiry: a renewal whose statement started
// on the server, then stalled there while later ones renewed, writes after
// them with the expiry its own, earlier start gives. The holder must still
// learn of the loss before the row expires: whether the hedge's second
// attempt answered, or its reply was lost and the row was read again
// before the stalled one wrote, or a whole later round renewed first.
// While the renew statement set the expiry without GREATEST, the holder
// learnt of it 265–267 ms (the first two) and 1.27 s (the third) after the
// row expired (TTL 3 s, margin 300 ms).
func TestStalledRenewalWritingLateKeepsTheExpiry(t *testing.T) {
	for _, until := range []stallUntil{afterSecond, afterReread, afterNextRound} {
		t.Run(until.String(), func(t *testing.T) {
			tdb := testdb.New(t)
			store := newStalledFirstRenew(t, tdb, until)
			l := lockOn(t, store, runtime.LockConfig{Name: "stalled", TTL: 3 * time.Second})
			lease, err := l.Try(context.Background(), "")
			require.NoError(t, err)
			select {
			case <-lease.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the lease outlived the partition")
			}
			require.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost)
			select {
			case <-store.wrote:
			case <-time.After(20 * time.Second):
				t.Fatal("the stalled renewal never wrote")
			}
			require.NoError(t, store.err)
			require.True(t, store.asked.Before(store.before), "the stalled renewal asks for an earlier expiry (%v) than the row has (%v)", store.asked, store.before)
			left := dbRemainingAt(t, tdb.Open(t), "stalled", "", lease.Token(), lease.LocalDeadline())
			assert.Greater(t, left, time.Duration(0), "the holder must learn of the loss before the row expires")
		})
	}
}

// TestWithReportsLoss: when the lease is lost while fn runs, fn's ctx is
// cancelled with cause ErrLeaseLost and With returns ErrLeaseLost even though
// fn returned nil.
func TestWithReportsLoss(t *testing.T) {
	tdb := testdb.New(t)
	faulty := &faultStore{Store: lockgendb.NewStore(tdb.Open(t))}
	l := lockOn(t, faulty, runtime.LockConfig{Name: "lossy", TTL: 300 * time.Millisecond})
	err := l.With(context.Background(), "", func(ctx context.Context, lease *runtime.Lease) error {
		faulty.partitioned.Store(true)
		select {
		case <-ctx.Done():
			assert.ErrorIs(t, context.Cause(ctx), runtime.ErrLeaseLost)
		case <-time.After(10 * time.Second):
			t.Error("fn's ctx was not cancelled when the lease was lost")
		}
		faulty.partitioned.Store(false)
		return nil
	})
	require.ErrorIs(t, err, runtime.ErrLeaseLost)
}

// TestSlowAcquireRenewsBeforeDeadline: an acquire whose reply takes most of
// the TTL leaves little time; the first renewal must come before the local
// deadline instead of a full renewal period later.
func TestSlowAcquireRenewsBeforeDeadline(t *testing.T) {
	tdb := testdb.New(t)
	slow := &slowAcquire{Store: lockgendb.NewStore(tdb.Open(t)), delay: 700 * time.Millisecond}
	l := lockOn(t, slow, runtime.LockConfig{Name: "slow", TTL: time.Second, RenewEvery: 300 * time.Millisecond})
	lease, err := l.Try(context.Background(), "")
	require.NoError(t, err)
	time.Sleep(time.Second)
	require.NoError(t, lease.Err(), "renewal must start before the shortened deadline")
	require.NoError(t, lease.Release(context.Background()))
}

// TestTooSlowAcquireIsGivenBack: an acquire answered after its lease's
// local deadline is not a lease: the row is given back and the attempt
// counts as busy.
func TestTooSlowAcquireIsGivenBack(t *testing.T) {
	tdb := testdb.New(t)
	slow := &slowAcquire{Store: lockgendb.NewStore(tdb.Open(t)), delay: 950 * time.Millisecond}
	l := lockOn(t, slow, runtime.LockConfig{Name: "tooslow", TTL: time.Second})
	_, err := l.Try(context.Background(), "")
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	h, err := l.Holder(context.Background(), "")
	require.NoError(t, err)
	assert.False(t, h.Held, "the row was given back")
	assert.NotZero(t, h.Token)
}

// slowAcquire answers acquires late (after running them).
type slowAcquire struct {
	driver.Store
	delay time.Duration
}

func (s *slowAcquire) LeaseAcquire(ctx context.Context, name, key, owner string, ttl time.Duration) (int64, error) {
	token, err := s.Store.LeaseAcquire(ctx, name, key, owner, ttl)
	time.Sleep(s.delay)
	return token, err
}

// TestReleaseAfterRequestEnded: a deferred Release with a context that has
// already ended still frees the row.
func TestReleaseAfterRequestEnded(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	l := n.lock(t, runtime.LockConfig{Name: "ended", TTL: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	cancel()
	require.NoError(t, lease.Release(ctx))
	h, err := l.Holder(context.Background(), "")
	require.NoError(t, err)
	assert.False(t, h.Held)
}

// TestTransientErrorsKeepWaiting: deadlocks (1213) during Acquire are
// retried with backoff and, when they persist, count as a busy lock: the
// wait goes on instead of failing at once.
func TestTransientErrorsKeepWaiting(t *testing.T) {
	tdb := testdb.New(t)
	flaky := &deadlocking{Store: lockgendb.NewStore(tdb.Open(t))}
	flaky.failures.Store(8)
	l := lockOn(t, flaky, runtime.LockConfig{Name: "flaky", TTL: time.Second, Wait: 30 * time.Second})
	lease, err := l.Acquire(context.Background(), "")
	require.NoError(t, err)
	assert.Equal(t, int32(0), flaky.failures.Load())
	require.NoError(t, lease.Release(context.Background()))
}

// deadlocking fails the next N acquires with the server's deadlock error,
// as InnoDB reports it, without running them.
type deadlocking struct {
	driver.Store
	failures atomic.Int32
}

func (s *deadlocking) LeaseAcquire(ctx context.Context, name, key, owner string, ttl time.Duration) (int64, error) {
	if s.failures.Add(-1) >= 0 {
		return 0, &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	}
	s.failures.Store(0)
	return s.Store.LeaseAcquire(ctx, name, key, owner, ttl)
}

func TestWithReleasesOnErrorPanicAndCancel(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	l := n.lock(t, runtime.LockConfig{Name: "with", TTL: 10 * time.Second})
	ctx := context.Background()
	held := func() bool {
		h, err := l.Holder(ctx, "")
		require.NoError(t, err)
		return h.Held
	}

	boom := errors.New("boom")
	err := l.With(ctx, "", func(ctx context.Context, lease *runtime.Lease) error {
		require.True(t, held())
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.False(t, held(), "released after fn error")

	require.PanicsWithValue(t, "kaboom", func() {
		_ = l.With(ctx, "", func(context.Context, *runtime.Lease) error { panic("kaboom") })
	})
	assert.False(t, held(), "released after panic")

	cctx, cancel := context.WithCancel(ctx)
	err = l.With(cctx, "", func(ctx context.Context, lease *runtime.Lease) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, held(), "released after ctx cancel")
}

// TestWaitingWakesOnLocalRelease: with a clock whose timers never fire, a
// waiter can only get the lock through the in-process wake-up on release.
func TestWaitingWakesOnLocalRelease(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t), runtime.WithClock(frozenClock{now: time.Now()}))
	l := n.lock(t, runtime.LockConfig{Name: "wake", TTL: time.Minute, Wait: time.Hour})
	ctx := context.Background()
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	got := make(chan *runtime.Lease)
	go func() {
		next, err := l.Acquire(ctx, "")
		assert.NoError(t, err)
		got <- next
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter fail once and sleep
	require.NoError(t, lease.Release(ctx))
	select {
	case next := <-got:
		assert.Greater(t, next.Token(), lease.Token())
		require.NoError(t, next.Release(ctx))
		assert.Zero(t, runtime.WaitersForTest(n.client), "no wake-up entry outlives its waiter")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
}

func TestWaitEndsWithErrNotAcquired(t *testing.T) {
	tdb := testdb.New(t)
	a, b := newNode(t, tdb.Open(t)), newNode(t, tdb.Open(t))
	cfg := runtime.LockConfig{Name: "busy", TTL: 10 * time.Second, Wait: 300 * time.Millisecond}
	lease, err := a.lock(t, cfg).Try(context.Background(), "")
	require.NoError(t, err)
	called := false
	err = b.lock(t, cfg).With(context.Background(), "", func(context.Context, *runtime.Lease) error {
		called = true
		return nil
	})
	require.ErrorIs(t, err, runtime.ErrNotAcquired)
	assert.False(t, called)
	assert.Zero(t, runtime.WaitersForTest(b.client), "no wake-up entry outlives its waiter")
	require.NoError(t, lease.Release(context.Background()))
}

func TestInvalidUse(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.Open(t)
	_, err := runtime.NewClient(nil)
	require.ErrorIs(t, err, runtime.ErrInvalid)
	_, err = runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner(""))
	require.ErrorIs(t, err, runtime.ErrInvalid)
	n := newNode(t, db)
	for name, cfg := range map[string]runtime.LockConfig{
		"empty name":              {TTL: time.Second},
		"zero ttl":                {Name: "x"},
		"ttl below minimum":       {Name: "x", TTL: 10 * time.Millisecond},
		"renew_every >= ttl":      {Name: "x", TTL: time.Second, RenewEvery: time.Second},
		"renew_every in margin":   {Name: "x", TTL: time.Second, RenewEvery: 950 * time.Millisecond},
		"negative wait":           {Name: "x", TTL: time.Second, Wait: -1},
		"idle timeout on lease":   {Name: "x", TTL: time.Second, IdleTimeout: time.Minute},
		"idle timeout on session": {Name: "x", Strategy: runtime.StrategySession, TTL: time.Second, IdleTimeout: time.Minute},
		"row idle below 1s":       {Name: "x", Strategy: runtime.StrategyRow, IdleTimeout: 500 * time.Millisecond},
		"row idle above 24h":      {Name: "x", Strategy: runtime.StrategyRow, IdleTimeout: 25 * time.Hour},
	} {
		_, err := n.client.Lock(cfg)
		assert.ErrorIs(t, err, runtime.ErrInvalid, name)
	}
	plain := n.lock(t, runtime.LockConfig{Name: "plain", TTL: time.Second})
	keyed := n.lock(t, runtime.LockConfig{Name: "keyed", Keyed: true, TTL: time.Second})
	ctx := context.Background()
	require.ErrorIs(t, plain.With(ctx, "", nil), runtime.ErrInvalid)
	_, err = keyed.Try(ctx, "")
	require.ErrorIs(t, err, runtime.ErrInvalid, "empty key")
	_, err = plain.Try(ctx, "k")
	require.ErrorIs(t, err, runtime.ErrInvalid, "key on an unkeyed lock")
	_, err = keyed.Try(ctx, string(make([]byte, runtime.MaxKeyLen+1)))
	require.ErrorIs(t, err, runtime.ErrInvalid, "key too long")
}

// TestKeysAndOwnersMustBeUTF8: on a server without strict mode, a key that
// is not valid UTF-8 would be cut at its first bad byte, so "a\xffb" and
// "a\xfec" would share one row and renewals by the original key would never
// match. They, bad owners and bad lock names are refused with ErrInvalid
// before any statement; a valid key on that connection is refused by the
// probe (ErrInvalid); on a strict connection valid 4-byte UTF-8 and NUL
// bytes are held as themselves, each key its own row.
func TestKeysAndOwnersMustBeUTF8(t *testing.T) {
	tdb := testdb.New(t)
	cfg := tdb.Config.Clone()
	cfg.Params = map[string]string{"sql_mode": "''"} // not strict: the server would truncate
	counter := stmtcount.Wrap(testkit.Connector(t, cfg))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	n := newNode(t, db)
	keyed := n.lock(t, runtime.LockConfig{Name: "utf8", Keyed: true, TTL: 5 * time.Second})

	before := counter.Count()
	for _, key := range []string{"a\xffb", "a\xfec", "\xc3", "ok\xe2\x82"} {
		_, err := keyed.Try(ctx, key)
		require.ErrorIs(t, err, runtime.ErrInvalid, "%q", key)
	}
	assert.Equal(t, before, counter.Count(), "refused before any statement")
	_, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner("node\xff"))
	require.ErrorIs(t, err, runtime.ErrInvalid, "owner")
	_, err = n.client.Lock(runtime.LockConfig{Name: "bad\xff", TTL: time.Second})
	require.ErrorIs(t, err, runtime.ErrInvalid, "lock name")

	// Valid keys reach the server, which the probe refuses on this
	// connection: without strict mode it would mangle what it cannot
	// store. On a strict one each is its own row.
	_, err = keyed.Try(ctx, "😀")
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.Contains(t, err.Error(), "sql_mode")
	strict := tdb.Open(t)
	keyed = newNode(t, strict).lock(t, runtime.LockConfig{Name: "utf8", Keyed: true, TTL: 5 * time.Second})
	var leases []*runtime.Lease
	for _, key := range []string{"😀", "a\x00b", "a\x00c", `'; DROP TABLE lockgen_locks; --`, `back\slash"quote`} {
		lease, err := keyed.Try(ctx, key)
		require.NoError(t, err, "%q is its own key", key)
		row, found, err := lockgendb.NewStore(strict).LeaseGet(ctx, "utf8", key)
		require.NoError(t, err)
		require.True(t, found, "%q stored as itself", key)
		assert.Equal(t, lease.Token(), row.Token)
		leases = append(leases, lease)
	}
	for _, l := range leases {
		require.NoError(t, l.Release(ctx))
	}
}

// TestPausedHolderSeesLossAtFirstCheck: once the local deadline has passed
// by the clock, the lease's Err, Held and Context().Err, and fn's ctx in
// With, report the loss at the first call, before any timer goroutine runs
// (this clock's timers never fire), and Done is closed by then.
func TestPausedHolderSeesLossAtFirstCheck(t *testing.T) {
	tdb := testdb.New(t)
	clock := &pausedClock{now: time.Now()}
	n := newNode(t, tdb.Open(t), runtime.WithClock(clock))
	ctx := context.Background()

	l := n.lock(t, runtime.LockConfig{Name: "paused", TTL: time.Second})
	lease, err := l.Try(ctx, "")
	require.NoError(t, err)
	require.True(t, lease.Held())
	clock.advance(lease.LocalDeadline().Sub(clock.Now()) - time.Millisecond)
	require.NoError(t, lease.Err(), "a millisecond before the local deadline")
	clock.advance(time.Millisecond)
	assert.ErrorIs(t, lease.Context().Err(), context.Canceled, "at the local deadline")
	assert.ErrorIs(t, context.Cause(lease.Context()), runtime.ErrLeaseLost)
	assert.ErrorIs(t, lease.Err(), runtime.ErrLeaseLost)
	assert.False(t, lease.Held())
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done must be closed once Err reports the loss")
	}

	inFn := n.lock(t, runtime.LockConfig{Name: "paused-with", TTL: time.Second})
	err = inFn.With(ctx, "", func(ctx context.Context, lease *runtime.Lease) error {
		require.NoError(t, ctx.Err())
		clock.advance(time.Second)
		assert.ErrorIs(t, ctx.Err(), context.Canceled, "fn's first check after the pause")
		assert.ErrorIs(t, context.Cause(ctx), runtime.ErrLeaseLost)
		select {
		case <-ctx.Done():
		default:
			t.Error("fn's Done must be closed once its Err reports the loss")
		}
		return nil
	})
	require.ErrorIs(t, err, runtime.ErrLeaseLost)

	// fn returns the loss: With reports it once, not joined with Release's.
	again := n.lock(t, runtime.LockConfig{Name: "paused-again", TTL: time.Second})
	err = again.With(ctx, "", func(ctx context.Context, lease *runtime.Lease) error {
		clock.advance(time.Second)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return nil
	})
	require.ErrorIs(t, err, runtime.ErrLeaseLost)
	assert.Equal(t, 1, strings.Count(err.Error(), runtime.ErrLeaseLost.Error()), err.Error())
}
