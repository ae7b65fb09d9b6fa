package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSteppedClockMovesTheWallNotTheMonotonicReading(t *testing.T) {
	var c SteppedClock
	before := c.Now()
	c.Step(-time.Hour)
	after := c.Now()
	// Wall: an hour back (give or take the time between the two reads).
	require.InDelta(t, float64(-time.Hour), float64(after.Round(0).Sub(before.Round(0))), float64(time.Second))
	// Monotonic: forward, a few microseconds.
	require.GreaterOrEqual(t, after.Sub(before), time.Duration(0))
	require.Less(t, after.Sub(before), time.Second)
	// A deadline taken before the step passes on time after it.
	deadline := before.Add(20 * time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	require.False(t, c.Now().Before(deadline))
	c.Step(2 * time.Hour)
	require.InDelta(t, float64(time.Hour), float64(c.Now().Round(0).Sub(time.Now().Round(0))), float64(time.Second))
	require.Less(t, c.Now().Sub(before), time.Second)
}
