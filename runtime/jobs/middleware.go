package jobs

import "context"

// Middleware wraps the Client's enqueues and its workers' attempts, for
// tracing: the lockgenotel module's Middleware starts a producer span
// around each enqueue, puts the span's trace context in the runs' Headers,
// and starts a consumer span linked to it around each attempt, in whatever
// process claims the run. Set it with WithMiddleware. Every method must
// call its next function exactly once, with the context given or one
// derived from it, and return what it returned: a Middleware that drops an
// error would lose an enqueue or misrecord an attempt.
type Middleware interface {
	// Enqueue wraps the insert of runs by Enqueue (one run) or by one
	// statement of EnqueueMany (up to MaxEnqueueBatch runs), after they
	// were checked. It may set the runs' Headers (the slice and its maps
	// are the Client's own copies; the headers must pass
	// driver.CheckHeaders, or the enqueue fails with ErrInvalid). Runs the
	// scheduler inserts for ticks do not pass through it.
	Enqueue(ctx context.Context, runs []NewRun, insert func(context.Context) error) error
	// Work wraps one attempt of run: work runs the handler (a panic in it
	// is already an error) and returns its error, which decides the
	// attempt's outcome (OutcomeOf tells which). ctx is the attempt's
	// context: cancelled at the run's timeout, when its lease may be lost
	// or when an operator cancels it.
	Work(ctx context.Context, run *Run, work func(context.Context) error) error
}

// WithMiddleware adds mw to the Client's middleware. The first one added
// is the outermost: it sees an enqueue or an attempt first and returns
// last. Nil is ignored.
func WithMiddleware(mw Middleware) ClientOption {
	return func(j *Client) {
		if mw != nil {
			j.middleware = append(j.middleware, mw)
		}
	}
}

// OutcomeOf is how an attempt of run ends when its handler returned err
// and ctx was its context (the context Middleware.Work was given): what
// the worker records and the Observer hears as Finished.
func OutcomeOf(ctx context.Context, run *Run, err error) Outcome {
	return outcomeOf(ctx, run, err)
}

// enqueueThrough inserts runs through the middleware, outermost first.
func (j *Client) enqueueThrough(ctx context.Context, runs []NewRun, insert func(context.Context) error) error {
	next := insert
	for i := len(j.middleware) - 1; i >= 0; i-- {
		mw, inner := j.middleware[i], next
		next = func(ctx context.Context) error { return mw.Enqueue(ctx, runs, inner) }
	}
	return next(ctx)
}

// workThrough runs an attempt of run through the middleware, outermost
// first.
func (j *Client) workThrough(ctx context.Context, run *Run, work func(context.Context) error) error {
	next := work
	for i := len(j.middleware) - 1; i >= 0; i-- {
		mw, inner := j.middleware[i], next
		next = func(ctx context.Context) error { return mw.Work(ctx, run, inner) }
	}
	return next(ctx)
}
