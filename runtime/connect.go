package runtime

import (
	"context"
	"database/sql/driver"
	"time"
)

// ConnectTimeout wraps a database/sql connector (such as go-sql-driver's
// mysql.NewConnector) so that opening a connection, handshake included,
// ends after d: open your pool with sql.OpenDB(runtime.ConnectTimeout(c,
// 5*time.Second)).
//
// database/sql opens the connections that queued requests wait for in one
// goroutine per pool, with a context that never ends, and go-sql-driver
// bounds a new connection's handshake only by the DSN's readTimeout (its
// timeout covers the TCP connect alone). After a partition or blackhole
// through anything that accepts the TCP connection (a proxy, a load
// balancer, a half-open path), a handshake the network swallows holds that
// goroutine for readTimeout, or for good without one, and every statement
// of the process waits for a connection meanwhile (docs/RELIABILITY.md,
// bug 5 and "Open"). With ConnectTimeout the handshake fails after d and
// the pool opens the next connection at once. Keep d well above the time
// a healthy connect takes (one round trip for TCP, two or three for the
// handshake, plus TLS if any).
func ConnectTimeout(c driver.Connector, d time.Duration) driver.Connector {
	return boundConnector{c: c, d: d}
}

type boundConnector struct {
	c driver.Connector
	d time.Duration
}

// Connect opens a connection with ctx bounded by d.
func (b boundConnector) Connect(ctx context.Context) (driver.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.c.Connect(ctx)
}

// Driver returns the wrapped connector's driver.
func (b boundConnector) Driver() driver.Driver { return b.c.Driver() }
