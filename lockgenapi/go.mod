module github.com/lockgen/lockgen/lockgenapi

go 1.24.0

// github.com/lockgen/lockgen/runtime is not required here: it is not
// published yet and comes from the repository's go.work (this module is in
// its use list), as for lockgenprom.
require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/stretchr/testify v1.12.1
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
