package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/examples/internal/demodb"
	"github.com/lockgen/lockgen/examples/internal/exampletest"
	"github.com/lockgen/lockgen/examples/quickstart/locks"
)

// TestQuickstart runs the example against the test server and checks what
// it printed: every holding of each lock has a higher token than the one
// before, in the order the holdings happened, and no increment of the
// account balance made under the row lock was lost.
func TestQuickstart(t *testing.T) {
	dsns := exampletest.FreshDSNs(t)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), dsns, &out))
	user := exampletest.RanAsItsOwnUser(t, dsns, out.String())
	// It printed the grants it gave: the four privileges on its two
	// tables, nothing else.
	cfg, err := demodb.Config(dsns.Admin)
	require.NoError(t, err)
	name, _, _ := strings.Cut(user, "@")
	for _, table := range tables {
		assert.Contains(t, out.String(), "\n  GRANT SELECT, INSERT, UPDATE, DELETE ON `"+cfg.DBName+"`.`"+table+"` TO '"+name+"'@'%'\n")
	}
	assert.Equal(t, len(tables), strings.Count(out.String(), "GRANT"))

	re := regexp.MustCompile(`(?m)^node-\d holds (master|order 42|account 7) +token=(\d+)$`)
	last := map[string]int64{}
	count := map[string]int{}
	for _, m := range re.FindAllStringSubmatch(out.String(), -1) {
		token, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		assert.Greater(t, token, last[m[1]], "tokens of %s strictly increase", m[1])
		last[m[1]] = token
		count[m[1]]++
	}
	assert.Equal(t, 9, count["master"], out.String())
	assert.Equal(t, 9, count["order 42"], out.String())
	assert.Equal(t, 9, count["account 7"], out.String())
	assert.Contains(t, out.String(), "observer: account 7 balance=9", "every read-add-write under the row lock counted")
	assert.Contains(t, out.String(), "observer: master held=false last token="+strconv.FormatInt(last["master"], 10))
}

// TestGeneratedCodeChecksTheServer: the generated store hands the runtime
// its tables and migrations, so a database without them is refused with
// where the migrations are, and a pool without parseTime=true with what to
// set, before any lock statement runs. The application's user sees it so
// when the application is deployed before the lockgen migration ran (it
// has its accounts table, not the lock table yet).
func TestGeneratedCodeChecksTheServer(t *testing.T) {
	ctx := context.Background()
	dsns := exampletest.FreshDSNs(t)
	env, err := demodb.Setup(ctx, dsns, []string{"quickstart_accounts"},
		"CREATE TABLE quickstart_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)")
	require.NoError(t, err)
	defer env.Close()
	require.Len(t, env.Grants, 1)
	db, err := demodb.Open(env.App)
	require.NoError(t, err)
	defer db.Close()
	l, err := locks.New(db)
	require.NoError(t, err)
	err = l.CheckServer(ctx)
	require.ErrorIs(t, err, locks.ErrInvalid)
	assert.ErrorContains(t, err, "table quickstart_locks does not exist")
	assert.ErrorContains(t, err, "apply migration migrations/0001_quickstart_locks.up.sql (relative to lockgen.yaml)")
	_, err = l.TryMasterLock(ctx)
	assert.ErrorIs(t, err, locks.ErrInvalid)

	adminCfg, err := demodb.Config(dsns.Admin)
	require.NoError(t, err)
	admin, err := demodb.Open(adminCfg)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.ExecContext(ctx, migration)
	require.NoError(t, err)
	_, err = admin.ExecContext(ctx, "GRANT SELECT, INSERT, UPDATE, DELETE ON quickstart_locks TO '"+env.App.User+"'@'%'")
	require.NoError(t, err)
	err = l.CheckServer(ctx)
	require.ErrorIs(t, err, locks.ErrInvalid, "the account lock's row strategy needs migration 0006 too")
	assert.ErrorContains(t, err, "lacks column session_witness, column session_offset, which migration migrations/0006_quickstart_locks_session.up.sql (relative to lockgen.yaml) adds")
	_, err = admin.ExecContext(ctx, sessionMigration)
	require.NoError(t, err)
	require.NoError(t, l.CheckServer(ctx), "once the migrations are applied and the user granted")
	lease, err := l.TryMasterLock(ctx)
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))

	cfg := env.App.Clone()
	cfg.ParseTime = false
	raw, err := demodb.Open(cfg)
	require.NoError(t, err)
	defer raw.Close()
	l, err = locks.New(raw)
	require.NoError(t, err)
	err = l.CheckServer(ctx)
	require.ErrorIs(t, err, locks.ErrInvalid)
	assert.ErrorContains(t, err, "parseTime=true")
}
