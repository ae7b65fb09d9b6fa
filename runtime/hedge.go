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
	// sent is when the attempt was sent, by the runtime's clock: a lease
	// it renewed runs from then.
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
// holding whose owner and token it names, neither moves the local
// deadline past what its own send time allows, and the renew statements
// never move an expiry back, so the slower one, even if it writes after
// the answer, cannot cut the expiry the answer's deadline counts on.
func hedge[T any](ctx context.Context, clock Clock, db *sql.DB, after time.Duration, first, second func(context.Context) (T, error)) hedged[T] {
	results := make(chan hedged[T], 2)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := func(f func(context.Context) (T, error), isSecond bool) {
		sent := clock.Now()
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
