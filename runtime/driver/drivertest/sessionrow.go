package drivertest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

func testSession(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("session")
	lockName := s.SessionNamespace() + name
	c1, err := s.SessionConn(ctx)
	require.NoError(t, err)
	c2, err := s.SessionConn(ctx)
	require.NoError(t, err)
	defer func() { _ = c2.Close() }()

	got, err := c1.GetLock(ctx, lockName, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, got, "a free lock is granted")
	held, err := c1.HoldsLock(ctx, lockName)
	require.NoError(t, err)
	assert.True(t, held)
	used, err := s.SessionIsUsed(ctx, lockName)
	require.NoError(t, err)
	assert.True(t, used)
	got, err = c2.GetLock(ctx, lockName, 100*time.Millisecond)
	require.NoError(t, err)
	assert.EqualValues(t, 0, got, "a held lock times out for another connection")
	held, err = c2.HoldsLock(ctx, lockName)
	require.NoError(t, err)
	assert.False(t, held)
	rel, err := c2.ReleaseLock(ctx, lockName)
	require.NoError(t, err)
	assert.EqualValues(t, 0, rel, "another connection cannot release it")
	tok, _, err := c2.Token(ctx, name, "", "b", lockName, 0)
	require.NoError(t, err)
	assert.Zero(t, tok, "a connection without the session lock gets no token")
	bound, err := c2.BoundGetLock(ctx, time.Minute, lockName, 100*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, bound, "the one-statement acquire times out on a held lock too")

	t1, _, err := c1.Token(ctx, name, "", "a", lockName, 0)
	require.NoError(t, err)
	require.Positive(t, t1)
	id := driver.LeaseID{Name: name, Owner: "a", Token: t1}
	// Renew runs on the connection. A session holding's row never expires
	// by time (its expiry is the year 9999), and a renewal never moves an
	// expiry back: the row stays the holding's, and Free below frees it.
	_, err = c1.Renew(ctx, id, time.Minute)
	require.NoError(t, err)
	row, found, err := s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, t1, row.Token, "a renewal keeps the session holding")
	ok, err := c1.Free(ctx, driver.LeaseID{Name: name, Owner: "a", Token: t1 + 1})
	require.NoError(t, err)
	assert.False(t, ok, "a wrong token frees nothing")
	ok, err = c1.Free(ctx, id)
	require.NoError(t, err)
	assert.True(t, ok)
	t2, _, err := c1.Token(ctx, name, "", "a", lockName, 0)
	require.NoError(t, err)
	assert.Greater(t, t2, t1, "every session holding's token is above the last")

	rel, err = c1.ReleaseLock(ctx, lockName)
	require.NoError(t, err)
	assert.EqualValues(t, 1, rel)
	rel, err = c1.ReleaseLock(ctx, lockName)
	require.NoError(t, err)
	assert.EqualValues(t, -1, rel, "a lock nobody holds")

	got, err = c2.GetLock(ctx, lockName, time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 1, got)
	require.NoError(t, c2.Discard(), "discarding the connection drops its locks")
	require.Eventually(t, func() bool {
		used, err := s.SessionIsUsed(ctx, lockName)
		return err == nil && !used
	}, 5*time.Second, 20*time.Millisecond, "the server frees a discarded connection's lock")
	require.NoError(t, c1.Close())

	c3, err := s.SessionConn(ctx)
	require.NoError(t, err)
	bound, err = c3.BoundGetLock(ctx, time.Minute, lockName, time.Second)
	require.NoError(t, err)
	require.True(t, bound, "the one-statement acquire takes a free lock")
	held, err = c3.HoldsLock(ctx, lockName)
	require.NoError(t, err)
	assert.True(t, held)
	t3, _, err := c3.Token(ctx, name, "", "c", lockName, 0)
	require.NoError(t, err)
	assert.Greater(t, t3, t2)
	released, err := c3.ReleaseClose(ctx, lockName)
	require.NoError(t, err)
	assert.True(t, released)
	used, err = s.SessionIsUsed(ctx, lockName)
	require.NoError(t, err)
	assert.False(t, used, "the one-statement release frees the lock")
	c4, err := s.SessionConn(ctx)
	require.NoError(t, err)
	released, err = c4.ReleaseClose(ctx, lockName)
	require.NoError(t, err)
	assert.False(t, released, "a lock this connection does not hold is not released")
}

// testLeaseTakeover: a row that shows a session holding is reported to
// LeaseAcquire as SessionHeld and left alone; LeaseTakeover takes it only
// once the holding's server-side lock is free.
func testLeaseTakeover(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("takeover")
	conn, err := s.SessionConn(ctx)
	require.NoError(t, err)
	got, err := conn.GetLock(ctx, s.SessionNamespace()+name, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, got)
	held, _, err := conn.Token(ctx, name, "", "a", s.SessionNamespace()+name, 0)
	require.NoError(t, err)

	tok, err := s.LeaseAcquire(ctx, name, "", "b", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, driver.SessionHeld, tok, "a session holding is reported, not taken")
	tok, err = s.LeaseTakeover(ctx, name, "", "b", s.SessionNamespace()+name, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, tok, "a live session holding is not taken")
	row, _, err := s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	assert.Equal(t, "a", row.Owner)
	assert.Equal(t, held, row.Token)

	rtx, err := s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	require.NoError(t, rtx.LockWait(ctx, name, ""))
	tok, err = rtx.Take(ctx, name, "", "c")
	require.NoError(t, err)
	assert.EqualValues(t, driver.SessionHeld, tok, "a row holding reports the session holding, too")
	tok, err = rtx.Takeover(ctx, name, "", "c", s.SessionNamespace()+name)
	require.NoError(t, err)
	assert.Zero(t, tok, "and does not take it while it lives")
	require.NoError(t, rtx.RestoreLockWait(ctx))
	require.NoError(t, rtx.Rollback())

	require.NoError(t, conn.Discard(), "the session holder dies")
	require.Eventually(t, func() bool {
		used, err := s.SessionIsUsed(ctx, s.SessionNamespace()+name)
		return err == nil && !used
	}, 5*time.Second, 20*time.Millisecond)
	rtx, err = s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	require.NoError(t, rtx.LockWait(ctx, name, ""))
	tok, err = rtx.Takeover(ctx, name, "", "c", s.SessionNamespace()+name)
	require.NoError(t, err)
	assert.Greater(t, tok, held, "a row holding takes a dead session holding")
	require.NoError(t, rtx.RestoreLockWait(ctx))
	require.NoError(t, rtx.Rollback(), "rolled back: the session mark is back")
	tok, err = s.LeaseTakeover(ctx, name, "", "b", s.SessionNamespace()+name, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, tok, held, "a dead session holding is taken, with a higher token")
}

// testSessionReservation: the session token statement arms a reservation
// when the row was already the owner's, and the owner's next holdings take
// their tokens from it without writing the row while its witness lives,
// its bound is not passed and the row stays theirs; every other holding,
// and every holding after the witness died or a row takeover, writes a
// token above the bound.
func testSessionReservation(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("reserve")
	lockName := s.SessionNamespace() + name
	const reserve = 1000
	// hold pins a connection, takes the session lock with the acquire's
	// one statement (which also takes the connection's witness), issues
	// the token and releases.
	hold := func(owner string) (token int64, reserved bool) {
		t.Helper()
		c, err := s.SessionConn(ctx)
		require.NoError(t, err)
		bound, err := c.BoundGetLock(ctx, time.Minute, lockName, time.Second)
		require.NoError(t, err)
		require.True(t, bound)
		r, err := c.TokenRead(ctx, name, "", owner, lockName)
		require.NoError(t, err)
		require.True(t, r.Held || !r.Found)
		token, reserved, err = c.Token(ctx, name, "", owner, lockName, reserve)
		require.NoError(t, err)
		require.Positive(t, token)
		assert.Equal(t, r.Reserved(), reserved, "the read and the statement agree on the reservation")
		released, err := c.ReleaseClose(ctx, lockName)
		require.NoError(t, err)
		require.True(t, released)
		return token, reserved
	}
	rowToken := func() int64 {
		t.Helper()
		row, _, err := s.LeaseGet(ctx, name, "")
		require.NoError(t, err)
		return row.Token
	}

	t1, reserved := hold("a")
	assert.False(t, reserved)
	assert.Equal(t, t1, rowToken(), "a first holding reserves nothing")
	t2, reserved := hold("a")
	assert.False(t, reserved, "the second holding writes, and arms")
	assert.Greater(t, t2, t1)
	bound := rowToken()
	assert.Equal(t, t2+reserve, bound, "the owner's second holding arms a reservation: the row's token is its bound")

	// The owner's next holdings take their tokens from the reservation.
	last := t2
	for range 3 {
		tok, reserved := hold("a")
		assert.True(t, reserved)
		assert.Greater(t, tok, last, "every reserved token is above the last")
		assert.LessOrEqual(t, tok, bound)
		assert.Equal(t, bound, rowToken(), "a reserved token writes nothing")
		last = tok
	}

	// Another owner's holding writes, above the bound, and reserves
	// nothing; its next holding reserves.
	t3, reserved := hold("b")
	assert.False(t, reserved)
	assert.Greater(t, t3, bound, "a written token passes the bound")
	assert.Equal(t, t3, rowToken())
	t4, _ := hold("b")
	bound = rowToken()
	assert.Equal(t, t4+reserve, bound)
	t5, reserved := hold("b")
	assert.True(t, reserved)
	assert.Greater(t, t5, t4)
	assert.Equal(t, bound, rowToken())

	// The witness dies with the connection that wrote the reservation:
	// the reservation ends with it.
	w := witnessOf(t, s, name)
	require.NotEmpty(t, w)
	killWitness(t, s, w)
	t6, reserved := hold("b")
	assert.False(t, reserved)
	assert.Greater(t, t6, bound, "the next token is written, above the old bound")
	assert.NotEqual(t, w, witnessOf(t, s, name), "a new witness armed the row")

	// Guard: the holding is its connection, which holds the session lock
	// and its witness.
	c, err := s.SessionConn(ctx)
	require.NoError(t, err)
	bound2, err := c.BoundGetLock(ctx, time.Minute, lockName, time.Second)
	require.NoError(t, err)
	require.True(t, bound2)
	_, _, err = c.Token(ctx, name, "", "b", lockName, reserve)
	require.NoError(t, err)
	id, witness, err := c.Identity(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, witness)
	tx, err := s.Server().DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		owner, witness string
		id             int64
		want           bool
		why            string
	}{
		{"b", witness, id, true, "the holding's own connection and witness"},
		{"b", witness, id + 1, false, "another connection"},
		{"b", witness + "0", id, false, "a witness that is not the connection's (a restart ended it)"},
		{"b", "", id, false, "no witness"},
		{"a", witness, id, false, "another owner"},
	} {
		ok, err := s.SessionGuard(ctx, tx, name, "", tc.owner, lockName, tc.id, tc.witness)
		require.NoError(t, err)
		assert.Equal(t, tc.want, ok, tc.why)
	}
	require.NoError(t, tx.Rollback())
	released, err := c.ReleaseClose(ctx, lockName)
	require.NoError(t, err)
	require.True(t, released)

	// A row-strategy takeover of an armed row is refused until the
	// reservation is disarmed; rolled back, it leaves the next session
	// token above its own.
	hold("b")
	bound = rowToken()
	rtx, err := s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	require.NoError(t, rtx.LockWait(ctx, name, ""))
	tok, err := rtx.Takeover(ctx, name, "", "c", lockName)
	require.NoError(t, err)
	assert.EqualValues(t, driver.SessionArmed, tok, "an armed reservation is not taken over")
	require.NoError(t, rtx.Rollback())
	require.NoError(t, s.SessionDisarm(ctx, name, ""))
	rtx, err = s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	require.NoError(t, rtx.LockWait(ctx, name, ""))
	rowTok, err := rtx.Takeover(ctx, name, "", "c", lockName)
	require.NoError(t, err)
	require.Greater(t, rowTok, bound, "a disarmed row is taken over")
	require.NoError(t, rtx.Rollback(), "the row holder's transaction is rolled back")
	t7, reserved := hold("b")
	assert.False(t, reserved)
	assert.Greater(t, t7, rowTok, "the next session token passes the rolled-back row token")
}

// testSessionTryReserved: on a connection kept from a holding (Release
// keeps it, its session bounded), TryReserved takes the session lock
// without waiting and reads the reservation in the same statement: a
// reserved token above the last, the row unchanged; a row that is not the
// owner's or not armed reads as held but not reserved; a lock held by
// another connection is not taken; and neither a missing row nor a row
// locked by a transaction runs GET_LOCK (NOWAIT fails the latter at once).
func testSessionTryReserved(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("tryres")
	lockName := s.SessionNamespace() + name
	const reserve = 1000
	rowToken := func() int64 {
		t.Helper()
		row, _, err := s.LeaseGet(ctx, name, "")
		require.NoError(t, err)
		return row.Token
	}
	c, err := s.SessionConn(ctx)
	require.NoError(t, err)
	got, err := c.BoundGetLock(ctx, time.Minute, lockName, time.Second)
	require.NoError(t, err)
	require.True(t, got)
	t1, _, err := c.Token(ctx, name, "", "a", lockName, reserve)
	require.NoError(t, err)
	require.Positive(t, t1)
	released, err := c.Release(ctx, lockName)
	require.NoError(t, err)
	require.True(t, released)
	assert.Equal(t, driver.IdleBound(time.Minute), c.Bound(), "the kept connection's session stays bounded")
	assert.True(t, c.Keepable(0), "a pool without a limit spares a connection")

	// A missing row: no row, and the lock was not taken.
	missing := uniqueName("tryres-missing")
	r, err := c.TryReserved(ctx, missing, "", "a", s.SessionNamespace()+missing)
	require.NoError(t, err)
	assert.False(t, r.Found)
	used, err := s.SessionIsUsed(ctx, s.SessionNamespace()+missing)
	require.NoError(t, err)
	assert.False(t, used, "no row: GET_LOCK did not run")

	// The owner's first holding reserved nothing: held, not reserved; the
	// token statement then writes and arms.
	r, err = c.TryReserved(ctx, name, "", "a", lockName)
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Got)
	assert.True(t, r.Held && r.Found && r.Mine)
	assert.False(t, r.Reserved(), "not armed yet")
	t2, reserved, err := c.Token(ctx, name, "", "a", lockName, reserve)
	require.NoError(t, err)
	assert.False(t, reserved)
	assert.Greater(t, t2, t1)
	bound := rowToken()
	released, err = c.Release(ctx, lockName)
	require.NoError(t, err)
	require.True(t, released)

	// Reserved: one statement takes the lock and a token above the last,
	// and writes nothing (the statement is prepared on its second run).
	last := t2
	for range 3 {
		r, err := c.TryReserved(ctx, name, "", "a", lockName)
		require.NoError(t, err)
		assert.EqualValues(t, 1, r.Got)
		require.True(t, r.Reserved())
		assert.Greater(t, r.NextToken, last, "every reserved token is above the last")
		assert.LessOrEqual(t, r.NextToken, bound)
		assert.Equal(t, bound, rowToken(), "a reserved token writes nothing")
		last = r.NextToken
		released, err := c.Release(ctx, lockName)
		require.NoError(t, err)
		require.True(t, released)
	}
	r, err = c.TryReserved(ctx, name, "", "b", lockName)
	require.NoError(t, err)
	assert.True(t, r.Held)
	assert.False(t, r.Reserved(), "another owner's holding is not reserved")
	released, err = c.Release(ctx, lockName)
	require.NoError(t, err)
	require.True(t, released)

	// Held by another connection: not taken.
	d, err := s.SessionConn(ctx)
	require.NoError(t, err)
	got, err = d.BoundGetLock(ctx, time.Minute, lockName, time.Second)
	require.NoError(t, err)
	require.True(t, got)
	r, err = c.TryReserved(ctx, name, "", "a", lockName)
	require.NoError(t, err)
	assert.EqualValues(t, 0, r.Got)
	assert.False(t, r.Held)
	held, err := c.HoldsLock(ctx, lockName)
	require.NoError(t, err)
	assert.False(t, held)
	released, err = d.ReleaseClose(ctx, lockName)
	require.NoError(t, err)
	require.True(t, released)

	// A row locked by a transaction (as a Guard's): the statement fails
	// at once, and GET_LOCK did not run.
	tx, err := s.Server().DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	var tok int64
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT token FROM "+s.Server().LocksTable+" WHERE name = ? AND lock_key = '' LOCK IN SHARE MODE", name).Scan(&tok))
	_, err = c.TryReserved(ctx, name, "", "a", lockName)
	require.Error(t, err, "NOWAIT")
	used, err = s.SessionIsUsed(ctx, lockName)
	require.NoError(t, err)
	assert.False(t, used, "a locked row: GET_LOCK did not run")
	require.NoError(t, tx.Rollback())
	require.NoError(t, c.Discard())
}

// witnessOf reads the session witness the row (name, "") names.
func witnessOf(t *testing.T, s driver.Store, name string) string {
	t.Helper()
	var w string
	require.NoError(t, s.Server().DB.QueryRow("SELECT session_witness FROM "+s.Server().LocksTable+" WHERE name = ? AND lock_key = ''", name).Scan(&w))
	return w
}

// killWitness ends the connection that holds the witness GET_LOCK w (a
// connection of the pool: the application user may end its own, maybe
// from that very connection), and
// waits until the server has freed w.
func killWitness(t *testing.T, s driver.Store, w string) {
	t.Helper()
	db := s.Server().DB
	var id int64
	require.NoError(t, db.QueryRow("SELECT IS_USED_LOCK(?)", w).Scan(&id))
	// The pool may run KILL on the very connection it ends: then the
	// statement fails (1317, 1927) though it did its work.
	_, _ = db.Exec(fmt.Sprintf("KILL %d", id))
	require.Eventually(t, func() bool {
		var used sql.NullInt64
		return db.QueryRow("SELECT IS_USED_LOCK(?)", w).Scan(&used) == nil && !used.Valid
	}, 5*time.Second, 20*time.Millisecond, "the server frees the killed connection's witness")
}

func testRow(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("row")
	tx1, err := s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	require.NoError(t, tx1.LockWait(ctx, name, ""))
	tok, err := tx1.Take(ctx, name, "", "a")
	require.NoError(t, err)
	require.Positive(t, tok)
	id := driver.LeaseID{Name: name, Owner: "a", Token: tok}
	holds, err := tx1.Holds(ctx, id)
	require.NoError(t, err)
	assert.True(t, holds)
	require.NoError(t, tx1.RestoreLockWait(ctx))

	row, found, err := s.RowPeek(ctx, name, "")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "a", row.Owner, "a reader sees the uncommitted holding")
	assert.Equal(t, tok, row.Token)

	tx2, err := s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	_, err = tx2.LockNowait(ctx, name, "")
	assert.Error(t, err, "a held row lock is refused at once")
	require.NoError(t, tx2.Rollback())

	ok, err := tx1.Free(ctx, driver.LeaseID{Name: name, Owner: "b", Token: tok})
	require.NoError(t, err)
	assert.False(t, ok, "another owner frees nothing")
	ok, err = tx1.Free(ctx, id)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, tx1.Commit())

	tx3, err := s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	found, err = tx3.LockNowait(ctx, name, "")
	require.NoError(t, err)
	assert.True(t, found, "a freed row is locked at once")
	tok2, err := tx3.Take(ctx, name, "", "b")
	require.NoError(t, err)
	assert.Greater(t, tok2, tok)
	require.NoError(t, tx3.RestoreLockWait(ctx))
	require.NoError(t, tx3.Rollback())

	tx4, err := s.RowBegin(ctx, time.Second, 0)
	require.NoError(t, err)
	found, err = tx4.LockNowait(ctx, uniqueName("missing"), "")
	require.NoError(t, err)
	assert.False(t, found, "LockNowait on a missing row finds nothing")
	require.NoError(t, tx4.RestoreLockWait(ctx))
	require.NoError(t, tx4.Rollback())
}
