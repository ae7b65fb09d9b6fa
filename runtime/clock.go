package runtime

import "time"

// Clock is the client's clock. The runtime uses it only to measure
// durations (local lease deadlines, waits, backoff); expiry itself is decided
// by the database clock. Tests inject clocks to prove that a skewed client
// clock changes nothing.
type Clock interface {
	// Now returns the current time. Only differences between two Now values
	// are used, so a constant offset has no effect.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer the runtime uses.
type Timer interface {
	// C is the channel the timer fires on (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it already fired or stopped.
	Stop() bool
	// Reset changes the timer to fire after d, whether it is pending,
	// fired or stopped: the runtime moves a lease's pending watchdog
	// with each renewal.
	Reset(d time.Duration) bool
}

// SystemClock is the real clock (time.Now, monotonic readings included).
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (SystemClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
