module github.com/lockgen/lockgen/examples

go 1.26.0

// github.com/lockgen/lockgen/runtime and .../lockgenprom come from the
// repository's go.work.
require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/prometheus/client_golang v1.23.2
	github.com/stretchr/testify v1.12.1
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
