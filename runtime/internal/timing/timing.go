// Package timing holds the wait that lockgen's runtime and its jobs package
// share, written against their injectable clocks.
package timing

import (
	"context"
	"time"
)

// Timer is the part of a clock's timer that SleepOrWake uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// SleepOrWake waits for d on a timer from newTimer, a wake-up (woken may be
// nil), or the end of ctx, when it returns ctx's cause; otherwise nil.
func SleepOrWake[T Timer](ctx context.Context, newTimer func(time.Duration) T, d time.Duration, woken <-chan struct{}) error {
	t := newTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-woken:
	case <-t.C():
	}
	return nil
}
