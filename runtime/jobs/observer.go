package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// Outcome is how a handler's attempt ended, as reported to an Observer.
type Outcome string

// Attempt outcomes. Their number is fixed, so they are safe metric labels.
const (
	// OutcomeCompleted: the handler returned nil.
	OutcomeCompleted Outcome = "completed"
	// OutcomeFailed: it failed with attempts left; the run is retried.
	OutcomeFailed Outcome = "failed"
	// OutcomeDiscarded: it failed on its last attempt, or for good
	// (Permanent, arguments that do not decode).
	OutcomeDiscarded Outcome = "discarded"
	// OutcomeSnoozed: it snoozed the run (Snooze), or a singleton's lock
	// was held elsewhere.
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeCancelled: an operator cancelled the run while it ran.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeLost: the run's lease may have been lost (no heartbeat in
	// time, or the run was rescued): its outcome is the next attempt's.
	OutcomeLost Outcome = "lost"
)

// Observer receives the jobs' events, for metrics, like the lock
// runtime's runtime.Observer: a runtime.Observer given to the lock client
// (runtime.WithObserver, the generated WithObserver) that also implements
// Observer receives these too (lockgenprom's does). Every method is called
// synchronously on the worker's path and must be fast and safe for
// concurrent use. Arguments are bounded: job and queue names, attempt
// numbers, never arguments or IDs.
type Observer interface {
	// Enqueued reports n runs of job inserted into queue (an enqueue
	// that answered an existing run of the same unique key or tick
	// counts too).
	Enqueued(job, queue string, n int)
	// Claimed reports n runs of queue claimed by this node's worker.
	Claimed(queue string, n int)
	// Started reports a handler starting an attempt, lateness after the
	// run was due (this node's clock against the run's due time by the
	// database's).
	Started(job, queue string, attempt int, lateness time.Duration)
	// Finished reports a handler's attempt ending, with how it ended and
	// how long it ran. The outcome is what the worker records (a record
	// that fails is retried; one that arrives after a rescue matches
	// nothing).
	Finished(job, queue string, attempt int, outcome Outcome, took time.Duration)
	// Rescued reports n runs of stopped workers made due again or
	// orphaned by this node's rescuer.
	Rescued(n int)
}

// NopObserver ignores every event; it is the default Observer.
type NopObserver struct{}

// Enqueued implements Observer.
func (NopObserver) Enqueued(string, string, int) {}

// Claimed implements Observer.
func (NopObserver) Claimed(string, int) {}

// Started implements Observer.
func (NopObserver) Started(string, string, int, time.Duration) {}

// Finished implements Observer.
func (NopObserver) Finished(string, string, int, Outcome, time.Duration) {}

// Rescued implements Observer.
func (NopObserver) Rescued(int) {}

// WithObserver sets the Client's Observer, instead of the lock client's
// observer when that implements Observer. A nil obs is ignored.
func WithObserver(obs Observer) ClientOption {
	return func(j *Client) {
		if obs != nil {
			j.obs = obs
		}
	}
}

// outcomeOf classifies a finished attempt of r: its handler returned err,
// and ctx was its context.
func outcomeOf(ctx context.Context, r *Run, err error) Outcome {
	if err == nil {
		return OutcomeCompleted
	}
	cause := context.Cause(ctx)
	switch _, snooze := snoozed(err, func(time.Duration) time.Duration { return 0 }); {
	case snooze:
		return OutcomeSnoozed
	case errors.Is(cause, ErrCancelled):
		return OutcomeCancelled
	case errors.Is(cause, runtime.ErrLeaseLost):
		return OutcomeLost
	case IsPermanent(err) || r.Attempt >= r.MaxAttempts:
		return OutcomeDiscarded
	}
	return OutcomeFailed
}
