package tcpproxy_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// holdLockThrough takes a GET_LOCK on a session through a fresh proxy,
// then applies fault and closes the client's connection, and reports
// whether the server still holds the lock a moment later, and how many
// server sides the proxy reports stranded.
func holdLockThrough(t *testing.T, fault func(*tcpproxy.Proxy)) (held bool, stranded int) {
	tdb := testdb.New(t)
	proxy, err := tcpproxy.Start(tdb.Config.Addr)
	require.NoError(t, err)
	defer proxy.Close()
	cfg := tdb.Config.Clone()
	cfg.Addr = proxy.Addr()
	cfg.Timeout = time.Second
	connector, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(connector)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	var got int
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT GET_LOCK('tcpproxy_partition', 0)").Scan(&got))
	require.Equal(t, 1, got)

	fault(proxy)
	// The client gives up: its statement times out and it closes.
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_ = conn.PingContext(sctx)
	cancel()
	_ = conn.Close()
	_ = db.Close()

	admin := tdb.Admin(t)
	var used sql.NullInt64
	deadline := time.Now().Add(2 * time.Second)
	for {
		require.NoError(t, admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK('tcpproxy_partition')").Scan(&used))
		if !used.Valid || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return used.Valid, proxy.Stranded()
}

// TestPartitionKeepsTheServerSideOpen: after a partition, the server keeps
// a session whose client gave up (its GET_LOCK stays held), as a real
// partition does; after a blackhole, it does not (the proxy closes the
// server side when the client closes).
func TestPartitionKeepsTheServerSideOpen(t *testing.T) {
	held, stranded := holdLockThrough(t, (*tcpproxy.Proxy).Partition)
	require.True(t, held, "a partition must leave the server's session open")
	require.Equal(t, 1, stranded)

	held, stranded = holdLockThrough(t, (*tcpproxy.Proxy).Blackhole)
	require.False(t, held, "a blackhole closes the server side when the client closes")
	require.Zero(t, stranded)
}
