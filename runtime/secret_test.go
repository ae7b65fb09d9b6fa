package runtime_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers (loggers).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// labelRecorder is an Observer that keeps every string the runtime hands
// it: the label values a metrics adapter (lockgenprom) would export.
type labelRecorder struct {
	mu     sync.Mutex
	labels []string
	lost   int
}

func (r *labelRecorder) add(s ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.labels = append(r.labels, s...)
}

func (r *labelRecorder) Acquired(lock string, strategy runtime.Strategy, result runtime.AcquireResult, _ time.Duration) {
	r.add(lock, string(strategy), string(result))
}
func (r *labelRecorder) Released(lock string, strategy runtime.Strategy, _ time.Duration) {
	r.add(lock, string(strategy))
}
func (r *labelRecorder) RenewFailed(lock string, strategy runtime.Strategy) {
	r.add(lock, string(strategy))
}
func (r *labelRecorder) LeaseLost(lock string, strategy runtime.Strategy) {
	r.add(lock, string(strategy))
	r.mu.Lock()
	r.lost++
	r.mu.Unlock()
}
func (r *labelRecorder) LeaderChanged(lock string, leader bool) { r.add(lock, fmt.Sprint(leader)) }

func (r *labelRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.labels, "\n")
}

// TestDSNPasswordNeverShows: a user with a recognizable password drives
// every strategy and a job worker through a proxy that the test cuts
// mid-holding (the server gone), and clients connect with a wrong password
// and to a closed port. Neither password appears in the runtime's slog
// output, the driver's log, any returned error or any label value handed
// to the Observer; and each of those captured the failures (so the test
// looked at something).
func TestDSNPasswordNeverShows(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	admin := tdb.Admin(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	user := "lgpw_" + hex.EncodeToString(b[:])
	password := "Pw_" + hex.EncodeToString(b[:]) + "_s3cr3t"
	wrong := "Wr_" + hex.EncodeToString(b[:]) + "_n0tit"
	_, err := admin.Exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	for _, table := range testdb.Tables(t) {
		_, err = admin.Exec("GRANT " + testdb.Privileges + " ON " + tdb.Name + "." + table + " TO '" + user + "'@'%'")
		require.NoError(t, err)
	}

	var logs, driverLog syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	driverLogger := log.New(&driverLog, "[mysql] ", 0)
	obs := &labelRecorder{}
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	stores := map[*runtime.Client]lockgendb.Store{}
	client := func(cfg *mysql.Config) *runtime.Client {
		cfg.Logger = driverLogger
		db := sql.OpenDB(testkit.Connector(t, cfg))
		t.Cleanup(func() { _ = db.Close() })
		store := lockgendb.NewStore(db)
		c, err := runtime.NewClient(store, runtime.WithLogger(logger), runtime.WithObserver(obs), runtime.WithOwner("pw-node"))
		require.NoError(t, err)
		stores[c] = store
		return c
	}
	locks := func(c *runtime.Client) []*runtime.Lock {
		var out []*runtime.Lock
		for _, s := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategySession, runtime.StrategyRow} {
			cfg := runtime.LockConfig{Name: "pw-" + string(s) + "-" + tdb.Name[len(tdb.Name)-6:], Strategy: s}
			if s != runtime.StrategyRow {
				cfg.TTL = time.Second
			}
			l, err := c.Lock(cfg)
			require.NoError(t, err)
			out = append(out, l)
		}
		return out
	}

	// The right password, through a proxy cut while every lock is held
	// and a job runs.
	proxy, err := tcpproxy.Start(tdb.Config.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	good := tdb.Config.Clone()
	good.User, good.Passwd, good.Addr, good.Timeout = user, password, proxy.Addr(), time.Second
	c := client(good)
	var held []*runtime.Lease
	for _, l := range locks(c) {
		lease, err := l.Try(ctx, "")
		require.NoError(t, err, "the user with the password holds %s", l.Config().Name)
		held = append(held, lease)
	}
	j, err := jobs.NewClient(c, stores[c])
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	w, err := j.NewWorker(jobs.WorkerConfig{Lease: time.Second, PollMin: 5 * time.Millisecond, ShutdownGrace: time.Second, Handlers: map[string]jobs.JobHandler{
		"pw-job": {Handle: func(ctx context.Context, _ *jobs.Run) error {
			started <- struct{}{}
			<-ctx.Done()
			return context.Cause(ctx)
		}},
	}})
	require.NoError(t, err)
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	_, err = j.Enqueue(ctx, nil, jobs.NewRun{Job: "pw-job", MaxAttempts: 1, Timeout: time.Minute})
	require.NoError(t, err)
	<-started

	proxy.Cut()
	for _, lease := range held[:2] { // lease and session: told by their deadline or connection check
		select {
		case <-lease.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a holding outlived the cut")
		}
		note(lease.Err())
	}
	for _, l := range locks(c) {
		_, err := l.Try(ctx, "")
		note(err)
		_, err = l.Holder(ctx, "")
		note(err)
	}
	for _, lease := range held {
		note(lease.Release(ctx))
	}
	_, err = j.Enqueue(ctx, nil, jobs.NewRun{Job: "pw-job", MaxAttempts: 1, Timeout: time.Minute})
	note(err)
	time.Sleep(1500 * time.Millisecond) // heartbeats fail, the run's lease is lost
	proxy.Restore()
	stopWorker()
	note(<-workerDone)

	// A wrong password.
	bad := tdb.Config.Clone()
	bad.User, bad.Passwd = user, wrong
	c = client(bad)
	note(c.CheckServer(ctx))
	for _, l := range locks(c) {
		_, err := l.Try(ctx, "")
		note(err)
	}
	j, err = jobs.NewClient(c, stores[c])
	require.NoError(t, err)
	_, err = j.Enqueue(ctx, nil, jobs.NewRun{Job: "pw-job", MaxAttempts: 1, Timeout: time.Minute})
	note(err)
	w, err = j.NewWorker(jobs.WorkerConfig{PollMin: 50 * time.Millisecond, Handlers: map[string]jobs.JobHandler{"pw-job": {Handle: func(context.Context, *jobs.Run) error { return nil }}}})
	require.NoError(t, err)
	// A worker logs what it cannot do and goes on until stopped.
	wctx, stopWorker = context.WithTimeout(ctx, time.Second)
	note(w.Run(wctx))
	stopWorker()

	// The right password, to a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	refused := tdb.Config.Clone()
	refused.User, refused.Passwd, refused.Addr, refused.Timeout = user, password, closed, time.Second
	c = client(refused)
	for _, l := range locks(c) {
		_, err := l.Try(ctx, "")
		note(err)
	}

	allErrs := strings.Join(errs, "\n")
	for what, text := range map[string]string{"slog output": logs.String(), "driver log": driverLog.String(), "errors": allErrs, "observer labels": obs.String()} {
		assert.NotContains(t, text, password, "the password in the %s", what)
		assert.NotContains(t, text, wrong, "the wrong password in the %s", what)
	}
	// What was captured is what the failures produce.
	assert.Contains(t, allErrs, "Access denied for user '"+user+"'", "the wrong password's error")
	assert.Contains(t, allErrs, "connection refused", "the closed port's error")
	assert.Contains(t, allErrs, runtime.ErrLeaseLost.Error(), "the cut holdings' errors")
	assert.GreaterOrEqual(t, len(errs), 15)
	assert.Contains(t, logs.String(), "lease", "the runtime logged the lost holdings")
	assert.Contains(t, logs.String(), "run", "the worker logged the cut")
	assert.NotEmpty(t, driverLog.String(), "the driver logged the cut connections")
	obs.mu.Lock()
	assert.Positive(t, obs.lost, "the Observer was told of lost leases")
	obs.mu.Unlock()
	if t.Failed() {
		t.Logf("errors:\n%s\nslog:\n%s\ndriver:\n%s", allErrs, logs.String(), driverLog.String())
	}
}
