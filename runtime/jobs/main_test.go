package jobs_test

import (
	"testing"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestMain runs the tests (failing the package if a worker, a heartbeat or
// a handler outlives them), or a child process's mode (see
// TestKilledWorkerProcessRunIsRescued and
// TestJobsWorkersUnderLoadDoNotDeadlock).
func TestMain(m *testing.M) {
	testkit.Main(m, map[string]func() int{workerChildEnv: runWorkerChild, busyChildEnv: runBusyChild})
}

// jobsStore is what a test's job node runs on: the generated store, or a
// wrapper of it that injects faults or counts statements.
type jobsStore = driver.JobStore
