package runtime

import (
	"errors"

	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// Sentinel errors; test for them with errors.Is.
var (
	// ErrNotAcquired means the lock was held by someone else for the whole
	// time the caller was willing to wait, or every try lost to a
	// transient server error (a deadlock, a lock wait timeout, a cluster's
	// certification: the error also wraps the last of them).
	ErrNotAcquired = errors.New("lockgen: lock not acquired")
	// ErrLeaseLost means a lease ended before its holder released it: a
	// renewal did not succeed before the local deadline, or the database
	// showed the row expired or taken. It is the cause of the lease's
	// context and of the context passed to With's fn.
	ErrLeaseLost = errors.New("lockgen: lease lost")
	// ErrReleased is the cause of a lease's context after Release, and the
	// error of a second Release.
	ErrReleased = errors.New("lockgen: lease released")
	// ErrInvalid reports a misuse of the API (nil fn, empty key, bad config).
	ErrInvalid = errors.New("lockgen: invalid argument")
)

// IsTransient reports whether err is a server error after which the same
// autocommit statement can be retried at once: a deadlock (1213, also
// Galera's lost certification), a lock wait timeout (1205), or Group
// Replication's certification rollback (3101, or 1180 for the engine's
// deadlock during COMMIT). Each rolls the statement back entirely.
func IsTransient(err error) bool { return servererr.IsTransient(err) }
