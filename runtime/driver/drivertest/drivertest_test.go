package drivertest_test

import (
	"testing"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/driver/drivertest"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestGeneratedStore runs the suite against the store lockgen generates for
// the default table prefix (runtime/internal/genstore), on a fresh database
// per subtest, as the least-privilege user applications use.
func TestGeneratedStore(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Store { return lockgendb.NewStore(testdb.New(t).Open(t)) })
	drivertest.RunJobs(t, func(t *testing.T) driver.JobStore { return lockgendb.NewStore(testdb.New(t).Open(t)) })
}
