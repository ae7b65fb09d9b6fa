package chaos

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/lockgen/lockgen/runtime"
)

// SteppedClock is the real clock with a wall clock that can be stepped,
// the way NTP or an operator steps a machine's clock: Now's wall reading
// moves by the step, its monotonic reading does not. Durations measured
// with Sub across a step are therefore right, as they are with time.Now
// on a machine whose clock is stepped; code that reads the wall time (a
// schedule, a time sent to the database) sees the step.
type SteppedClock struct {
	runtime.SystemClock
	step atomic.Int64
}

// Step moves the wall clock by d, on top of earlier steps.
func (c *SteppedClock) Step(d time.Duration) { c.step.Add(int64(d)) }

// Now returns time.Now with the wall reading stepped.
func (c *SteppedClock) Now() time.Time {
	t := time.Now()
	d := time.Duration(c.step.Load())
	if d == 0 {
		return t
	}
	return wallShift(t, d)
}

// wallShift returns t with its wall reading moved by d and its monotonic
// reading kept. time.Time has no API for that (Add moves both), so it
// writes the monotonic reading back: time.Time is {wall uint64; ext int64;
// loc *Location}, and ext holds the monotonic reading when wall's top bit
// says there is one. Tests of this package check the result.
func wallShift(t time.Time, d time.Duration) time.Time {
	s := t.Add(d)
	const hasMonotonic = 1 << 63
	if *(*uint64)(unsafe.Pointer(&t))&hasMonotonic == 0 || *(*uint64)(unsafe.Pointer(&s))&hasMonotonic == 0 {
		return s
	}
	*(*int64)(unsafe.Add(unsafe.Pointer(&s), 8)) = *(*int64)(unsafe.Add(unsafe.Pointer(&t), 8))
	return s
}
