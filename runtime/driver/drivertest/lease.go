package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

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
	// A renewal never moves the expiry back: one that asks for less (as a
	// renewal that started earlier and stalled on the server does) leaves
	// it as it is, and may report that it renewed nothing.
	_, err = s.LeaseRenew(ctx, a, time.Second)
	require.NoError(t, err)
	row, _, err = s.LeaseGet(ctx, name, "")
	require.NoError(t, err)
	assert.Greater(t, row.Remaining, 50*time.Second, "a renewal for less than the time left keeps the expiry")

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
	_, err = s.LeaseRenewMany(ctx, name, "a", keys, tokens, time.Second)
	require.NoError(t, err)
	rows, err = s.LeaseGetMany(ctx, name, keys)
	require.NoError(t, err)
	for _, k := range keys {
		assert.Greater(t, rows[k].Remaining, 50*time.Second, "a batched renewal for less than the time left keeps the expiry")
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
