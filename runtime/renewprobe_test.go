package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestRenewalAfterABlackholeDropsTheDeadIdleConnections: after a blackhole
// heals, every connection that was idle in the pool is dead, and the pool
// hands idle connections out first. A renewal bounded by all the time left
// of the lease spent it on the first dead connection and lost a lease a
// retry on a live connection would have kept. Each renewal attempt is now
// bounded by a third of what is left, and one that times out drops the
// dead idle connections (driver.ProbeIdle) before the retry: a healthy
// holder keeps its lease across the blackhole, with a plain lease, a keyed
// one (renewed in batches) and one that waits on the server (renewed on
// its wake lock's pinned connection, which dies in the blackhole too).
func TestRenewalAfterABlackholeDropsTheDeadIdleConnections(t *testing.T) {
	for name, cfg := range map[string]runtime.LockConfig{
		"lease":  {Name: "probe-lease", TTL: 4 * time.Second, RenewEvery: time.Second},
		"keyed":  {Name: "probe-keyed", Keyed: true, TTL: 4 * time.Second, RenewEvery: time.Second},
		"server": {Name: "probe-server", TTL: 4 * time.Second, RenewEvery: time.Second, WaitOnServer: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tdb := testdb.New(t)
			proxy, pdb := testkit.OpenViaProxy(t, tdb)
			const idle = 30
			pdb.SetMaxOpenConns(idle + 10)
			pdb.SetMaxIdleConns(idle + 10)
			l := newNode(t, pdb).lock(t, cfg)
			ctx := context.Background()
			key := ""
			if cfg.Keyed {
				key = "k"
			}
			lease, err := l.Try(ctx, key)
			require.NoError(t, err)

			testkit.FillIdle(t, pdb, idle)

			proxy.Blackhole()
			time.Sleep(600 * time.Millisecond)
			proxy.Restore()

			// Two TTLs: every renewal after the blackhole has to land.
			select {
			case <-lease.Done():
				t.Fatalf("the healthy holder lost its lease: %v", lease.Err())
			case <-time.After(2 * cfg.TTL):
			}
			require.NoError(t, lease.Err())
			require.NoError(t, lease.Release(ctx))
		})
	}
}
