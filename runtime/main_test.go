package runtime_test

import (
	"bufio"
	"database/sql"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testgen/lockgendb"
)

// TestMain fails the package if any goroutine (a renewal loop, a watchdog)
// outlives the tests. The driver's and the runtime's expected warnings are
// silenced: fault tests provoke them on purpose. When started as a leader
// child process (see TestKilledLeaderProcessIsReplaced) it runs that instead.
func TestMain(m *testing.M) {
	if os.Getenv(leaderChildEnv) != "" {
		os.Exit(runLeaderChild())
	}
	if os.Getenv(workerChildEnv) != "" {
		os.Exit(runWorkerChild())
	}
	if os.Getenv(frozenChildEnv) != "" {
		os.Exit(runFrozenChild())
	}
	if os.Getenv(busyChildEnv) != "" {
		os.Exit(runBusyChild())
	}
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	goleak.VerifyTestMain(m)
}

// startChild starts this test binary again as a child process in the mode
// that env selects, connecting to dsn, and returns it with its standard
// output; the child is killed when the test ends.
func startChild(t *testing.T, env, dsn string) (*exec.Cmd, *bufio.Reader) {
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

// childLock is the lock cfg of a child process's Client (see childClient).
func childLock(env string, cfg runtime.LockConfig) (*runtime.Lock, error) {
	client, _, err := childClient(env)
	if err != nil {
		return nil, err
	}
	return client.Lock(cfg)
}

// childClient is the Client of a child process (owner "child") on the DSN in
// the environment variable env.
func childClient(env string) (*runtime.Client, lockgendb.Store, error) {
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
