package runtime_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestHostileKeysAreHeldAsThemselves: every hostile key, on every strategy
// and connection setting, is either held as itself (the row's key is its
// bytes, Holder sees it, another node cannot take it, renewals find it and
// the release frees it) or refused with ErrInvalid before any statement;
// and keys that differ only in case, a NUL byte, accents or escaping are
// separate holdings.
func TestHostileKeysAreHeldAsThemselves(t *testing.T) {
	for _, conf := range testkit.InjectionConfigs {
		for _, strategy := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategySession, runtime.StrategyRow} {
			t.Run(conf.Label+"/"+string(strategy), func(t *testing.T) {
				testHostileKeys(t, strategy, conf.Apply)
			})
		}
	}
}

func testHostileKeys(t *testing.T, strategy runtime.Strategy, apply func(*mysql.Config)) {
	tdb := testdb.New(t)
	ctx := context.Background()
	dbA, counter := testkit.OpenInjection(t, tdb, apply)
	dbB, _ := testkit.OpenInjection(t, tdb, apply)
	// A short name, so that short keys make plain (unhashed) GET_LOCK
	// names; the database's random suffix keeps it apart from other
	// tests' (GET_LOCK names are server-wide).
	name := "inj-" + tdb.Name[len(tdb.Name)-6:]
	cfg := runtime.LockConfig{Name: name, Keyed: true, Strategy: strategy}
	if strategy != runtime.StrategyRow {
		cfg.TTL = time.Second
	}
	a := sessionNode(t, dbA, runtime.WithOwner("holder-a")).lock(t, cfg)
	b := sessionNode(t, dbB, runtime.WithOwner("holder-b")).lock(t, cfg)
	// The first call checks the server; keys are checked before anything.
	_, err := a.Holder(ctx, "warm-up")
	require.NoError(t, err)

	// Refusals first, while no holding renews on a's pool.
	for _, tc := range testkit.Hostile {
		if why := testkit.LimitedRefusal(tc.V); why != "" {
			before := counter.Count()
			_, err := a.Try(ctx, tc.V)
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			assert.Contains(t, err.Error(), why, tc.Label)
			_, err = a.Acquire(ctx, tc.V)
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			_, err = a.Holder(ctx, tc.V)
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			err = a.With(ctx, tc.V, func(context.Context, *runtime.Lease) error {
				t.Errorf("%s: fn ran for a refused key", tc.Label)
				return nil
			})
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			assert.Equal(t, before, counter.Count(), "%s: refused before any statement", tc.Label)
		}
	}
	held := map[string]*runtime.Lease{}
	var all []*runtime.Lease
	t.Cleanup(func() { // before the database is dropped, also on failure
		for _, l := range all {
			_ = l.Release(context.Background())
		}
	})
	for _, tc := range testkit.Hostile {
		if testkit.LimitedRefusal(tc.V) != "" {
			continue
		}
		lease, err := a.Try(ctx, tc.V)
		require.NoError(t, err, tc.Label)
		held[tc.V] = lease
		all = append(all, lease)
		h, err := b.Holder(ctx, tc.V)
		require.NoError(t, err, tc.Label)
		assert.Equal(t, runtime.Holder{Held: true, Owner: "holder-a", Token: lease.Token()}, runtime.Holder{Held: h.Held, Owner: h.Owner, Token: h.Token}, tc.Label)
		_, err = b.Try(ctx, tc.V)
		require.ErrorIs(t, err, runtime.ErrNotAcquired, "%s: another node cannot take a held key", tc.Label)
	}

	// Each held key is one row whose key is exactly its bytes, and no
	// other row exists (nothing truncated, nothing merged).
	rows := storedKeys(t, dbB, name)
	for k, lease := range held {
		r, ok := rows[hex.EncodeToString([]byte(k))]
		if assert.True(t, ok, "row of key %q", k) {
			assert.Equal(t, storedRow{owner: "holder-a", token: lease.Token()}, r, "row of key %q", k)
		}
	}
	assert.Len(t, rows, len(held), "one row per held key")
	if strategy != runtime.StrategyRow {
		// Renewals (batched for lease) and connection checks (session)
		// find every holding by its key.
		time.Sleep(2 * time.Second)
	}
	for k, lease := range held {
		require.NoError(t, lease.Err(), "holding of %q after renewals", k)
		require.NoError(t, lease.Release(ctx), "release of %q", k)
		h, err := b.Holder(ctx, k)
		require.NoError(t, err)
		assert.False(t, h.Held, "%q is free after its release", k)
	}

	// Keys that differ only in a way a server could fold are two holdings.
	for _, p := range testkit.Distinct {
		la, err := a.Try(ctx, p[0])
		require.NoError(t, err, "%q", p[0])
		all = append(all, la)
		lb, err := b.Try(ctx, p[1])
		require.NoError(t, err, "%q is not %q: it must be a holding of its own", p[1], p[0])
		all = append(all, lb)
		ha, err := b.Holder(ctx, p[0])
		require.NoError(t, err)
		hb, err := a.Holder(ctx, p[1])
		require.NoError(t, err)
		assert.Equal(t, [2]string{"holder-a", "holder-b"}, [2]string{ha.Owner, hb.Owner}, "%q / %q", p[0], p[1])
		assert.True(t, ha.Held && hb.Held, "%q / %q both held", p[0], p[1])
		require.NoError(t, la.Release(ctx))
		require.NoError(t, lb.Release(ctx))
	}
}
