package jobs

import (
	"errors"
	"fmt"
	"time"
)

// ErrCancelled is the cause of a handler's context (context.Cause) when an
// operator cancelled its run while it ran (Client.Cancel, `lockgen cancel`,
// POST /api/v1/runs/{id}/cancel): the worker learns it at its next
// heartbeat, at most a third of the lease later. The run stays cancelled
// whatever the handler returns.
var ErrCancelled = errors.New("lockgen: run cancelled by an operator")

// MaxSnooze is the longest delay Snooze takes; a longer one is cut to it.
const MaxSnooze = 10 * 365 * 24 * time.Hour

// Permanent marks err, returned by a handler, as a failure that no further
// attempt can fix: the run is discarded at once with err's text, whatever
// attempts it has left. Permanent(nil) is nil. errors.Is and errors.As see
// through it to err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was made by
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Snooze, returned by a handler, gives its run back without counting the
// attempt: due again delay after the database clock (at once when delay is
// not positive; at most MaxSnooze). Use it for a run that cannot do its
// work yet (a resource not ready, a rate limit) rather than failing it and
// using up its attempts. A snooze that reaches the database after the run
// was rescued or cancelled changes nothing.
func Snooze(delay time.Duration) error {
	return &snoozeError{delay: min(max(delay, 0), MaxSnooze)}
}

type snoozeError struct{ delay time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("lockgen: snoozed for %s", e.delay) }

// snoozed returns the delay of a handler's Snooze, or of a singleton run
// whose lock was held elsewhere (SingletonRetry, jittered), and whether err
// is one.
func snoozed(err error, jitter func(time.Duration) time.Duration) (time.Duration, bool) {
	var s *snoozeError
	switch {
	case errors.As(err, &s):
		return s.delay, true
	case errors.Is(err, errSingletonBusy):
		return SingletonRetry/2 + jitter(SingletonRetry/2+1), true
	}
	return 0, false
}
