// Package jobs runs typed jobs on the runs table: enqueueing, workers that
// claim and execute runs, the scheduler of periodic jobs, and pruning.
// Applications use it through the package lockgen generates (RunJobs, the
// Enqueue methods, JobRun, CancelRun, RetryRun), which re-exports the names
// they need; this package is what that code calls.
//
// Every run is a row. Its parts, one small type each, follow River's split:
//
//   - Client (client.go): enqueues runs (in the caller's transaction when
//     given one), reads, cancels and retries them, and wakes this node's
//     workers on a local enqueue; it pauses and resumes queues and keeps
//     the node's view of the paused queues (queues.go).
//   - claimer (claimer.go): claims due runs of a queue with SELECT … FOR
//     UPDATE SKIP LOCKED, in batches, one worker of a node at a time (the
//     claim gate), going on from where the node's last claim stopped
//     (driver.RunCursor) and from the first due run at least every four
//     PollMin, unless the queue is paused, and keeps the idle poll.
//   - executor (executor.go): runs each claimed run's handler in its own
//     goroutine, under the run's timeout and its run lease (runlease.go).
//   - heartbeater (heartbeat.go): extends the deadlines of the runs a worker
//     holds, and tells a handler at once when its run was rescued.
//   - completer (completer.go): records outcomes, completions in batches,
//     retrying while the database is unreachable.
//   - rescuer (rescuer.go): makes the runs of dead workers due again, or
//     orphans them when they were on their last attempt.
//   - Scheduler (scheduler.go): inserts the ticks of scheduled jobs.
//   - pruner (pruner.go): deletes finished runs after their retention.
//   - Worker (worker.go) ties a queue's claimer, executor, heartbeater,
//     rescuer and completer together; RunNode (node.go) starts a node's
//     workers, scheduler and pruner.
//
// A worker's loop claims runs into the executor, hands their outcomes to
// the completer and rescues on its timer. After a claim that took its
// whole limit, it gathers free slots (up to half a batch, for at most
// ClaimGather) before the next claim. The heartbeater and the
// completer each run in a goroutine of their own, so nothing else the
// worker does (a claim or a rescue stuck on a dead pooled connection or
// waiting on a row lock, a slow completion) stands between two
// heartbeats. The heartbeater
// reads the attempts being handled from the executor and the outcomes not
// recorded yet from the completer; an outcome reaches the completer before
// it leaves the executor, so every claimed run is in one of the two until
// its outcome is recorded.
//
// # What a claim guarantees
//
// A claim marks a run running, by one worker, until a deadline set by the
// database clock (now + Lease), and bumps the run's claim counter, which is
// never reset. Every later change of a running run (heartbeat, completion,
// failure, give-back) names the run and its claim, and changes nothing when
// the claim is no longer the run's: a worker whose run was rescued and
// claimed again cannot overwrite the new attempt's outcome, and a rescue
// cannot undo a completion that committed first. Two workers never hold
// the same claim: the claiming statement locks the rows it takes. A claim
// whose connection is partitioned before its COMMIT holds those row locks
// only until the server ends the silent session, about one Lease plus
// two seconds after the claim began (driver.InTx), not for the server's
// wait_timeout.
//
// # When a run may run twice
//
// Delivery is at least once. A run is executed again, as a new attempt,
// when its worker's heartbeats stop reaching the database for a whole Lease
// (the worker died, was paused, or lost its connection) and a rescuer makes
// it due again; when its handler finished but the outcome could not be
// recorded before the worker stopped; or when the handler failed and the
// run has attempts left. A run on its last attempt is not run again by a
// rescue: once that attempt's deadline and timeout have passed, it is
// orphaned (RunOrphaned), claimed by nobody, and the late outcome of that
// attempt is still recorded when it arrives; only an operator's Retry runs
// it again (twice, if the attempt had succeeded and its outcome arrives
// after the retry). The handler of a run that may be rescued learns
// it first: its context ends, with a cause wrapping runtime.ErrLeaseLost,
// before the run's deadline in the database passes (see JobFunc). A
// handler that ignores its context may overlap with the new attempt, so
// handlers should be idempotent, keyed by Run.ID and Run.Attempt.
//
// # Pauses
//
// A paused queue (PauseQueue) has none of its runs claimed by any node
// whose claim is sent more than one PollMax after the pause committed: the
// claimer asks the node's view of the paused queues before each claim,
// and the view is a read of the queues table that takes no lock, sent at
// most PollMax earlier (and after this Client's own last pause or resume).
// The view is never read inside the claim's transaction. Runs already
// running finish, and their heartbeats and outcomes go on; a view that
// cannot be read claims nothing. A resume is seen within PollMax (plus
// PollMin of jitter) on every node, at once on the node that resumed.
//
// # Ticks
//
// A scheduled tick has exactly one run cluster-wide: every node inserts it,
// keyed by job and tick, and the unique key makes every insert after the
// first a no-op. Ticks are computed by the database clock, survive restarts
// through the newest tick in the runs table, and missed ticks follow the
// job's CatchUp policy (see Scheduler, and catchup.go for the rule).
//
// Catch-up, whatever the cause (every node down, this node paused, or its
// inserts failing while the others ran), starts after the latest of this
// node's own position, the newest tick in the runs table and now minus the
// job's retention, and does not happen while the newest tick cannot be
// read: the other nodes may have run the missed ticks and pruning deleted
// them, so a tick older than the retention or at or before the newest tick
// is never inserted again. Live ticks (at most 5 s old) are safe because
// the node's pruner keeps finished runs for their retention (at least 5 s)
// plus 2 s. Every statement of the scheduler and of pruning is bounded (2
// s; 10 s per prune DELETE). A step of the database clock forward by d
// makes the ticks of d missed; a step back after it leaves ticks ahead of
// the clock, which ran early and are not run again, and the schedule goes
// on from the clock's time within 35 s and one tick on every node (see
// Scheduler).
//
// # Failures
//
// What cannot work fails at start, not later: every entry point checks
// the server once per Client (see Client.Enqueue), and RunNode returns a
// refusal at once instead of running without its workers. A run in the
// wrong queue for its job fails its attempt with an error naming the
// job's queue; due runs in a queue no worker of the node works are
// reported at WARN by RunNode (stranded.go).
//
// Database errors in the loops (claim, heartbeat, completion, rescue,
// scheduling, pruning) are logged and retried with backoff; they never
// stop a worker. Every statement is bounded below the lease: a heartbeat
// by Lease/6, a rescue by Lease/3, a claim by Lease/2 (with the claim from
// the first that follows one from a place that found nothing). A claim cut
// at its bound may have committed: its runs are started by no one and are rescued
// after their lease (at least once), and the runs a failed claim returned
// are never started. A deadlock or a lock wait timeout while recording an
// outcome is retried like a lost connection, never counted as a rejection. An outcome is kept until it is recorded; its run is
// heartbeated meanwhile, so it is not rescued and run again just because
// the database was briefly unreachable.
package jobs
