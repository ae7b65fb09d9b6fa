package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyntaxErrorInALongSpec: past maxScanBytes of re-parsing, the
// offending line is found by bisection (yaml.v3 says line 3 here).
func TestSyntaxErrorInALongSpec(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\npackage: locks\nlocks:\n")
	const locks = 5000
	for i := range locks {
		fmt.Fprintf(&b, "  - name: l%d\n    ttl: 3s\n", i)
	}
	b.WriteString("   renew_every: 1s\n")
	_, err := Load("lockgen.yaml", []byte(b.String()))
	var list ErrorList
	require.True(t, errors.As(err, &list), "%v", err)
	require.Len(t, list, 1)
	assert.Equal(t, Pos{Line: 3 + 2*locks + 1, Col: 4}, list[0].Pos, list[0].Error())
	assert.Contains(t, list[0].Hint, "indented by 3 spaces")
}
