package runtime

import (
	"context"
	"database/sql"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// hedged is the answer of one of hedge's attempts.
type hedged[T any] struct {
	v   T
	err error
	// sent is when hedge sent its first attempt, by the runtime's clock,
	// whichever attempt answered: a lease renewed by it runs from then. An
	// attempt that did not answer first, or failed, may still run on the
	// server after the one that answered, and write an expiry from its own
	// start, which is no earlier than the first attempt's send. The
	// answer's own send time would allow more: a renewal whose statement
	// stalled on the server after it started could then cut the expiry
	// the later one wrote below the holder's local deadline.
	sent time.Time
	// second says the second attempt answered.
	second bool
}

// hedge runs first, and runs second as well when first has not answered
// within after or failed: the first success wins, and the attempt still in
// flight is cancelled (the driver closes its connection) and left to
// return on its own, into a buffer that keeps it from blocking. When both
// fail, the first error is returned. Both attempts end with ctx.
//
// It is how a renewal outlives a dead connection. After a blackhole or a
// partition heals, the statement in flight and every connection that was
// idle in the pool are dead, and the pool hands idle connections out
// first: a single attempt bounded by the time left of the lease spends it
// all on one dead connection, and the lease is lost although a retry on a
// live connection would have kept it. So a first attempt that is slow
// drops the pool's dead idle connections (driver.ProbeIdle, within half of
// after) and the second runs on a live one, while a slow but live first
// attempt may still win: nothing is cut that the lease could still wait
// for. Both renewals are safe to run together: each extends only the
// holding whose owner and token it names, and the local deadline runs from
// the first attempt's send, which neither attempt's expiry can come before
// (see hedged.sent).
func hedge[T any](ctx context.Context, clock Clock, db *sql.DB, after time.Duration, first, second func(context.Context) (T, error)) hedged[T] {
	results := make(chan hedged[T], 2)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := clock.Now()
	run := func(f func(context.Context) (T, error), isSecond bool) {
		v, err := f(ctx)
		results <- hedged[T]{v: v, err: err, sent: sent, second: isSecond}
	}
	go run(first, false)
	pending := 1
	var failed *hedged[T]
	t := clock.NewTimer(after)
	select {
	case r := <-results:
		t.Stop()
		pending--
		if r.err == nil || ctx.Err() != nil {
			return r
		}
		failed = &r
	case <-t.C():
		pctx, pcancel := context.WithTimeout(ctx, max(after/2, time.Millisecond))
		driver.ProbeIdle(pctx, db)
		pcancel()
	}
	if ctx.Err() == nil {
		go run(second, true)
		pending++
	}
	for ; pending > 0; pending-- {
		r := <-results
		if r.err == nil {
			return r // the deferred cancel ends the other attempt
		}
		if failed == nil {
			failed = &r
		}
	}
	return *failed
}
