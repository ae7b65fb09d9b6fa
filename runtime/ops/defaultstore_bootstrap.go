//go:build lockgen_bootstrap

package ops

import (
	"database/sql"

	"github.com/lockgen/lockgen/runtime/driver"
)

// defaultStore is nil in the lockgen that `make generate` builds to
// regenerate the store itself (tag lockgen_bootstrap): that lockgen must
// build while the generated store is being rewritten. Such an Ops answers
// the consume operations CodeUnavailable unless Config.Store is set.
func defaultStore(*sql.DB) driver.JobStore { return nil }
