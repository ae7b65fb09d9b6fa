module github.com/lockgen/lockgen/lockgenapi/dashboardtest

go 1.25

// github.com/lockgen/lockgen/runtime and …/lockgenapi come from the
// repository's go.work, as for lockgenapi and lockgenprom.

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/chromedp/chromedp v0.23.0
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-sql-driver/mysql v1.10.1
	github.com/stretchr/testify v1.12.1
)
