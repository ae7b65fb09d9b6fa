package runtime_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testgen/lockgendb"
)

// hostile are the values lock keys, owners, unique keys and job arguments
// are tried with: quotes, backslashes, NUL and other control bytes, 4-byte
// UTF-8, SQL fragments, and lengths on both sides of the 191-byte columns
// up to 10 KB. Each must be held (or stored) as itself, byte for byte, or
// refused with ErrInvalid before any statement.
var hostile = []struct{ label, v string }{
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

// limitedRefusal is the refusal of a value stored in a VARCHAR(191) column
// of the utf8mb4_bin tables (keys, owners, unique keys): more than 191
// bytes, not UTF-8, or ending in a space (the collation pads: "a" and "a "
// would be one value). "" when the value is stored as itself.
func limitedRefusal(v string) string {
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

// distinct are pairs of keys that differ only in a way a server could fold
// (case, a NUL byte, accents, normalization, the bytes after a NUL, quote
// escaping): each pair must be two holdings, never one.
var distinct = [][2]string{
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

// injectionConfigs are the connection settings keys travel through: the
// driver interpolating them into the statement text (the tests' default),
// the server binding them in prepared statements, and interpolation with
// NO_BACKSLASH_ESCAPES and without strict mode (quotes must then be
// escaped by doubling, and a value the server had to cut would be cut
// silently).
var injectionConfigs = []struct {
	label string
	apply func(*mysql.Config)
}{
	{"interpolated", func(*mysql.Config) {}},
	{"prepared", func(c *mysql.Config) { c.InterpolateParams = false }},
	{"no-backslash-escapes", func(c *mysql.Config) {
		c.Params = map[string]string{"sql_mode": "'NO_BACKSLASH_ESCAPES'"}
	}},
}

// openInjection opens a pool on tdb with one of injectionConfigs, counting
// its statements, and checks that the settings took effect.
func openInjection(t *testing.T, tdb *testdb.DB, apply func(*mysql.Config)) (*sql.DB, *stmtcount.Connector) {
	t.Helper()
	cfg := tdb.Config.Clone()
	apply(cfg)
	counter := stmtcount.Wrap(mysqlConnector(t, cfg))
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	var mode string
	require.NoError(t, db.QueryRow("SELECT @@SESSION.sql_mode").Scan(&mode))
	if cfg.Params["sql_mode"] != "" {
		require.Equal(t, "NO_BACKSLASH_ESCAPES", mode)
	}
	return db, counter
}

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
// (Holder and the row show its bytes) and as the worker of the runs it
// claims.
func TestHostileOwners(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	name := uniqueName(t, tdb)
	for _, tc := range hostile {
		c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner(tc.v))
		if why := limitedRefusal(tc.v); why != "" {
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.label)
			assert.Contains(t, err.Error(), why, tc.label)
			continue
		}
		require.NoError(t, err, tc.label)
		require.Equal(t, tc.v, c.Owner())
		for _, strategy := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategySession, runtime.StrategyRow} {
			cfg := runtime.LockConfig{Name: name + "-" + string(strategy), Keyed: true, Strategy: strategy}
			if strategy != runtime.StrategyRow {
				cfg.TTL = time.Second
			}
			l, err := c.Lock(cfg)
			require.NoError(t, err)
			lease, err := l.Try(ctx, tc.label)
			require.NoError(t, err, "%s %s", strategy, tc.label)
			h, err := l.Holder(ctx, tc.label)
			require.NoError(t, err)
			assert.True(t, h.Held, "%s %s", strategy, tc.label)
			assert.Equal(t, tc.v, h.Owner, "%s %s: Holder shows the owner as itself", strategy, tc.label)
			row := storedKeys(t, db, cfg.Name)[hex.EncodeToString([]byte(tc.label))]
			require.NoError(t, lease.Release(ctx), "%s %s: released by owner and token", strategy, tc.label)
			assert.Equal(t, storedRow{owner: tc.v, token: lease.Token()}, row, "%s %s: the row holds the owner's bytes", strategy, tc.label)
		}

		j, err := runtime.NewJobs(c, lockgendb.NewStore(db))
		require.NoError(t, err)
		done := make(chan struct{}, 1)
		id, err := j.Enqueue(ctx, nil, runtime.NewRun{Job: "owned", MaxAttempts: 1, Timeout: 10 * time.Second})
		require.NoError(t, err)
		stop := startWorker(t, j, runtime.WorkerConfig{PollMin: 5 * time.Millisecond, Handlers: map[string]runtime.JobHandler{
			"owned": {Handle: func(context.Context, *runtime.Run) error { done <- struct{}{}; return nil }},
		}})
		info := waitState(t, j, id, runtime.RunCompleted)
		stop()
		<-done
		assert.Equal(t, tc.v, info.Worker, "%s: the run records its worker as itself", tc.label)
	}
}

// stringArgs is a job's arguments with one string (as generated for
// `args: {s: string}`).
type stringArgs struct {
	S string `json:"s"`
}

// TestHostileJobArguments: a string argument holding any hostile value
// reaches its handler byte for byte, enqueued alone or in a batch, or is
// refused with ErrInvalid before any statement (JSON cannot carry bytes
// that are not UTF-8: encoding/json would replace them with U+FFFD).
// Hostile unique keys are stored as themselves or refused, and unique keys
// that differ only in case or a NUL byte are two runs, never one.
func TestHostileJobArguments(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db, counter := openInjection(t, tdb, func(*mysql.Config) {})
	j := jobsNode(t, db, "args-node")
	var mu sync.Mutex
	got := map[int64]string{}
	// The worker has a pool of its own: only the enqueues are counted.
	worker := jobsNode(t, tdb.Open(t), "worker")
	stop := startWorker(t, worker, runtime.WorkerConfig{PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond, Handlers: map[string]runtime.JobHandler{
		"echo": {Handle: runtime.HandleArgs(func(_ context.Context, run *runtime.Run, a stringArgs) error {
			mu.Lock()
			defer mu.Unlock()
			got[run.ID] = a.S
			return nil
		})},
	}})
	defer stop()
	base := runtime.NewRun{Job: "echo", MaxAttempts: 1, Timeout: 10 * time.Second}
	// The first enqueue checks the server.
	_, err := runtime.EnqueueArgs(ctx, j, nil, base, stringArgs{"warm-up"})
	require.NoError(t, err)

	want := map[int64]string{}
	var batch []stringArgs
	for _, tc := range hostile {
		if !utf8.ValidString(tc.v) {
			before := counter.Count()
			_, err := runtime.EnqueueArgs(ctx, j, nil, base, stringArgs{tc.v})
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.label)
			assert.Contains(t, err.Error(), "UTF-8", tc.label)
			err = runtime.EnqueueArgsMany(ctx, j, nil, base, []stringArgs{{"fine"}, {tc.v}})
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.label)
			assert.Equal(t, before, counter.Count(), "%s: refused before any statement", tc.label)
			continue
		}
		id, err := runtime.EnqueueArgs(ctx, j, nil, base, stringArgs{tc.v})
		require.NoError(t, err, tc.label)
		want[id] = tc.v
		batch = append(batch, stringArgs{tc.v})
	}
	require.NoError(t, runtime.EnqueueArgsMany(ctx, j, nil, base, batch))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1+2*len(want)
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	for id, v := range want {
		assert.Equal(t, []byte(v), []byte(got[id]), "run %d: the handler gets the argument byte for byte", id)
	}
	var fromBatch []string
	for id, v := range got {
		if _, single := want[id]; !single && v != "warm-up" {
			fromBatch = append(fromBatch, v)
		}
	}
	mu.Unlock()
	var wantBatch []string
	for _, a := range batch {
		wantBatch = append(wantBatch, a.S)
	}
	assert.ElementsMatch(t, wantBatch, fromBatch, "EnqueueArgsMany delivers every argument byte for byte")

	// Unique keys: stored as themselves while the run is unfinished, or
	// refused before any statement.
	delayed := base
	delayed.Delay = time.Hour // not claimed while the test looks
	ids := map[int64]string{}
	accepted := 0
	for _, tc := range hostile {
		if why := limitedRefusal(tc.v); why != "" {
			before := counter.Count()
			_, err := j.Enqueue(ctx, nil, withUniqueKey(delayed, tc.v))
			require.ErrorIs(t, err, runtime.ErrInvalid, tc.label)
			assert.Contains(t, err.Error(), why, tc.label)
			assert.Equal(t, before, counter.Count(), "%s: refused before any statement", tc.label)
			continue
		}
		accepted++
		id, err := j.Enqueue(ctx, nil, withUniqueKey(delayed, tc.v))
		require.NoError(t, err, tc.label)
		again, err := j.Enqueue(ctx, nil, withUniqueKey(delayed, tc.v))
		require.NoError(t, err, tc.label)
		assert.Equal(t, id, again, "%s: the same unique key is the same run", tc.label)
		ids[id] = tc.v
		info, err := j.Run(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []byte(tc.v), []byte(info.UniqueKey), tc.label)
	}
	assert.Len(t, ids, accepted, "every accepted unique key is a run of its own")
	pairs := delayed
	pairs.Job = "pairs"
	for _, p := range distinct {
		a, err := j.Enqueue(ctx, nil, withUniqueKey(pairs, p[0]))
		require.NoError(t, err)
		b, err := j.Enqueue(ctx, nil, withUniqueKey(pairs, p[1]))
		require.NoError(t, err)
		assert.NotEqual(t, a, b, "unique keys %q and %q are two runs", p[0], p[1])
	}
}

func withUniqueKey(r runtime.NewRun, key string) runtime.NewRun {
	r.UniqueKey = key
	return r
}
