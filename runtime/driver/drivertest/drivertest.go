// Package drivertest checks a driver.Store (and driver.JobStore) against
// the contract the runtime relies on, statement by statement, on a real
// server: fencing tokens that only rise, renew and release only by the
// holder, expiry by the database clock, the session and row strategies'
// connections, and the runs table's claims. Run checks the lock
// statements and RunJobs the job statements, so a store generated without
// jobs runs Run alone. The runtime's tests run both against the store
// lockgen generates for them (runtime/internal/genstore), and the jobs
// example against its own (table prefix jobsdemo_).
//
// It is for lockgen's own tests; it is not a stable API.
package drivertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
)

// Open returns a store of a database whose tables exist. It is called once
// per subtest, and subtests run in parallel; the names the suite uses are
// unique, so the stores may share a database.
type Open func(t *testing.T) driver.Store

// OpenJobs is Open for the job statements.
type OpenJobs func(t *testing.T) driver.JobStore

// Run runs every check of the lock statements as a subtest of t.
func Run(t *testing.T, open Open) {
	for name, test := range map[string]func(*testing.T, driver.Store){
		"Lease":         testLease,
		"LeaseExpiry":   testLeaseExpiry,
		"LeaseGuard":    testLeaseGuard,
		"LeaseBatch":    testLeaseBatch,
		"LeasePrune":    testLeasePrune,
		"Session":       testSession,
		"Reservation":   testSessionReservation,
		"TryReserved":   testSessionTryReserved,
		"LeaseTakeover": testLeaseTakeover,
		"Row":           testRow,
		"Server":        testServer,
	} {
		t.Run(name, func(t *testing.T) { t.Parallel(); test(t, open(t)) })
	}
}

// RunJobs runs every check of the job statements as a subtest of t.
func RunJobs(t *testing.T, open OpenJobs) {
	for name, test := range map[string]func(*testing.T, driver.JobStore){
		"Jobs": testJobs, "JobsRescue": testJobsRescue, "JobsOrphaned": testJobsOrphaned, "Queues": testQueues,
		"JobsDiscard": testJobsDiscard, "JobsCancelRunning": testJobsCancelRunning, "JobsCompleteSkipsHeldRows": testJobsCompleteSkipsHeldRows, "JobsOutcomesSkipHeldRows": testJobsOutcomesSkipHeldRows,
		"JobsClaimOrder": testJobsClaimOrder,
	} {
		t.Run(name, func(t *testing.T) { t.Parallel(); test(t, open(t)) })
	}
}

// seq makes lock names unique across the subtests of one process.
var seq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
}

func testServer(t *testing.T, s driver.Store) {
	target := s.Server()
	require.NotNil(t, target.DB)
	assert.NotEmpty(t, target.LocksTable)
	assert.NotEmpty(t, target.Migrations)
	assert.NotEmpty(t, s.SessionNamespace())
	galera, err := s.ServerGalera(context.Background())
	if err == nil { // MySQL has no wsrep_on: the runtime reads the error as "not Galera"
		assert.False(t, galera, "the test server is no Galera node")
	}
}
