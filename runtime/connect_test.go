package runtime_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
)

// TestConnectTimeoutEndsASwallowedHandshake: a server that accepts the TCP
// connection and never greets (what a partition behind a proxy looks like)
// holds go-sql-driver's Connect for good when the context never ends, as
// database/sql's connection opener's does; ConnectTimeout ends it.
func TestConnectTimeoutEndsASwallowedHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 4) // never greeted
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User = "tcp", ln.Addr().String(), "nobody"
	cfg.Timeout = time.Second // the TCP connect alone
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)

	plain := make(chan error, 1)
	go func() {
		_, err := c.Connect(context.Background())
		plain <- err
	}()
	bounded := make(chan error, 1)
	go func() {
		_, err := runtime.ConnectTimeout(c, 300*time.Millisecond).Connect(context.Background())
		bounded <- err
	}()
	select {
	case err := <-bounded:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the bounded connect did not end")
	}
	select {
	case err := <-plain:
		t.Fatalf("the unbounded connect ended (%v): the test no longer shows the hang", err)
	case <-time.After(2 * time.Second):
	}
	// End the hung connect (the server closes) so no goroutine outlives
	// the test.
	for i := 0; i < 2; i++ {
		(<-accepted).Close()
	}
	require.Error(t, <-plain)
}
