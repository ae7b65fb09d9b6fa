package testkit

import (
	"io"
	"log"
	"log/slog"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

// Main runs a test binary of the runtime's packages. When one of the
// environment variables in children is set, this process is a child that a
// test started (StartChild): it runs that child's function and exits with
// its code. Otherwise it silences the driver's and the default logger's
// expected warnings (fault tests provoke them on purpose), runs the tests
// and fails the binary if any goroutine (a renewal loop, a watchdog, a
// worker) outlives them.
func Main(m *testing.M, children map[string]func() int) {
	for env, run := range children {
		if os.Getenv(env) != "" {
			os.Exit(run())
		}
	}
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	goleak.VerifyTestMain(m)
}
