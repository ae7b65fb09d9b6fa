package chaos

import "time"

// RunRow is a row of the runs table as the checker reads it after a run.
type RunRow struct {
	ID    int64
	Job   string
	State string
	// Tick is a scheduled run's tick (UTC); zero otherwise.
	Tick time.Time
}

// Facts is what the checker reads besides the workers' histories: what
// the database holds at the end and what the controller saw.
type Facts struct {
	// Guarded are the tokens of the accepted guarded writes, in the
	// order the table's AUTO_INCREMENT gave them; RowWrites those of the
	// writes made in row holdings' transactions.
	Guarded, RowWrites []int64
	// Windows are the locks whose holders learn of a loss only after
	// the server dropped it, with how long after at most: a session
	// holder at its next check (the server frees a session lock the
	// moment the connection breaks). A negative window exempts a lock
	// from the checks of beliefs: a row holder learns at the release,
	// and its writes are checked instead (RowWrites).
	Windows map[string]time.Duration
	// Runs are the runs table's rows.
	Runs []RunRow
	// TickJob names the scheduled job, TickFrom and TickTo the window
	// (by the database clock) whose every tick must have run exactly
	// once: from a few ticks after the first worker started to the start
	// of the quiet phase.
	TickJob          string
	TickFrom, TickTo time.Time
	TickEvery        time.Duration
	// Singletons are the jobs whose runs must never overlap.
	Singletons []string
	// Stuck are the locks nobody could take within their TTL plus a
	// margin once every worker was dead, with what the attempt said.
	Stuck []string
	// Crashes are worker exits not caused by the controller (panics,
	// fatal errors, data races), with the output's first line.
	Crashes []string

	// PrunedTickJob names a scheduled job whose finished runs are pruned
	// after a minute while the run goes on: its ticks are checked by the
	// history (each ran as one run, and the window's every tick had a
	// handler call that returned nil), not by the table.
	PrunedTickJob string
	// OneAttempt are the jobs with a single attempt: their runs may end
	// discarded (or in any other finished state) when none of their
	// handler calls returned nil.
	OneAttempt []string
	// Lease is the workers' run lease.
	Lease time.Duration
	// Began is when the faults began (CLOCK_MONOTONIC).
	Began int64
	// Spans are the faults as they were applied (see Span).
	Spans []Span
	// Strands are the workers' transactions seen open for longer than
	// StrandBound, with their ages.
	Strands     []string
	StrandBound time.Duration
	// Locked are the unfinished runs that an open transaction held
	// locked at the end, once every worker was dead.
	Locked map[int64]bool
}

// Report is the checker's verdict.
type Report struct {
	// Counts counts events by kind, checks by result, and the sections,
	// handler calls and runs checked.
	Counts map[string]int
	// Violations are the safety and liveness violations found, each a
	// sentence naming the processes and times involved.
	Violations []string
}
