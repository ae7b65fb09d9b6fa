package driver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestProbeIdleDropsTheDeadIdleConnectionsAtOnce: eight idle connections
// blackholed, then the network restored: ProbeIdle finds the eight dead
// within one bound and the pool lets them go, so the next statement runs
// at once on a new connection instead of timing out on each dead one in
// turn. On a healthy pool it finds none dead and keeps them.
func TestProbeIdleDropsTheDeadIdleConnectionsAtOnce(t *testing.T) {
	tdb := testdb.New(t)
	proxy, db := testkit.OpenViaProxy(t, tdb)
	const idle = 8
	db.SetMaxOpenConns(idle)
	db.SetMaxIdleConns(idle)
	fill := func() {
		var wg sync.WaitGroup
		for range idle {
			wg.Add(1)
			go func() { defer wg.Done(); _, err := db.Exec("SELECT SLEEP(0.1)"); assert.NoError(t, err) }()
		}
		wg.Wait()
		require.Equal(t, idle, db.Stats().Idle)
	}
	fill()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	assert.Zero(t, driver.ProbeIdle(ctx, db), "a healthy pool")
	cancel()
	assert.Equal(t, idle, db.Stats().Idle, "the live connections stay")

	proxy.Blackhole()
	proxy.Restore() // the connections open during the blackhole stay dead
	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	assert.Equal(t, idle, driver.ProbeIdle(ctx, db))
	cancel()
	// One at a time, eight bounds of 300 ms would have passed.
	assert.Less(t, time.Since(start), idle*300*time.Millisecond, "the dead connections were probed together")
	assert.Zero(t, db.Stats().Idle, "the dead connections are gone")
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var one int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT 1").Scan(&one), "the next statement runs on a new connection")
}
