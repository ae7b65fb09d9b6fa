package runtime

// RegenerateWithLockgenGenerateV12 is the compile-time version guard
// of generated code. Every package lockgen generates for this runtime refers
// to the newest (const _ = runtime.RegenerateWithLockgenGenerateV12), so
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
//
// V7: the generated ops.Config marks the lease locks whose waiters wait on
// the server (ops.Lock.WaitOnServer), so that the locks page counts them.
//
// V8: a session acquisition's first statement both waits in GET_LOCK and
// bounds the session (driver.SessionConn.BoundGetLock), and a release is
// one statement that leaves the row's session mark
// (driver.SessionConn.ReleaseClose). On MariaDB a GET_LOCK killed in that
// first statement can leave it answering as if acquired, so the token
// statement now checks that its connection holds the server-side lock
// (SessionConn.Token takes the lock name; SessionToken tests
// IS_USED_LOCK): V7 code, whose token statement does not, would be unsafe
// under this runtime, which therefore does not run V6 or V7 code.
//
// V9: driver.JobStore's RunsComplete never waits on a run's row that
// another transaction holds and reports such runs busy
// (driver.Completion), so that one held row keeps no other outcome of its
// batch unrecorded. V8 code, whose RunsComplete waits, does not fit the
// interface.
//
// V10: a session holding may take its fencing token from the lock row's
// reservation without a write (driver.SessionConn.TokenRead), which the
// generated store reads from the columns that migration 0006 adds and
// whose migration it names (driver.Target.LocksSessionMigration); the
// token statement arms the reservation (SessionConn.Token takes reserve),
// Guard checks a session holding by its connection
// (driver.Store.SessionGuard), and a row-strategy takeover disarms an
// armed reservation first (driver.SessionArmed, Store.SessionDisarm). V9
// code does not fit the interfaces.
//
// V11: driver.JobStore's RunsClaim takes the place to go on from
// (driver.RunCursor), which the generated claim statement reads the
// claim index from. V10 code does not fit the interface.
//
// V12: the renew statements (LeaseRenew, LeaseRenewMany) never move an
// expiry back, and the runtime reads the row again when a renewal renewed
// nothing instead of taking that as a loss. V11 code, whose renewals can
// write an earlier expiry after a later one (a statement that stalled on
// the server), would be unsafe under this runtime, which therefore does
// not run it.
const RegenerateWithLockgenGenerateV12 = true
