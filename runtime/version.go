package runtime

// RegenerateWithLockgenGenerateV6 and V7 are the compile-time version guards
// of generated code. Every package lockgen generates for this runtime refers
// to the newest (const _ = runtime.RegenerateWithLockgenGenerateV7), so
// generated code and a runtime that do not fit together fail to build with
// "undefined: runtime.RegenerateWithLockgenGenerate…" instead of failing at
// run time: the generated package and this module come from different
// lockgen versions, and the fix is to run `go tool lockgen generate` with the
// lockgen of the runtime's version (or to require the runtime of the tool's).
//
// When a change makes the runtime unable to run code generated before it,
// or the generator emit code that an older runtime cannot run, add the next
// version, make the generator refer to it, and delete the versions whose
// generated code this runtime no longer runs.
//
// V2: LeaseAcquire and RowTake report a session holding as
// driver.SessionHeld (1), which a V1 runtime would take for a token, and
// the generated store has LeaseTakeover and RowTx.Takeover.
//
// V3: LeaseTakeover and RowTx.Takeover take the session holding's GET_LOCK
// name from the runtime (sessionLock) instead of computing it in SQL from
// the stored row; a session holding's pinned connection bounds its idle
// time on the server (driver.SessionConn.BoundIdle); and the generated
// store names the migration of each table (driver.Target.LocksMigration
// and RunsMigration).
//
// V4: driver.JobStore has the queue statements (QueuePause, QueueResume,
// QueuesPaused, QueuesList, RunsQueues) and the generated store names the
// queues table and its migration (driver.Target.QueuesTable,
// QueuesMigration), which the jobs need.
//
// V5: driver.JobStore has RunDiscard (a handler's permanent error), the
// heartbeat reads a cancelled run (driver.HeartbeatRow.Cancelled), and
// RunCancel cancels a running run too. This runtime does not run V4 code.
//
// V6: the runs carry headers (driver.NewRun.Headers, Run.Headers: trace
// context), which the generated store writes and reads in the headers
// column that migration 0005 adds and whose migration it names
// (driver.Target.HeadersMigration); the generated package has WithTracer.
// This runtime requires that column, which V5 code has no migration for,
// so it does not run V5 code.
const RegenerateWithLockgenGenerateV6 = true

// V7: the generated ops.Config marks the lease locks whose waiters wait on
// the server (ops.Lock.WaitOnServer), so that the locks page counts them.
// This runtime still runs V6 code (its locks page then counts no waiter of
// a lease lock).
const RegenerateWithLockgenGenerateV7 = true
