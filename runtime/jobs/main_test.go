package jobs_test

import (
	"testing"

	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestMain runs the tests (failing the package if a worker, a heartbeat or
// a handler outlives them), or a child process's mode (see
// TestKilledWorkerProcessRunIsRescued and
// TestJobsWorkersUnderLoadDoNotDeadlock).
func TestMain(m *testing.M) {
	testkit.Main(m, map[string]func() int{workerChildEnv: runWorkerChild, busyChildEnv: runBusyChild})
}
