package runtime_test

import (
	"testing"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestMain runs the tests (failing the package if a renewal loop or a
// watchdog outlives them), or a child process's mode: a leader (see
// TestKilledLeaderProcessIsReplaced) or a frozen holder.
func TestMain(m *testing.M) {
	testkit.Main(m, map[string]func() int{leaderChildEnv: runLeaderChild, frozenChildEnv: runFrozenChild})
}

// childLock is the lock cfg of a child process's Client (see childClient).
func childLock(env string, cfg runtime.LockConfig) (*runtime.Lock, error) {
	client, _, err := testkit.ChildClient(env)
	if err != nil {
		return nil, err
	}
	return client.Lock(cfg)
}
