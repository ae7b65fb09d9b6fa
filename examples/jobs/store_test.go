package main

import (
	"context"
	"testing"

	"github.com/lockgen/lockgen/examples/internal/demodb"
	"github.com/lockgen/lockgen/examples/internal/exampletest"
	"github.com/lockgen/lockgen/examples/jobs/jobs/lockgendb"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/driver/drivertest"
)

// TestGeneratedStoreMeetsTheDriverContract runs the runtime's driver
// conformance suite against the store lockgen generated for this example
// (table prefix jobsdemo_, migrations in migrations/), as its own user.
func TestGeneratedStoreMeetsTheDriverContract(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Store { return openStore(t) })
	drivertest.RunJobs(t, func(t *testing.T) driver.JobStore { return openStore(t) })
}

// openStore sets up a fresh database with the example's migrations and
// returns its store, connected as the example's own user.
func openStore(t *testing.T) lockgendb.Store {
	env, err := demodb.Setup(context.Background(), exampletest.FreshDSNs(t), []string{"jobsdemo_locks", "jobsdemo_runs", "jobsdemo_queues"}, locksMigration, runsMigration, queuesMigration, historyMigration, headersMigration, locksSessionMigration)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	db, err := demodb.Open(env.App)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return lockgendb.NewStore(db)
}
