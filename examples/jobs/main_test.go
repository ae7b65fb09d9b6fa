package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/examples/internal/exampletest"
)

// TestJobs runs the example against the test server: every receipt was
// sent once (after one failed attempt each), and every tick ran once
// although three nodes schedule it.
func TestJobs(t *testing.T) {
	dsns := exampletest.FreshDSNs(t)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), dsns, 20, 3500*time.Millisecond, &out))
	m := regexp.MustCompile(`summary: (\d+) ticks, (\d+) ran more than once; (\d+) of 20 receipts sent`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	ticks, _ := strconv.Atoi(m[1])
	assert.GreaterOrEqual(t, ticks, 2, out.String())
	assert.Equal(t, "0", m[2], "no tick ran twice")
	assert.Equal(t, "20", m[3], "every receipt sent")
	assert.Len(t, regexp.MustCompile(`(?m)^node-\d sent receipt for order \d+ to \S+ \(attempt 2\)$`).FindAllString(out.String(), -1), 20,
		"each receipt sent once, on its second attempt")
	exampletest.RanAsItsOwnUser(t, dsns, out.String())
}
