// Command lockgen generates typed Go wrappers, sqlc queries and SQL
// migrations for the distributed locks declared in lockgen.yaml.
//
// Run `lockgen help` for usage.
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
