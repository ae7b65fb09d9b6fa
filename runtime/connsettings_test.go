package runtime_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// openWith opens a pool on tdb's database as the application user, with
// params (a DSN's query string, e.g. "charset=utf8&sql_mode=%27%27") added
// to the test DSN.
func openWith(t *testing.T, tdb *testdb.DB, params string) *sql.DB {
	t.Helper()
	dsn := tdb.Config.FormatDSN()
	if params != "" {
		dsn += "&" + params
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	db := sql.OpenDB(testkit.Connector(t, cfg))
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestServerRefusesConnectionThatCannotStoreEveryKey: a connection whose
// character set is not utf8mb4 stores 4-byte characters as '?' (keys
// "a🔒" and "a🔓" became one row), and one whose sql_mode is not strict
// does so with a warning instead of an error: both could give one lock to
// two holders, so the probe refuses them with ErrInvalid, at CheckServer and
// at the first lock call, naming the DSN setting to change; the DSN
// settings that keep every key exact are accepted, including the sql_mode
// the message suggests.
func TestServerRefusesConnectionThatCannotStoreEveryKey(t *testing.T) {
	tdb := testdb.New(t)
	for _, tc := range []struct {
		params string
		want   []string // parts of the refusal; none when accepted
	}{
		{"", nil},
		{"charset=utf8mb4", nil},
		{"collation=utf8mb4_unicode_ci", nil},
		{"sql_mode=%27STRICT_ALL_TABLES%27", nil},
		{"sql_mode=%27STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION%27", nil},
		{"charset=utf8", []string{"character set is not utf8mb4", "character_set_client utf8", "charset=utf8mb4"}},
		{"charset=latin1", []string{"character_set_client latin1", "character_set_connection latin1", "charset=utf8mb4"}},
		{"collation=utf8_general_ci", []string{"character_set_connection utf8", "collation=utf8mb4_general_ci"}},
		{"sql_mode=%27%27", []string{`sql_mode is ""`, "STRICT_TRANS_TABLES", "sql_mode=%27STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION%27"}},
		{"sql_mode=%27NO_ENGINE_SUBSTITUTION%27", []string{`sql_mode is "NO_ENGINE_SUBSTITUTION"`}},
		{"charset=utf8&sql_mode=%27%27", []string{"charset=utf8mb4", `sql_mode is ""`}},
	} {
		t.Run(tc.params, func(t *testing.T) {
			c, err := runtime.NewClient(lockgendb.NewStore(openWith(t, tdb, tc.params)))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := c.Lock(runtime.LockConfig{Name: "settings", Keyed: true, TTL: 5 * time.Second})
			require.NoError(t, err)
			for _, check := range []func() error{
				func() error { return c.CheckServer(ctx) },
				func() error {
					lease, err := l.Try(ctx, "a🔒")
					if err == nil {
						return lease.Release(ctx)
					}
					return err
				},
			} {
				err := check()
				if tc.want == nil {
					require.NoError(t, err)
					continue
				}
				require.ErrorIs(t, err, runtime.ErrInvalid)
				for _, w := range tc.want {
					assert.Contains(t, err.Error(), w)
				}
			}
		})
	}
}
