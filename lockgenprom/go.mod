module github.com/lockgen/lockgen/lockgenprom

go 1.24.0

// github.com/lockgen/lockgen/runtime comes from the repository's go.work.
require (
	github.com/prometheus/client_golang v1.23.2
	github.com/stretchr/testify v1.12.1
)
