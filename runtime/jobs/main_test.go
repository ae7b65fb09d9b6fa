package jobs_test

import (
	"io"
	"log"
	"log/slog"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/runtime/driver"
)

// TestMain fails the package if any goroutine (a worker, a heartbeat, a
// handler) outlives the tests. The driver's and the jobs' expected warnings
// are silenced: fault tests provoke them on purpose. When started as a
// child process (see TestKilledWorkerProcessRunIsRescued and
// TestJobsWorkersUnderLoadDoNotDeadlock) it runs that instead.
func TestMain(m *testing.M) {
	if os.Getenv(workerChildEnv) != "" {
		os.Exit(runWorkerChild())
	}
	if os.Getenv(busyChildEnv) != "" {
		os.Exit(runBusyChild())
	}
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	goleak.VerifyTestMain(m)
}

// jobsStore is what a test's job node runs on: the generated store, or a
// wrapper of it that injects faults or counts statements.
type jobsStore = driver.JobStore
