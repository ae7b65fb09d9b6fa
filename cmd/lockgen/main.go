// Command lockgen generates typed Go wrappers, sqlc queries and SQL
// migrations for the distributed locks and jobs declared in lockgen.yaml.
//
// Run `go tool lockgen help` (as a tool dependency of your module) or
// `lockgen help` for usage.
package main

import (
	"os"

	"github.com/lockgen/lockgen/generator"
)

func main() {
	if code, ok := generator.RunSQLCChildIfRequested(); ok {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
