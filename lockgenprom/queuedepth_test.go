package lockgenprom_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/lockgenprom"
	"github.com/lockgen/lockgen/runtime/ops"
)

// testDB is a database of its own on the test server with the
// repository's schema, dropped after the test.
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	dsn := os.Getenv("LOCKGEN_TEST_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.ParseTime = true
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lockgen_prom_" + hex.EncodeToString(b[:])
	_, err = admin.Exec("CREATE DATABASE " + name)
	require.NoError(t, err, "is the test server running? `make test` starts it")
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE " + name) })
	cfg.DBName, cfg.MultiStatements = name, true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	schema, err := os.ReadFile("../queries/schema.sql")
	require.NoError(t, err)
	_, err = db.Exec(string(schema))
	require.NoError(t, err)
	return db
}

// TestQueueDepthOnTheLeaderOnly: the queue gauges come from the database
// on the node that leads, and from no other.
func TestQueueDepthOnTheLeaderOnly(t *testing.T) {
	db := testDB(t)
	for _, r := range []struct{ queue, state, runAt string }{
		{"mail", "available", "UTC_TIMESTAMP(6)"},
		{"mail", "available", "UTC_TIMESTAMP(6)"},
		{"mail", "available", "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR"},
		{"mail", "discarded", "UTC_TIMESTAMP(6)"},
		{"default", "running", "UTC_TIMESTAMP(6)"},
	} {
		_, err := db.Exec("INSERT INTO lockgen_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at, finished_at) VALUES ('j', ?, ?, "+r.runAt+", '{}', 3, 1000000, UTC_TIMESTAMP(6), IF(? = 'discarded', UTC_TIMESTAMP(6), NULL))", r.queue, r.state, r.state)
		require.NoError(t, err)
	}
	o, err := ops.New(db, ops.Config{Jobs: []ops.Job{{Name: "j", Queue: "mail"}, {Name: "k", Queue: "default"}}})
	require.NoError(t, err)
	_, err = o.PauseQueue(t.Context(), "mail")
	require.NoError(t, err)

	var leading atomic.Bool
	qd := lockgenprom.NewQueueDepth(o, leading.Load)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(qd))
	assert.Zero(t, testutil.CollectAndCount(qd), "a node that does not lead exports nothing")

	leading.Store(true)
	problems, err := testutil.CollectAndLint(qd)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Equal(t, 1.0, value(t, reg, "lockgen_queue_depth_up", nil))
	for state, want := range map[string]float64{"due": 2, "scheduled": 1, "retrying": 0, "running": 0, "orphaned": 0, "discarded": 1} {
		assert.Equal(t, want, value(t, reg, "lockgen_queue_runs", map[string]string{"queue": "mail", "state": state, "exact": "true"}), state)
	}
	assert.Equal(t, 1.0, value(t, reg, "lockgen_queue_runs", map[string]string{"queue": "default", "state": "running"}))
	assert.Equal(t, 1.0, value(t, reg, "lockgen_queue_paused", map[string]string{"queue": "mail"}))
	assert.Equal(t, 0.0, value(t, reg, "lockgen_queue_paused", map[string]string{"queue": "default"}))

	require.NoError(t, db.Close()) // the database stops answering
	assert.Equal(t, 0.0, value(t, reg, "lockgen_queue_depth_up", nil))
}
