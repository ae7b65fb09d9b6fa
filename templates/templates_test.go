package templates

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite ../queries from the templates")

// TestQueriesMatchTemplates proves that queries/ (compiled by sqlc for the
// runtime's tests) is exactly what the templates render for the default
// table prefix. `go test ./templates -update` rewrites it.
func TestQueriesMatchTemplates(t *testing.T) {
	for _, name := range []string{Schema, Queries} {
		got, err := Render(name, Data{Header: Header, Prefix: "lockgen_", Jobs: true})
		require.NoError(t, err)
		path := filepath.Join("..", "queries", name)
		if *update {
			require.NoError(t, os.WriteFile(path, got, 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%s is stale: run `make generate`", path)
	}
}

func TestRenderEveryTemplate(t *testing.T) {
	for _, name := range []string{Schema, Queries, LocksUp, LocksDown, GooseLocks} {
		got, err := Render(name, Data{Header: Header, Prefix: "acme_"})
		require.NoError(t, err, name)
		s := string(got)
		assert.Contains(t, s, "-- "+Header, name)
		assert.Contains(t, s, "acme_locks", name)
		assert.NotContains(t, s, "lockgen_locks", name)
		assert.NotContains(t, s, "{{", name)
		assert.NotContains(t, s, "UTC_TIMESTAMP(6)", "sqlc's catalog rejects UTC_TIMESTAMP(6); use the utc_now template")
	}
	up, err := Render(GooseLocks, Data{Header: Header, Prefix: "acme_"})
	require.NoError(t, err)
	assert.Less(t, strings.Index(string(up), "-- +goose Up"), strings.Index(string(up), "-- +goose Down"))
}

func TestRenderUnknownTemplate(t *testing.T) {
	_, err := Render("nope.sql", Data{Header: Header, Prefix: "x_"})
	require.Error(t, err)
}

func TestRenderRunsTemplates(t *testing.T) {
	for _, name := range []string{QueuesUp, QueuesDown, GooseQueues} {
		got, err := Render(name, Data{Header: Header, Prefix: "acme_"})
		require.NoError(t, err, name)
		s := string(got)
		assert.Contains(t, s, "-- "+Header, name)
		assert.Contains(t, s, "acme_queues", name)
		assert.NotContains(t, s, "lockgen_", name)
		assert.NotContains(t, s, "acme_runs", name, "the queues migration leaves the runs table alone")
		assert.NotContains(t, s, "acme_locks", name)
	}
	for _, name := range []string{RunsUp, RunsDown, GooseRuns} {
		got, err := Render(name, Data{Header: Header, Prefix: "acme_"})
		require.NoError(t, err, name)
		s := string(got)
		assert.Contains(t, s, "-- "+Header, name)
		assert.Contains(t, s, "acme_runs", name)
		assert.NotContains(t, s, "lockgen_", name)
		assert.NotContains(t, s, "acme_locks", name, "the runs migration leaves the lock table alone")
		assert.NotContains(t, s, "acme_queues", name, "and the queues table, which migration 3 creates")
	}
	for _, jobs := range []bool{false, true} {
		for _, name := range []string{Schema, Queries} {
			got, err := Render(name, Data{Header: Header, Prefix: "acme_", Jobs: jobs})
			require.NoError(t, err)
			assert.Equal(t, jobs, strings.Contains(string(got), "acme_runs"), "%s with Jobs=%v", name, jobs)
		}
	}
}
