// Package testkit holds what the tests of the runtime and of its jobs
// package share: a manual clock, a pool through a fault proxy, and child
// processes of the test binary.
package testkit

import (
	"bufio"
	"database/sql"
	sqldriver "database/sql/driver"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// OpenViaProxy opens a pool on tdb's database through a fault proxy that
// the test owns, dialling with a one-second timeout.
func OpenViaProxy(t testing.TB, tdb *testdb.DB) (*tcpproxy.Proxy, *sql.DB) {
	t.Helper()
	proxy, err := tcpproxy.Start(tdb.Config.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := tdb.Config.Clone()
	cfg.Addr = proxy.Addr()
	cfg.Timeout = time.Second
	db := sql.OpenDB(Connector(t, cfg))
	t.Cleanup(func() { _ = db.Close() })
	return proxy, db
}

// Connector is mysql.NewConnector(cfg), failing t on an error.
func Connector(t testing.TB, cfg *mysql.Config) sqldriver.Connector {
	t.Helper()
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	return c
}

// StartChild starts this test binary again as a child process with env set
// to dsn (the child's TestMain sees env and runs its mode instead of the
// tests), and returns it with its standard output; the child is killed
// when the test ends.
func StartChild(t *testing.T, env, dsn string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), env+"="+dsn)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	return child, bufio.NewReader(out)
}

// ChildClient is the Client of a child process (owner "child") on the DSN
// in the environment variable env, with the generated store it runs on.
func ChildClient(env string) (*runtime.Client, lockgendb.Store, error) {
	cfg, err := mysql.ParseDSN(os.Getenv(env))
	if err != nil {
		return nil, lockgendb.Store{}, err
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, lockgendb.Store{}, err
	}
	store := lockgendb.NewStore(sql.OpenDB(c))
	client, err := runtime.NewClient(store, runtime.WithOwner("child"))
	return client, store, err
}

// ManualClock moves only when the test advances it, and its timers fire
// when it reaches their deadline: it stands for a node whose process is
// paused (SIGSTOP, a suspended VM) for as long as the test does not advance
// it, and one long advance is that node waking up late.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{} // the pending ones
}

// NewManualClock returns a ManualClock reading now.
func NewManualClock(now time.Time) *ManualClock {
	return &ManualClock{now: now, timers: map[*manualTimer]struct{}{}}
}

// Now is the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d and fires the timers it reaches.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			c.fireLocked(t)
		}
	}
}

// SleepingUntil reports whether a pending timer fires at exactly at.
func (c *ManualClock) SleepingUntil(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.timers {
		if t.at.Equal(at) {
			return true
		}
	}
	return false
}

func (c *ManualClock) fireLocked(t *manualTimer) {
	delete(c.timers, t)
	if t.f != nil {
		go t.f()
		return
	}
	select {
	case t.ch <- c.now:
	default:
	}
}

func (c *ManualClock) start(t *manualTimer, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.at = c.now.Add(d)
	if d <= 0 {
		c.fireLocked(t)
		return
	}
	c.timers[t] = struct{}{}
}

// NewTimer returns a timer that fires when the clock reaches now+d.
func (c *ManualClock) NewTimer(d time.Duration) runtime.Timer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	c.start(t, d)
	return t
}

// AfterFunc calls f in its own goroutine when the clock reaches now+d.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) runtime.Timer {
	t := &manualTimer{c: c, f: f}
	c.start(t, d)
	return t
}

type manualTimer struct {
	c  *ManualClock
	at time.Time
	ch chan time.Time
	f  func()
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, pending := t.c.timers[t]
	delete(t.c.timers, t)
	return pending
}

func (t *manualTimer) Reset(d time.Duration) bool {
	pending := t.Stop()
	t.c.start(t, d)
	return pending
}

// FillIdle opens n connections of db at once and leaves them idle in its
// pool (db must allow n open and idle connections): a test then cuts them
// all with a proxy fault, as a blackhole kills the idle connections of a
// real pool.
func FillIdle(t testing.TB, db *sql.DB, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.Exec("SELECT SLEEP(0.2)")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, db.Stats().Idle, n)
}
