package main

import (
	"context"
	"testing"

	"github.com/lockgen/lockgen/examples/internal/demodb"
	"github.com/lockgen/lockgen/examples/internal/exampletest"
	"github.com/lockgen/lockgen/examples/jobs/jobs/lockgendb"
	"github.com/lockgen/lockgen/runtime/driver/drivertest"
)

// TestGeneratedStoreMeetsTheDriverContract runs the runtime's driver
// conformance suite against the store lockgen generated for this example
// (table prefix jobsdemo_, migrations in migrations/), as its own user.
func TestGeneratedStoreMeetsTheDriverContract(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Stores {
		env, err := demodb.Setup(context.Background(), exampletest.FreshDSNs(t), []string{"jobsdemo_locks", "jobsdemo_runs"}, locksMigration, runsMigration)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Close() })
		db, err := demodb.Open(env.App)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s := lockgendb.NewStore(db)
		return drivertest.Stores{Store: s, Jobs: s}
	})
}
