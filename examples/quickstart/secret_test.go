package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/examples/internal/demodb"
	"github.com/lockgen/lockgen/examples/internal/exampletest"
	"github.com/lockgen/lockgen/examples/quickstart/locks"
	"github.com/lockgen/lockgen/lockgenprom"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cutProxy forwards TCP connections to target until cut, which closes
// every connection and refuses new ones: the server gone, for the client.
type cutProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				_ = c.Close()
				_ = s.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// TestDSNPasswordNeverInMetricsLogsOrErrors: the generated locks, with the
// Prometheus adapter and a logger, used by a user with a recognizable
// password through a connection cut while the master lock is held (and
// each lock tried during the cut), with a wrong password, and against a
// closed port. Neither password appears in
// any exported metric (names, help, label values: the whole exposition),
// the logs, the driver's log or any error; the metrics and logs recorded
// the failures.
func TestDSNPasswordNeverInMetricsLogsOrErrors(t *testing.T) {
	ctx := context.Background()
	cfg, err := demodb.Config(exampletest.FreshDSN(t))
	require.NoError(t, err)
	admin, err := demodb.Open(cfg)
	require.NoError(t, err)
	defer admin.Close()
	for _, m := range []string{migration, sessionMigration} {
		_, err = admin.ExecContext(ctx, m)
		require.NoError(t, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	user := "lgex_" + hex.EncodeToString(b[:])
	password := "Pw_" + hex.EncodeToString(b[:]) + "_s3cr3t"
	wrong := "Wr_" + hex.EncodeToString(b[:]) + "_n0tit"
	_, err = admin.Exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	_, err = admin.Exec("GRANT SELECT, INSERT, UPDATE, DELETE ON " + cfg.DBName + ".quickstart_locks TO '" + user + "'@'%'")
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	obs := lockgenprom.New()
	reg.MustRegister(obs)
	var logs, driverLog lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	open := func(user, password, addr string) *locks.Locks {
		c := cfg.Clone()
		c.User, c.Passwd, c.Addr, c.Timeout = user, password, addr, time.Second
		c.Logger = log.New(&driverLog, "[mysql] ", 0)
		conn, err := mysql.NewConnector(c)
		require.NoError(t, err)
		db := sql.OpenDB(conn)
		t.Cleanup(func() { _ = db.Close() })
		l, err := locks.New(db, locks.WithOwner("node"), locks.WithLogger(logger), locks.WithObserver(obs))
		require.NoError(t, err)
		return l
	}

	// The right password; the server goes away while master is held.
	proxy := startCutProxy(t, cfg.Addr)
	l := open(user, password, proxy.ln.Addr().String())
	master, err := l.TryMasterLock(ctx)
	require.NoError(t, err)
	proxy.cut()
	select {
	case <-master.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the master lease outlived the cut")
	}
	note(master.Err())
	note(master.Release(ctx))
	_, err = l.TryMasterLock(ctx)
	note(err)
	_, err = l.TryOrderLock(ctx, 42)
	note(err)
	_, err = l.TryAccountLock(ctx, 7)
	note(err)
	_, err = l.MasterLockHolder(ctx)
	note(err)

	// A wrong password, and a closed port.
	l = open(user, wrong, cfg.Addr)
	note(l.CheckServer(ctx))
	_, err = l.TryOrderLock(ctx, 1)
	note(err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	l = open(user, password, closed)
	_, err = l.TryMasterLock(ctx)
	note(err)

	// Every metric as the registry gathers it: names, help, label pairs
	// and values.
	families, err := reg.Gather()
	require.NoError(t, err)
	var exposition strings.Builder
	counter := map[string]float64{}
	for _, mf := range families {
		exposition.WriteString(mf.String() + "\n")
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range m.GetLabel() {
				key += " " + lp.GetName() + "=" + lp.GetValue()
			}
			counter[key] = m.GetCounter().GetValue()
		}
	}
	allErrs := strings.Join(errs, "\n")
	for what, text := range map[string]string{
		"metrics":    exposition.String(),
		"logs":       logs.String(),
		"driver log": driverLog.String(),
		"errors":     allErrs,
	} {
		assert.NotContains(t, text, password, "the password in the %s", what)
		assert.NotContains(t, text, wrong, "the wrong password in the %s", what)
	}
	// The failures were recorded where the test looked.
	assert.Equal(t, 1.0, counter["lockgen_leases_lost_total lock=master strategy=lease"], "%v", counter)
	assert.Positive(t, counter["lockgen_renew_failures_total lock=master strategy=lease"], "%v", counter)
	assert.Equal(t, 1.0, counter["lockgen_acquisitions_total lock=master result=error strategy=lease"], "%v", counter)
	assert.Equal(t, 1.0, counter["lockgen_acquisitions_total lock=order result=error strategy=lease"], "%v", counter)
	assert.Equal(t, 1.0, counter["lockgen_acquisitions_total lock=account result=error strategy=row"], "%v", counter)
	assert.Contains(t, allErrs, "Access denied for user '"+user+"'")
	assert.Contains(t, allErrs, "connection refused")
	assert.Contains(t, allErrs, locks.ErrLeaseLost.Error())
	assert.Contains(t, logs.String(), "lease lost")
	if t.Failed() {
		t.Logf("metrics:\n%s\nerrors:\n%s\nlogs:\n%s\ndriver:\n%s", exposition.String(), allErrs, logs.String(), driverLog.String())
	}
}
