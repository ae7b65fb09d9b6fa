package runtime_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// storedRow is a lock row's owner and token.
type storedRow struct {
	owner string
	token int64
}

// storedKeys reads the lock rows of name, uncommitted ones included, by
// the hex form of their keys.
func storedKeys(t *testing.T, db *sql.DB, name string) map[string]storedRow {
	t.Helper()
	// READ UNCOMMITTED: a row-strategy holding's row is written in its
	// open transaction.
	tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.Query("SELECT HEX(lock_key), owner, token FROM lockgen_locks WHERE name = ?", name)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]storedRow{}
	for rows.Next() {
		var k string
		var r storedRow
		require.NoError(t, rows.Scan(&k, &r.owner, &r.token))
		out[strings.ToLower(k)] = r
	}
	require.NoError(t, rows.Err())
	return out
}

// TestHostileOwners: every hostile owner is refused by WithOwner with
// ErrInvalid, or recorded as itself in the lock rows of every strategy
// (Holder and the row show its bytes). The jobs package's
// TestHostileWorkerOwners checks the runs such an owner claims.
func TestHostileOwners(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	name := uniqueName(t, tdb)
	for _, tc := range testkit.Hostile {
		c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner(tc.V))
		if why := testkit.LimitedRefusal(tc.V); why != "" {
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.Label)
			assert.Contains(t, err.Error(), why, tc.Label)
			continue
		}
		require.NoError(t, err, tc.Label)
		require.Equal(t, tc.V, c.Owner())
		for _, strategy := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategySession, runtime.StrategyRow} {
			cfg := runtime.LockConfig{Name: name + "-" + string(strategy), Keyed: true, Strategy: strategy}
			if strategy != runtime.StrategyRow {
				cfg.TTL = time.Second
			}
			l, err := c.Lock(cfg)
			require.NoError(t, err)
			lease, err := l.Try(ctx, tc.Label)
			require.NoError(t, err, "%s %s", strategy, tc.Label)
			h, err := l.Holder(ctx, tc.Label)
			require.NoError(t, err)
			assert.True(t, h.Held, "%s %s", strategy, tc.Label)
			assert.Equal(t, tc.V, h.Owner, "%s %s: Holder shows the owner as itself", strategy, tc.Label)
			row := storedKeys(t, db, cfg.Name)[hex.EncodeToString([]byte(tc.Label))]
			require.NoError(t, lease.Release(ctx), "%s %s: released by owner and token", strategy, tc.Label)
			assert.Equal(t, storedRow{owner: tc.V, token: lease.Token()}, row, "%s %s: the row holds the owner's bytes", strategy, tc.Label)
		}

	}
}
