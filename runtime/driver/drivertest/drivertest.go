// Package drivertest checks a driver.Store (and driver.JobStore) against
// the contract the runtime relies on, statement by statement, on a real
// server: fencing tokens that only rise, renew and release only by the
// holder, expiry by the database clock, the session and row strategies'
// connections, and the runs table's claims. Run checks the lock
// statements and RunJobs the job statements, so a store generated without
// jobs runs Run alone. The runtime's tests run both against the store
// lockgen generates for them (runtime/internal/testgen), and the jobs
// example against its own (table prefix jobsdemo_).
//
// It is for lockgen's own tests; it is not a stable API.
package drivertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

// Open returns a store of a database whose tables exist. It is called once
// per subtest, and subtests run in parallel; the names the suite uses are
// unique, so the stores may share a database.
type Open func(t *testing.T) driver.Store

// OpenJobs is Open for the job statements.
type OpenJobs func(t *testing.T) driver.JobStore

// Run runs every check of the lock statements as a subtest of t.
func Run(t *testing.T, open Open) {
	for name, test := range map[string]func(*testing.T, driver.Store){
		"Lease":         testLease,
		"LeaseExpiry":   testLeaseExpiry,
		"LeaseGuard":    testLeaseGuard,
		"LeaseBatch":    testLeaseBatch,
		"LeasePrune":    testLeasePrune,
		"Session":       testSession,
		"LeaseTakeover": testLeaseTakeover,
		"Row":           testRow,
		"Server":        testServer,
	} {
		t.Run(name, func(t *testing.T) { t.Parallel(); test(t, open(t)) })
	}
}

// RunJobs runs every check of the job statements as a subtest of t.
func RunJobs(t *testing.T, open OpenJobs) {
	for name, test := range map[string]func(*testing.T, driver.JobStore){"Jobs": testJobs, "JobsRescue": testJobsRescue} {
		t.Run(name, func(t *testing.T) { t.Parallel(); test(t, open(t)) })
	}
}

// seq makes lock names unique across the subtests of one process.
var seq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
}

func testLease(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("lease")
	t1, err := s.LeaseAcquire(ctx, name, "", "a", time.Minute)
	require.NoError(t, err)
	require.Positive(t, t1, "a free row is taken with a token")
	a := driver.LeaseID{Name: name, Owner: "a", Token: t1}

	busy, err := s.LeaseAcquire(ctx, name, "", "b", time.Minute)
	require.NoError(t, err)
	assert.Zero(t, busy, "a held row is not taken")

	row, found, err := s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "a", row.Owner)
	assert.Equal(t, t1, row.Token)
	assert.Greater(t, row.Remaining, 50*time.Second, "the lease runs a minute by the database clock")

	ok, err := s.LeaseRenew(ctx, a, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "the holder renews")
	row, _, err = s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	assert.Equal(t, t1, row.Token, "a renewal keeps the token")

	for _, wrong := range []driver.LeaseID{
		{Name: name, Owner: "b", Token: t1},
		{Name: name, Owner: "a", Token: t1 + 1},
		{Name: name, Key: "other", Owner: "a", Token: t1},
	} {
		ok, err := s.LeaseRenew(ctx, wrong, time.Minute)
		require.NoError(t, err)
		assert.False(t, ok, "renew by %+v, who does not hold it", wrong)
		ok, err = s.LeaseRelease(ctx, wrong)
		require.NoError(t, err)
		assert.False(t, ok, "release by %+v, who does not hold it", wrong)
	}
	row, _, err = s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	assert.Equal(t, "a", row.Owner, "nobody else freed the row")

	ok, err = s.LeaseRelease(ctx, a)
	require.NoError(t, err)
	assert.True(t, ok, "the holder releases")
	ok, err = s.LeaseRelease(ctx, a)
	require.NoError(t, err)
	assert.False(t, ok, "a second release changes nothing")
	ok, err = s.LeaseRenew(ctx, a, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "a released holding is not renewed")
	row, _, err = s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	assert.LessOrEqual(t, row.Remaining, time.Duration(0), "a released row is free")

	prev := t1
	for i := 0; i < 3; i++ {
		tok, err := s.LeaseAcquire(ctx, name, "", "b", time.Minute)
		require.NoError(t, err)
		require.Greater(t, tok, prev, "every acquisition's token is above the last")
		ok, err := s.LeaseRelease(ctx, driver.LeaseID{Name: name, Owner: "b", Token: tok})
		require.NoError(t, err)
		require.True(t, ok)
		prev = tok
	}

	_, found, err = s.LeaseGet(ctx, uniqueName("missing"), "")
	require.NoError(t, err)
	assert.False(t, found)
}

func testLeaseExpiry(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("expiry")
	t1, err := s.LeaseAcquire(ctx, name, "k", "a", 200*time.Millisecond)
	require.NoError(t, err)
	require.Positive(t, t1)
	time.Sleep(400 * time.Millisecond)
	a := driver.LeaseID{Name: name, Key: "k", Owner: "a", Token: t1}
	ok, err := s.LeaseRenew(ctx, a, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "an expired lease is not renewed")
	t2, err := s.LeaseAcquire(ctx, name, "k", "b", time.Minute)
	require.NoError(t, err)
	assert.Greater(t, t2, t1, "an expired row is taken, with a higher token")
	ok, err = s.LeaseRelease(ctx, a)
	require.NoError(t, err)
	assert.False(t, ok, "the old holder cannot free the new holding")
}

func testLeaseGuard(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("guard")
	tok, err := s.LeaseAcquire(ctx, name, "", "a", time.Minute)
	require.NoError(t, err)
	db := s.Server().DB
	require.NotNil(t, db)
	for _, tc := range []struct {
		id   driver.LeaseID
		want bool
	}{
		{driver.LeaseID{Name: name, Owner: "a", Token: tok}, true},
		{driver.LeaseID{Name: name, Owner: "a", Token: tok - 1}, false},
		{driver.LeaseID{Name: name, Owner: "b", Token: tok}, false},
		{driver.LeaseID{Name: uniqueName("none"), Owner: "a", Token: tok}, false},
	} {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		ok, err := s.LeaseGuard(ctx, tx, tc.id)
		require.NoError(t, err)
		assert.Equal(t, tc.want, ok, "guard of %+v", tc.id)
		require.NoError(t, tx.Rollback())
	}
}

func testLeaseBatch(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("batch")
	keys := []string{"k1", "k2", "k3"}
	tokens := make([]int64, len(keys))
	for i, k := range keys {
		var err error
		tokens[i], err = s.LeaseAcquire(ctx, name, k, "a", time.Minute)
		require.NoError(t, err)
		require.Positive(t, tokens[i])
	}
	n, err := s.LeaseRenewMany(ctx, name, "a", keys, tokens, time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 3, n, "every holding is renewed")
	wrong := []int64{tokens[0], tokens[0], tokens[2]} // k2 with k1's token
	n, err = s.LeaseRenewMany(ctx, name, "a", keys, wrong, time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "a key is renewed only with its own token")
	n, err = s.LeaseRenewMany(ctx, name, "b", keys, tokens, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, n, "another owner renews nothing")

	rows, err := s.LeaseGetMany(ctx, name, append(keys, "missing"))
	require.NoError(t, err)
	require.Len(t, rows, 3, "missing rows are absent")
	for i, k := range keys {
		assert.Equal(t, tokens[i], rows[k].Token)
		assert.Equal(t, "a", rows[k].Owner)
		assert.Positive(t, rows[k].Remaining)
	}
}

func testLeasePrune(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("prune")
	for _, k := range []string{"free", "held"} {
		tok, err := s.LeaseAcquire(ctx, name, k, "a", time.Minute)
		require.NoError(t, err)
		if k == "free" {
			ok, err := s.LeaseRelease(ctx, driver.LeaseID{Name: name, Key: k, Owner: "a", Token: tok})
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	n, err := s.LeasePrune(ctx, name, time.Hour, 100)
	require.NoError(t, err)
	assert.Zero(t, n, "rows free for less than the age stay")
	time.Sleep(300 * time.Millisecond)
	n, err = s.LeasePrune(ctx, name, 200*time.Millisecond, 100)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the long-free row goes, the held one stays")
	_, found, err := s.LeaseGet(ctx, name, "held")
	require.NoError(t, err)
	assert.True(t, found)
	_, found, err = s.LeaseGet(ctx, name, "free")
	require.NoError(t, err)
	assert.False(t, found)
}

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

	t1, err := c1.Token(ctx, name, "", "a")
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
	t2, err := c1.Token(ctx, name, "", "a")
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
	held, err := conn.Token(ctx, name, "", "a")
	require.NoError(t, err)

	tok, err := s.LeaseAcquire(ctx, name, "", "b", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, driver.SessionHeld, tok, "a session holding is reported, not taken")
	tok, err = s.LeaseTakeover(ctx, name, "", "b", time.Minute)
	require.NoError(t, err)
	assert.Zero(t, tok, "a live session holding is not taken")
	row, _, err := s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	assert.Equal(t, "a", row.Owner)
	assert.Equal(t, held, row.Token)

	rtx, err := s.RowBegin(ctx, time.Second)
	require.NoError(t, err)
	require.NoError(t, rtx.LockWait(ctx, name, ""))
	tok, err = rtx.Take(ctx, name, "", "c")
	require.NoError(t, err)
	assert.EqualValues(t, driver.SessionHeld, tok, "a row holding reports the session holding, too")
	tok, err = rtx.Takeover(ctx, name, "", "c")
	require.NoError(t, err)
	assert.Zero(t, tok, "and does not take it while it lives")
	require.NoError(t, rtx.RestoreLockWait(ctx))
	require.NoError(t, rtx.Rollback())

	require.NoError(t, conn.Discard(), "the session holder dies")
	require.Eventually(t, func() bool {
		used, err := s.SessionIsUsed(ctx, s.SessionNamespace()+name)
		return err == nil && !used
	}, 5*time.Second, 20*time.Millisecond)
	rtx, err = s.RowBegin(ctx, time.Second)
	require.NoError(t, err)
	require.NoError(t, rtx.LockWait(ctx, name, ""))
	tok, err = rtx.Takeover(ctx, name, "", "c")
	require.NoError(t, err)
	assert.Greater(t, tok, held, "a row holding takes a dead session holding")
	require.NoError(t, rtx.RestoreLockWait(ctx))
	require.NoError(t, rtx.Rollback(), "rolled back: the session mark is back")
	tok, err = s.LeaseTakeover(ctx, name, "", "b", time.Minute)
	require.NoError(t, err)
	assert.Greater(t, tok, held, "a dead session holding is taken, with a higher token")
}

func testRow(t *testing.T, s driver.Store) {
	ctx := context.Background()
	name := uniqueName("row")
	tx1, err := s.RowBegin(ctx, time.Second)
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

	tx2, err := s.RowBegin(ctx, time.Second)
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

	tx3, err := s.RowBegin(ctx, time.Second)
	require.NoError(t, err)
	found, err = tx3.LockNowait(ctx, name, "")
	require.NoError(t, err)
	assert.True(t, found, "a freed row is locked at once")
	tok2, err := tx3.Take(ctx, name, "", "b")
	require.NoError(t, err)
	assert.Greater(t, tok2, tok)
	require.NoError(t, tx3.RestoreLockWait(ctx))
	require.NoError(t, tx3.Rollback())

	tx4, err := s.RowBegin(ctx, time.Second)
	require.NoError(t, err)
	found, err = tx4.LockNowait(ctx, uniqueName("missing"), "")
	require.NoError(t, err)
	assert.False(t, found, "LockNowait on a missing row finds nothing")
	require.NoError(t, tx4.RestoreLockWait(ctx))
	require.NoError(t, tx4.Rollback())
}

func testServer(t *testing.T, s driver.Store) {
	target := s.Server()
	require.NotNil(t, target.DB)
	assert.NotEmpty(t, target.LocksTable)
	assert.NotEmpty(t, target.Migrations)
	assert.NotEmpty(t, s.SessionNamespace())
	galera, err := s.ServerGalera(context.Background())
	if err == nil { // MySQL has no wsrep_on: the runtime reads the error as "not Galera"
		assert.False(t, galera, "the test server is no Galera node")
	}
}

func newRun(job string) driver.NewRun {
	return driver.NewRun{Job: job, Queue: job, Args: []byte(`{}`), MaxAttempts: 2, Timeout: time.Minute}
}

func testJobs(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("job")
	id, err := js.RunInsert(ctx, nil, newRun(job))
	require.NoError(t, err)
	require.Positive(t, id)
	info, found, err := js.RunGet(ctx, id)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, driver.RunAvailable, info.State)
	assert.Equal(t, job, info.Job)

	unique := newRun(job)
	unique.UniqueKey = "u"
	u1, err := js.RunInsert(ctx, nil, unique)
	require.NoError(t, err)
	u2, err := js.RunInsert(ctx, nil, unique)
	require.NoError(t, err)
	assert.Equal(t, u1, u2, "an active unique key returns the existing run")

	runs, err := js.RunsClaim(ctx, job, "w", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	for _, r := range runs {
		assert.Equal(t, 1, r.Attempt)
		assert.EqualValues(t, 1, r.Claim)
	}
	again, err := js.RunsClaim(ctx, job, "w2", 10, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, again, "claimed runs are not claimed twice")

	claims := []driver.Claim{{ID: runs[0].ID, Claim: runs[0].Claim}, {ID: runs[1].ID, Claim: runs[1].Claim}}
	n, err := js.RunsHeartbeat(ctx, claims, time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	stale := driver.Claim{ID: runs[0].ID, Claim: runs[0].Claim + 1}
	n, err = js.RunsComplete(ctx, []driver.Claim{stale})
	require.NoError(t, err)
	assert.Zero(t, n, "a claim the run no longer holds completes nothing")
	n, err = js.RunsComplete(ctx, claims[:1])
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	info, _, err = js.RunGet(ctx, runs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunCompleted, info.State)

	ok, err := js.RunFail(ctx, claims[1], "boom", 0)
	require.NoError(t, err)
	assert.True(t, ok)
	info, _, err = js.RunGet(ctx, runs[1].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunAvailable, info.State, "a failed attempt with attempts left is due again")
	assert.Equal(t, "boom", info.LastError)
	second, err := js.RunsClaim(ctx, job, "w", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, second, 1)
	assert.Equal(t, 2, second[0].Attempt)
	ok, err = js.RunFail(ctx, driver.Claim{ID: second[0].ID, Claim: second[0].Claim}, "boom again", 0)
	require.NoError(t, err)
	assert.True(t, ok)
	info, _, err = js.RunGet(ctx, second[0].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunDiscarded, info.State, "the last attempt's failure discards the run")

	ok, err = js.RunRetry(ctx, second[0].ID)
	require.NoError(t, err)
	assert.True(t, ok, "a discarded run is restored")
	ok, err = js.RunCancel(ctx, second[0].ID)
	require.NoError(t, err)
	assert.True(t, ok, "a run that has not started is cancelled")
	info, _, err = js.RunGet(ctx, second[0].ID)
	require.NoError(t, err)
	assert.Equal(t, driver.RunCancelled, info.State)

	tick := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	_, found, err = js.RunLastTick(ctx, job)
	require.NoError(t, err)
	assert.False(t, found)
	ticked := newRun(job)
	ticked.ScheduledAt = tick
	t1, err := js.RunInsert(ctx, nil, ticked)
	require.NoError(t, err)
	t2, err := js.RunInsert(ctx, nil, ticked)
	require.NoError(t, err)
	assert.Equal(t, t1, t2, "one run per tick")
	require.NoError(t, js.RunInsertSkipped(ctx, job, job, tick.Add(time.Hour), "test"))
	last, found, err := js.RunLastTick(ctx, job)
	require.NoError(t, err)
	require.True(t, found)
	assert.True(t, last.Equal(tick.Add(time.Hour)), "the newest tick, skipped or not: %v", last)

	// A job store runs on the pool of the lock store it comes with (the
	// generated Store is both), and the caller's transaction is on it too.
	s, ok := js.(driver.Store)
	require.True(t, ok, "the job store is also a driver.Store, whose pool the caller's transaction is on")
	tx, err := s.Server().DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, js.RunInsertMany(ctx, tx, []driver.NewRun{newRun(job + "-many"), newRun(job + "-many")}))
	require.NoError(t, tx.Rollback())
	none, err := js.RunsClaim(ctx, job+"-many", "w", 10, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, none, "runs inserted in a rolled back transaction do not exist")
	require.NoError(t, js.RunInsertMany(ctx, nil, []driver.NewRun{newRun(job + "-many"), newRun(job + "-many")}))
	many, err := js.RunsClaim(ctx, job+"-many", "w", 10, time.Minute)
	require.NoError(t, err)
	assert.Len(t, many, 2)
}

func testJobsRescue(t *testing.T, js driver.JobStore) {
	ctx := context.Background()
	job := uniqueName("rescue")
	id, err := js.RunInsert(ctx, nil, newRun(job))
	require.NoError(t, err)
	runs, err := js.RunsClaim(ctx, job, "w", 1, 100*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	time.Sleep(300 * time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := js.RunsRescue(ctx, 100)
		require.NoError(t, err)
		info, _, err := js.RunGet(ctx, id)
		require.NoError(t, err)
		return info.State == driver.RunAvailable
	}, 5*time.Second, 50*time.Millisecond, "a run past its deadline is due again")
	n, err := js.RunsComplete(ctx, []driver.Claim{{ID: id, Claim: runs[0].Claim}})
	require.NoError(t, err)
	assert.Zero(t, n, "the rescued attempt's late completion is refused")
	next, err := js.RunsClaim(ctx, job, "w", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, next, 1)
	assert.Equal(t, runs[0].Claim+1, next[0].Claim, "the next claim is a new claim")

	pruneJob := uniqueName("prune")
	pid, err := js.RunInsert(ctx, nil, newRun(pruneJob))
	require.NoError(t, err)
	ok, err := js.RunCancel(ctx, pid)
	require.NoError(t, err)
	require.True(t, ok)
	time.Sleep(200 * time.Millisecond)
	n, err = js.RunsPrune(ctx, pruneJob, time.Time{}, 100*time.Millisecond, 10)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "a finished run older than the age is pruned")
	_, found, err := js.RunGet(ctx, pid)
	require.NoError(t, err)
	assert.False(t, found)
}
