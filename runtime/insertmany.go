package runtime

import (
	"strings"
)

// utcNow is the database clock in UTC with microseconds (see the utc_now
// SQL template).
const utcNow = "(UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)"

// insertRunRow is one row of InsertRunsSQL: RunInsert's VALUES.
const insertRunRow = "(?, ?, 'available', ?, " + utcNow + " + INTERVAL ? MICROSECOND, ?, ?, ?, ?, ?, " + utcNow + ")"

// InsertRunsSQL returns the statement that inserts n runs into table (the
// prefixed runs table): the multi-row form of the RunInsert query, which
// sqlc cannot express. Rows that repeat a tick or an active unique key are
// left as they are. The generated job store runs it with InsertRunsArgs.
func InsertRunsSQL(table string, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (job, queue, state, priority, run_at, scheduled_at, args, max_attempts, timeout_us, unique_key, created_at) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(insertRunRow)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	return b.String()
}

// InsertRunsArgs returns the arguments of InsertRunsSQL for runs.
func InsertRunsArgs(runs []NewRun) []any {
	args := make([]any, 0, 9*len(runs))
	for _, r := range runs {
		var scheduled, unique any
		if !r.ScheduledAt.IsZero() {
			scheduled = r.ScheduledAt.UTC()
		}
		if r.UniqueKey != "" {
			unique = r.UniqueKey
		}
		args = append(args, r.Job, r.Queue, r.Priority, r.Delay.Microseconds(), scheduled, string(r.Args), r.MaxAttempts, r.Timeout.Microseconds(), unique)
	}
	return args
}
