// Package ops is lockgen's operations layer: what an operator asks of a
// running lockgen deployment without writing SQL. It reads the leaders, the
// held locks, the queues with their counts by state, the schedules and the
// runs, pauses and resumes queues, and cancels and retries runs.
//
// One implementation serves every door: the HTTP/JSON API (package
// lockgenapi, mounted by an application or run by `lockgen serve`) and the
// operator commands of the lockgen CLI. Its SQL is rendered once, in New,
// for the deployment's table prefix.
//
// Every operation is bounded: each statement runs under Config.Timeout, a
// list returns at most MaxLimit items, and a count reads at most
// Config.CountCap index entries (a count at the cap is reported as not
// exact). Every read is a consistent read or a READ UNCOMMITTED look at the
// locks table: no read takes a lock, so an operator's status page never
// delays a worker. Writes are single statements on one row by primary key.
//
// Bad input (an unknown queue or job, a malformed cursor, a limit out of
// range) is an *Error whose Code is CodeInvalid and whose Field names the
// input; a missing run is CodeNotFound; a change a run's state does not
// allow is CodeConflict. Any other error is the database's, wrapped.
package ops
