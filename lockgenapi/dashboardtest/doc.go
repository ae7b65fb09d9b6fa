// Package dashboardtest tests the dashboard of package lockgenapi as people
// see it: in a real headless Chromium, against `lockgen serve` as a
// process, on a deployment whose locks and runs real workers made. It is a
// module of its own so that the browser driver (chromedp) is nobody else's
// dependency; its tests are all there is.
package dashboardtest

//go:generate go run github.com/lockgen/lockgen/cmd/lockgen generate
