package runtime_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestDeadSessionHoldingDoesNotWedgeTheLock: during a rolling change of
// strategy, a session holding's row shows the far-future expiry. While its
// holder's connection lives, lease and row nodes must not take the row and
// Holder reports it held; once the connection dies (killed on the server:
// the holder crashed, or its release failed half-way) they take it at
// once, with a greater token, instead of never. The acquire statements
// compute the GET_LOCK name themselves: keys on both sides of the 64-byte
// boundary between a plain and a hashed name, and keys hashed for a byte
// the servers would not keep (NUL, capitals, anything not ASCII), check
// that they compute the runtime's name (a wrong one would let a live
// session holding be taken).
func TestDeadSessionHoldingDoesNotWedgeTheLock(t *testing.T) {
	for _, taker := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategyRow} {
		// "lockgen_dead-xxxxxx/" is 20 bytes: a key of 44 bytes makes the
		// longest plain GET_LOCK name (64 bytes), 45 the shortest hashed
		// one. A NUL byte, a capital letter or a character that is not
		// ASCII is hashed at any length: both servers cut lock names at a
		// NUL, MySQL lower-cases them and refuses characters outside the
		// BMP (🔒, 4 bytes).
		for _, tc := range []struct {
			label, key string
			plain      bool
		}{
			{"short", "k", true},
			{"64-bytes", strings.Repeat("k", 44), true},
			{"65-bytes", strings.Repeat("k", 45), false},
			{"64-bytes-2-byte-utf8", strings.Repeat("é", 22), false},
			{"64-bytes-utf8", strings.Repeat("🔒", 11), false},
			{"short-utf8", "🔒", false},
			{"capital", "A", false},
			{"63-bytes-capital", strings.Repeat("k", 42) + "Z", false},
			{"at-and-brackets", "@[`{~\x7f", true},
			{"nul", "k\x00k", false},
			{"control", "\x01\x1f", true},
			{"hashed", strings.Repeat("long-key-", 8), false},
		} {
			key := tc.key
			t.Run(string(taker)+"/"+tc.label, func(t *testing.T) {
				tdb := testdb.New(t)
				ctx := context.Background()
				name := "dead-" + tdb.Name[len(tdb.Name)-6:]
				scfg := runtime.LockConfig{Name: name, Keyed: true, Strategy: runtime.StrategySession, TTL: 2 * time.Second}
				tcfg := runtime.LockConfig{Name: name, Keyed: true, Strategy: taker}
				if taker == runtime.StrategyLease {
					tcfg.TTL = 2 * time.Second
				}
				held, err := sessionNode(t, tdb.Open(t), runtime.WithOwner("session-node")).lock(t, scfg).Try(ctx, key)
				require.NoError(t, err)
				t.Cleanup(func() { _ = held.Release(context.Background()) })
				other := sessionNode(t, tdb.Open(t), runtime.WithOwner("taker")).lock(t, tcfg)

				_, err = other.Try(ctx, key)
				require.ErrorIs(t, err, runtime.ErrNotAcquired, "a live session holding is never taken")
				if taker == runtime.StrategyLease {
					h, err := other.Holder(ctx, key)
					require.NoError(t, err)
					assert.Equal(t, runtime.Holder{Held: true, Owner: "session-node", Token: held.Token()}, h)
				}

				admin := tdb.Admin(t)
				lockName := runtime.SessionLockNameForTest(lockgendb.Store{}.SessionNamespace(), name, key)
				require.Equal(t, tc.plain, strings.HasPrefix(lockName, lockgendb.Store{}.SessionNamespace()), "the key picks the name's form")
				var conn sql.NullInt64
				require.NoError(t, admin.QueryRow("SELECT IS_USED_LOCK(?)", lockName).Scan(&conn))
				require.True(t, conn.Valid, "the session lock is held on the server")
				_, err = admin.Exec("KILL CONNECTION ?", conn.Int64)
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					var free int
					return admin.QueryRow("SELECT IS_FREE_LOCK(?)", lockName).Scan(&free) == nil && free == 1
				}, 10*time.Second, 10*time.Millisecond)

				if taker == runtime.StrategyLease {
					h, err := other.Holder(ctx, key)
					require.NoError(t, err)
					assert.False(t, h.Held, "a session holding whose connection died is not held")
				}
				lease, err := other.Try(ctx, key)
				require.NoError(t, err, "the dead session holding's row must be takeable")
				assert.Greater(t, lease.Token(), held.Token())
				if taker == runtime.StrategyLease {
					h, err := other.Holder(ctx, key)
					require.NoError(t, err)
					assert.True(t, h.Held)
					assert.Equal(t, "taker", h.Owner)
				}
				require.NoError(t, lease.Release(ctx))
			})
		}
	}
}
