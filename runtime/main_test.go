package runtime_test

import (
	"io"
	"log"
	"log/slog"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestMain fails the package if any goroutine (a renewal loop, a watchdog)
// outlives the tests. The driver's and the runtime's expected warnings are
// silenced: fault tests provoke them on purpose. When started as a leader
// child process (see TestKilledLeaderProcessIsReplaced) it runs that instead.
func TestMain(m *testing.M) {
	if os.Getenv(leaderChildEnv) != "" {
		os.Exit(runLeaderChild())
	}
	if os.Getenv(frozenChildEnv) != "" {
		os.Exit(runFrozenChild())
	}
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	goleak.VerifyTestMain(m)
}

// childLock is the lock cfg of a child process's Client (see childClient).
func childLock(env string, cfg runtime.LockConfig) (*runtime.Lock, error) {
	client, _, err := testkit.ChildClient(env)
	if err != nil {
		return nil, err
	}
	return client.Lock(cfg)
}
