package runtime_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// namespacedStore names its session locks under a namespace of its own,
// not its table prefix: SQL that computed the GET_LOCK name from the row
// (prefix, name, key) would ask about another lock than the one the
// session holder took.
type namespacedStore struct{ lockgendb.Store }

func (namespacedStore) SessionNamespace() string { return "ns_" }

// unprobedStore hides its pool, so the runtime skips the server probe,
// which would refuse the connection this test needs.
type unprobedStore struct{ lockgendb.Store }

func (unprobedStore) Server() driver.Target { return driver.Target{} }

// textAcquireStore is unprobedStore with the lease acquire sent as text, as
// it was before the store prepared it: as a prepared statement's argument,
// MySQL refuses a key its connection's character set cannot hold (error
// 3988) before the statement reaches the row; as text it mangles it the
// way the connection did, so the takeover's SQL runs on MySQL too.
type textAcquireStore struct {
	unprobedStore
	q *lockgendb.Queries
}

func (s textAcquireStore) LeaseAcquire(ctx context.Context, name, key, owner string, ttl time.Duration) (int64, error) {
	res, err := s.q.LeaseAcquire(ctx, lockgendb.LeaseAcquireParams{Name: name, LockKey: key, Owner: owner, TtlUs: ttl.Microseconds()})
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// TestTakeoverUsesTheAcquirersLockName: during a rolling change from
// session to lease or row, a lease or row node takes a row that shows a
// session holding only when that holding's GET_LOCK is free, and it must
// ask about the GET_LOCK name the session holder computed, not one
// recomputed in SQL from the stored row. Two ways they differ: a store
// whose session namespace is not its table prefix, and the case,
// a connection in utf8 and non-strict mode (which the probe now refuses;
// its probe is skipped here) that stored the key "a🔒" as "a????". With a
// recomputed name the taker found "its" GET_LOCK free and took the live
// session holder's row: two holders at once. That case sends the acquire
// as text (textAcquireStore), so that both servers mangle the key.
func TestTakeoverUsesTheAcquirersLockName(t *testing.T) {
	for _, tc := range []struct {
		label  string
		params string
		store  func(*sql.DB) driver.Store
		key    string
		// takers are the strategies of the node that tries to take the
		// row. sound: the connection keeps keys exact, so the row is
		// taken once the session holder died. On the connection
		// MariaDB refuses the row strategy's statements and the release
		// for the mangled key (error 1267): only a lease taker's first
		// attempt is checked there.
		takers []runtime.Strategy
		sound  bool
	}{
		{"namespace", "", func(db *sql.DB) driver.Store { return namespacedStore{lockgendb.NewStore(db)} }, "k",
			[]runtime.Strategy{runtime.StrategyLease, runtime.StrategyRow}, true},
		{"utf8-non-strict", "charset=utf8&sql_mode=%27%27", func(db *sql.DB) driver.Store {
			return textAcquireStore{unprobedStore{lockgendb.NewStore(db)}, lockgendb.New(db)}
		}, "a🔒",
			[]runtime.Strategy{runtime.StrategyLease}, false},
	} {
		for _, taker := range tc.takers {
			t.Run(tc.label+"/"+string(taker), func(t *testing.T) {
				tdb := testdb.New(t)
				ctx := context.Background()
				name := uniqueName(t, tdb)
				node := func(owner string) *runtime.Client {
					c, err := runtime.NewClient(tc.store(openWith(t, tdb, tc.params)), runtime.WithOwner(owner))
					require.NoError(t, err)
					return c
				}
				sl, err := node("session-node").Lock(runtime.LockConfig{Name: name, Keyed: true, Strategy: runtime.StrategySession, TTL: 2 * time.Second})
				require.NoError(t, err)
				tcfg := runtime.LockConfig{Name: name, Keyed: true, Strategy: taker}
				if taker == runtime.StrategyLease {
					tcfg.TTL = 2 * time.Second
				}
				other, err := node("taker").Lock(tcfg)
				require.NoError(t, err)

				held, err := sl.Try(ctx, tc.key)
				require.NoError(t, err)
				t.Cleanup(func() { _ = held.Release(context.Background()) })
				taken, err := other.Try(ctx, tc.key)
				if err == nil {
					_ = taken.Release(ctx)
				}
				require.ErrorIs(t, err, runtime.ErrNotAcquired, "a live session holding must never be taken")
				require.NoError(t, held.Err())
				if !tc.sound {
					return
				}

				// Its connection killed, the holding's GET_LOCK is free:
				// then the row is taken, with a greater token.
				admin := tdb.Admin(t)
				lockName := runtime.SessionLockNameForTest(tc.store(nil).SessionNamespace(), name, tc.key)
				var conn sql.NullInt64
				require.NoError(t, admin.QueryRow("SELECT IS_USED_LOCK(?)", lockName).Scan(&conn))
				require.True(t, conn.Valid, "the session lock is held on the server")
				_, err = admin.Exec("KILL CONNECTION ?", conn.Int64)
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					var free int
					return admin.QueryRow("SELECT IS_FREE_LOCK(?)", lockName).Scan(&free) == nil && free == 1
				}, 10*time.Second, 10*time.Millisecond)
				lease, err := other.Try(ctx, tc.key)
				require.NoError(t, err, "the dead session holding's row is taken")
				assert.Greater(t, lease.Token(), held.Token())
				require.NoError(t, lease.Release(ctx))
			})
		}
	}
}
