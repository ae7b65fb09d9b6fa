// Package goldencase sets up the generator's golden test cases as projects
// for tests of the generator and of the CLI.
package goldencase

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Project copies the spec (lockgen.yaml) and go.mod of the golden case name
// under dir into a fresh temporary directory and returns the spec's path
// there.
func Project(t *testing.T, dir, name string) string {
	t.Helper()
	tmp := t.TempDir()
	for _, f := range []string{"lockgen.yaml", "go.mod"} {
		data, err := os.ReadFile(filepath.Join(dir, name, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tmp, f), data, 0o644))
	}
	return filepath.Join(tmp, "lockgen.yaml")
}
