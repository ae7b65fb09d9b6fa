package drivertest

import (
	"context"
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
	tok, err := c2.Token(ctx, name, "", "b", lockName)
	require.NoError(t, err)
	assert.Zero(t, tok, "a connection without the session lock gets no token")
	bound, err := c2.BoundGetLock(ctx, time.Minute, lockName, 100*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, bound, "the one-statement acquire times out on a held lock too")

	t1, err := c1.Token(ctx, name, "", "a", lockName)
	require.NoError(t, err)
	require.Positive(t, t1)
	id := driver.LeaseID{Name: name, Owner: "a", Token: t1}
	ok, err := c1.Renew(ctx, id, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "the holding renews its row on its connection")
	ok, err = c1.Free(ctx, driver.LeaseID{Name: name, Owner: "a", Token: t1 + 1})
	require.NoError(t, err)
	assert.False(t, ok, "a wrong token frees nothing")
	ok, err = c1.Free(ctx, id)
	require.NoError(t, err)
	assert.True(t, ok)
	t2, err := c1.Token(ctx, name, "", "a", lockName)
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
	t3, err := c3.Token(ctx, name, "", "c", lockName)
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
	held, err := conn.Token(ctx, name, "", "a", s.SessionNamespace()+name)
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
