package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/examples/internal/exampletest"
)

// TestLeaderExample runs three nodes for six terms and checks the log: terms
// never overlap (each starts after the previous one ended), tokens
// increase, and the leader gauge is exported.
func TestLeaderExample(t *testing.T) {
	dsns := exampletest.FreshDSNs(t)
	var out bytes.Buffer
	reg := prometheus.NewRegistry()
	require.NoError(t, run(context.Background(), dsns, 3, 6, reg, &out))
	exampletest.RanAsItsOwnUser(t, dsns, out.String())

	re := regexp.MustCompile(`(?m)^node-\d (leads|stepped down|stopped|lost the lease) +token=(\d+)$`)
	lines := re.FindAllStringSubmatch(out.String(), -1)
	require.NotEmpty(t, lines, out.String())
	var last int64
	open := false
	terms := 0
	leaders := map[string]bool{}
	for _, m := range lines {
		token, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		if m[1] == "leads" {
			leaders[m[0][:6]] = true
			require.False(t, open, "a term started before the previous one ended:\n%s", out.String())
			assert.Greater(t, token, last)
			last, open = token, true
			terms++
			continue
		}
		require.True(t, open)
		assert.Equal(t, last, token)
		open = false
	}
	assert.False(t, open, "the last term ended")
	assert.GreaterOrEqual(t, terms, 6)
	n, err := testutil.GatherAndCount(reg, "lockgen_leader")
	require.NoError(t, err)
	assert.Equal(t, len(leaders), n, "one leader gauge per node that led")
}
