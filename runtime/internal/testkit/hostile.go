package testkit

import (
	"database/sql"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// Hostile are the values lock keys, owners, unique keys and job arguments
// are tried with: quotes, backslashes, NUL and other control bytes, 4-byte
// UTF-8, SQL fragments, and lengths on both sides of the 191-byte columns
// up to 10 KB. Each must be held (or stored) as itself, byte for byte, or
// refused with ErrInvalid before any statement.
var Hostile = []struct{ Label, V string }{
	{"single-quote", "it's"},
	{"doubled-quote", "''"},
	{"double-quote", `say "hi"`},
	{"backslash", `a\b`},
	{"trailing-backslash", `a\`},
	{"backslash-quote", `\'`},
	{"backslash-zero", `\0`},
	{"backtick", "`t`"},
	{"nul", "a\x00b"},
	{"only-nul", "\x00"},
	{"trailing-nul", "a\x00"},
	{"control", "\r\n\t\x1a\x08\x7f"},
	{"percent-underscore", "%_"},
	{"4-byte-utf8", "🔒𝄞"},
	{"mixed-case", "Order-ABC"},
	{"drop-table", "x'); DROP TABLE lockgen_locks; --"},
	{"drop-table-comment", "x'; DROP TABLE lockgen_locks; -- "},
	{"or-true", "' OR '1'='1"},
	{"union", `" UNION SELECT 1 #`},
	{"comment", "/*!50000 x*/"},
	{"191-bytes", strings.Repeat("k", 190) + "'"},
	{"191-bytes-4-byte", strings.Repeat("🔒", 47) + "abc"},
	{"192-bytes", strings.Repeat("k", 191) + "'"},
	{"10KB", strings.Repeat("x'\\", 3414)},
	{"invalid-utf8", "a\xffb"},
	{"truncated-utf8", "a\xf0\x9f"},
	{"trailing-space", "a "},
}

// LimitedRefusal is the refusal of a value stored in a VARCHAR(191) column
// of the utf8mb4_bin tables (keys, owners, unique keys): more than 191
// bytes, not UTF-8, or ending in a space (the collation pads: "a" and "a "
// would be one value). "" when the value is stored as itself.
func LimitedRefusal(v string) string {
	switch {
	case len(v) > 191:
		return "191"
	case !utf8.ValidString(v):
		return "UTF-8"
	case strings.HasSuffix(v, " "):
		return "ends in a space"
	}
	return ""
}

// Distinct are pairs of keys that differ only in a way a server could fold
// (case, a NUL byte, accents, normalization, the bytes after a NUL, quote
// escaping): each pair must be two holdings, never one.
var Distinct = [][2]string{
	{"a", "A"},
	{"order-abc", "ORDER-ABC"},
	{"a\x00b", "a\x00c"},
	{"a", "a\x00"},
	{"é", "e"},
	{"\u00e9", "e\u0301"},
	{"ß", "ss"},
	{"🔒", "🔓"},
	{"a'b", "a''b"},
	{`a\'b`, "a'b"},
	{`a\b`, "a\b"},
	{strings.Repeat("k", 191), strings.Repeat("k", 190) + "K"},
}

// InjectionConfigs are the connection settings keys travel through: the
// driver interpolating them into the statement text (the tests' default),
// the server binding them in prepared statements, and interpolation with
// NO_BACKSLASH_ESCAPES (quotes must then be escaped by doubling), in
// strict mode, without which the runtime refuses the connection.
var InjectionConfigs = []struct {
	Label string
	Apply func(*mysql.Config)
}{
	{"interpolated", func(*mysql.Config) {}},
	{"prepared", func(c *mysql.Config) { c.InterpolateParams = false }},
	{"no-backslash-escapes", func(c *mysql.Config) {
		c.Params = map[string]string{"sql_mode": "'STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES'"}
	}},
}

// OpenInjection opens a pool on tdb with one of InjectionConfigs, counting
// its statements, and checks that the settings took effect.
func OpenInjection(t *testing.T, tdb *testdb.DB, apply func(*mysql.Config)) (*sql.DB, *stmtcount.Connector) {
	t.Helper()
	cfg := tdb.Config.Clone()
	apply(cfg)
	counter := stmtcount.Wrap(Connector(t, cfg))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	var mode string
	require.NoError(t, db.QueryRow("SELECT @@SESSION.sql_mode").Scan(&mode))
	if cfg.Params["sql_mode"] != "" {
		require.Equal(t, "NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES", mode)
	}
	return db, counter
}
