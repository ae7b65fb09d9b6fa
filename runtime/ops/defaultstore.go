//go:build !lockgen_bootstrap

package ops

import (
	"database/sql"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
)

// defaultStore is the store lockgen generates for the default table
// prefix, on db: what New consumes with when Config.Store is nil.
func defaultStore(db *sql.DB) driver.JobStore { return lockgendb.NewStore(db) }
