package runtime

import (
	"context"
	"fmt"
)

// Tracer hears of lock waits and holdings with their contexts, for tracing
// (the lockgenotel module's Tracer starts a span for each). Set it with
// WithTracer. Its methods are called synchronously on the caller's path
// and must be fast and safe for concurrent use; the functions they return
// are called exactly once each.
//
// A Tracer that also implements the jobs package's Middleware is the jobs
// Client's middleware too (jobs.NewClient finds it here), so one option
// traces locks and jobs.
type Tracer interface {
	// Acquiring is called as an acquisition of lock for key starts (Try,
	// Acquire, and the With and singleton jobs built on them; not a leader
	// campaign's attempts, whose busy polls would be noise), once the key
	// and the server are checked. The function it
	// returns is called when the acquisition ends: with the lease's
	// fencing token when it was acquired, else with the error (one
	// wrapping ErrNotAcquired when the lock stayed busy). The
	// acquisition's statements run with ctx, not with a context of the
	// Tracer's.
	Acquiring(ctx context.Context, lock, key string, strategy Strategy) func(token int64, err error)
	// Holding is called when a lease of lock for key was acquired with
	// token, with the acquiring caller's ctx. With runs its fn with the
	// context it returns (or one derived from it). The function it
	// returns is called when the holding ends, by Release, with Release's
	// error: nil, or one wrapping ErrLeaseLost when the lease was lost
	// before it was released.
	Holding(ctx context.Context, lock, key string, strategy Strategy, token int64) (context.Context, func(err error))
}

// NopTracer traces nothing; it is the default Tracer.
type NopTracer struct{}

// Acquiring implements Tracer.
func (NopTracer) Acquiring(context.Context, string, string, Strategy) func(int64, error) {
	return func(int64, error) {}
}

// Holding implements Tracer.
func (NopTracer) Holding(ctx context.Context, _, _ string, _ Strategy, _ int64) (context.Context, func(error)) {
	return ctx, func(error) {}
}

// WithTracer sets the Tracer of lock waits and holdings (and, when it
// implements the jobs package's Middleware, of enqueues and attempts).
// Default: NopTracer.
func WithTracer(t Tracer) Option {
	return func(o *clientOptions) error {
		if t == nil {
			return fmt.Errorf("%w: nil tracer", ErrInvalid)
		}
		o.tracer = t
		return nil
	}
}

// Tracer returns the client's Tracer (NopTracer when none was set): the
// jobs Client uses it as its middleware when it implements that.
func (c *Client) Tracer() Tracer { return c.tracer }

// traceAcquire starts tracing an acquisition of key; the function it
// returns ends it and, on success, starts the holding's trace.
func (l *Lock) traceAcquire(ctx context.Context, key string) func(*Lease, error) {
	t := l.client.tracer
	if _, nop := t.(NopTracer); nop {
		return func(*Lease, error) {}
	}
	end := t.Acquiring(ctx, l.cfg.Name, key, l.cfg.Strategy)
	return func(lease *Lease, err error) {
		if err != nil || lease == nil {
			end(0, err)
			return
		}
		end(lease.Token(), nil)
		lease.traceCtx, lease.traceEnd = t.Holding(ctx, l.cfg.Name, key, l.cfg.Strategy, lease.Token())
	}
}
