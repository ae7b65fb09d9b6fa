package ops_test

import (
	"testing"

	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestMain fails the package if a goroutine outlives the tests.
func TestMain(m *testing.M) {
	testkit.Main(m, nil)
}
