package runtime

import "time"

// AcquireResult is the outcome of one Try, Acquire or With call's attempt
// to get a lock, as reported to an Observer.
type AcquireResult string

// Acquire results. Their number is fixed, so they are safe metric labels.
const (
	AcquireAcquired AcquireResult = "acquired"
	AcquireBusy     AcquireResult = "busy"
	AcquireError    AcquireResult = "error"
)

// Observer receives the runtime's events, for metrics. Every method is
// called synchronously on the runtime's path and must be fast and safe for
// concurrent use. Arguments are bounded: lock names and strategies, never
// keys or owners. See the lockgenprom module for a Prometheus Observer.
type Observer interface {
	// Acquired reports the end of an acquisition (Try, Acquire or With):
	// its result and how long it took, waiting included.
	Acquired(lock string, strategy Strategy, result AcquireResult, took time.Duration)
	// Released reports a lease's end by Release, with how long it was held.
	Released(lock string, strategy Strategy, held time.Duration)
	// RenewFailed reports a renewal that failed without proving the lease
	// lost (a network or server error); the lease may still be held.
	RenewFailed(lock string, strategy Strategy)
	// LeaseLost reports a lease that ended before its holder released it.
	LeaseLost(lock string, strategy Strategy)
	// LeaderChanged reports this client becoming (true) or ceasing to be
	// (false) the leader of lock.
	LeaderChanged(lock string, leader bool)
}

// NopObserver ignores every event; it is the default Observer.
type NopObserver struct{}

// Acquired implements Observer.
func (NopObserver) Acquired(string, Strategy, AcquireResult, time.Duration) {}

// Released implements Observer.
func (NopObserver) Released(string, Strategy, time.Duration) {}

// RenewFailed implements Observer.
func (NopObserver) RenewFailed(string, Strategy) {}

// LeaseLost implements Observer.
func (NopObserver) LeaseLost(string, Strategy) {}

// LeaderChanged implements Observer.
func (NopObserver) LeaderChanged(string, bool) {}
