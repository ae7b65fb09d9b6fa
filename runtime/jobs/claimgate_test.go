package jobs

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaimGate: one holder at a time; a worker that found the gate taken
// is always reported to the holder's leave (so it is woken), and a lone
// worker is never woken by its own claims.
func TestClaimGate(t *testing.T) {
	g := &claimGate{busy: make(chan struct{}, 1)}
	require.True(t, g.tryEnter())
	assert.False(t, g.leave(), "nobody skipped: no wake-up")

	require.True(t, g.tryEnter())
	assert.False(t, g.tryEnter(), "taken")
	assert.True(t, g.leave(), "the skipped worker is woken")
	require.True(t, g.tryEnter())
	assert.False(t, g.leave(), "the mark is cleared by the leave that reported it")

	// Many workers: never two inside, and after the last leave nobody is
	// left waiting for a wake-up that will not come.
	var inside, most atomic.Int32
	var skips, wakes atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				if !g.tryEnter() {
					skips.Add(1)
					continue
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inside.Add(-1)
				if g.leave() {
					wakes.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "one claimer at a time")
	assert.False(t, g.skipped.Load(), "a skip after the last leave would be lost")
	if skips.Load() > 0 {
		assert.Positive(t, wakes.Load(), "skips were reported")
	}
}
