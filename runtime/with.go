package runtime

import (
	"context"
	"errors"
	"fmt"
)

// With acquires the lock for key (waiting as Acquire does), runs fn while
// holding it, and releases it when fn returns or panics (the panic goes on
// after the release). fn's context ends when ctx does, and is cancelled with
// cause ErrLeaseLost if the lease is lost while fn runs; the lease is renewed
// until fn returns. If the lease was lost, With returns an error that wraps
// ErrLeaseLost even if fn returned nil, because the critical section may not
// have been exclusive to its end. For a row lock, writes fn makes on
// lease.Tx() commit with the release when fn returns nil, and roll back
// when fn returns an error or panics.
//
// With is reentrant: called again inside fn with fn's context (or one
// derived from it), for the same lock and key on the same Client, it runs
// its fn within the holding it joins instead of waiting for itself; only
// the outermost With releases. Another Client is another node and waits.
func (l *Lock) With(ctx context.Context, key string, fn func(ctx context.Context, lease *Lease) error) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: nil fn for lock %q", ErrInvalid, l.cfg.Name)
	}
	key, err = l.checkKey(key)
	if err != nil {
		return err
	}
	if held, ok := ctx.Value(heldKey{l.client, l.cfg.Name, key}).(*Lease); ok && !errors.Is(held.Err(), ErrReleased) {
		// Reentrant call from inside fn: join the holding; the outer With
		// releases it. (A context kept after its holding was released
		// carries a stale lease: acquire anew then.)
		if err := held.Err(); err != nil {
			return err
		}
		inner, cancel := context.WithCancelCause(ctx)
		joinCtx := &heldContext{Context: inner, lease: held, cancel: cancel}
		stop := context.AfterFunc(held.ctx, func() { cancel(context.Cause(held.ctx)) })
		defer func() {
			stop()
			cancel(context.Canceled)
		}()
		return fn(joinCtx, held)
	}
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		return err
	}
	if lease.traceCtx != nil {
		ctx = lease.traceCtx // the caller's, with the holding's span
	}
	return runHolding(ctx, lease, fn)
}

// heldContext is the context With passes to fn: it ends with the caller's
// context and, with the lease's cause, with the lease. Like the lease's own
// context, its Err checks the lease's local deadline at the call, so fn's
// first check after a pause past the deadline reports the loss (the
// AfterFunc that propagates it may not have run yet); it cancels itself
// first, so Done is closed before Err is non-nil. It is used by pointer, so
// contexts compare as usual.
type heldContext struct {
	context.Context
	lease  *Lease
	cancel context.CancelCauseFunc
}

// Err implements context.Context.
func (c *heldContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.lease.view.Err() != nil {
		c.cancel(context.Cause(c.lease.ctx))
	}
	return c.Context.Err()
}

// heldKey is the context key under which With passes the lease it holds to
// fn, so that a nested With of the same Client, lock and key joins it.
type heldKey struct {
	client    *Client
	name, key string
}

// runHolding runs fn with a context that ends with ctx or, with cause
// ErrLeaseLost, with the lease; then it releases the lease, also when fn
// panics. The error is fn's joined with Release's (which wraps ErrLeaseLost
// if the lease was lost first), unless both report the loss: then fn's.
func runHolding(ctx context.Context, lease *Lease, fn func(ctx context.Context, lease *Lease) error) (err error) {
	inner, cancel := context.WithCancelCause(context.WithValue(ctx, heldKey{lease.lock.client, lease.id.Name, lease.id.Key}, lease))
	fnCtx := &heldContext{Context: inner, lease: lease, cancel: cancel}
	stop := context.AfterFunc(lease.ctx, func() { cancel(context.Cause(lease.ctx)) })
	returned := false
	defer func() {
		stop()
		cancel(context.Canceled)
		if !returned || err != nil {
			// fn panicked or failed: a row holding's writes (made on
			// lease.Tx()) roll back with it.
			lease.abortOnRelease()
		}
		// Runs on panic too; the panic then goes on with its stack intact.
		// When fn already returned the loss, Release's report of it adds
		// nothing.
		if rerr := lease.Release(ctx); rerr != nil && !(errors.Is(err, ErrLeaseLost) && errors.Is(rerr, ErrLeaseLost)) {
			err = errors.Join(err, rerr)
		}
	}()
	err = fn(fnCtx, lease)
	returned = true
	return err
}
