package generator

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the sqlc child process that
// Generate starts (Options.SQLCExe defaults to os.Executable()).
func TestMain(m *testing.M) {
	if code, ok := RunSQLCChildIfRequested(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
