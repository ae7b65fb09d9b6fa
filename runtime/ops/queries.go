package ops

import "strings"

// utcNow is the database clock in UTC with microseconds, as the runtime's
// statements read it.
const utcNow = "(UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)"

// heldExpr is true for a row that shows a holding: a lease until its
// expiry, a session holding (the far-future mark, which stays after the
// holding ends: such a row is held only while its server-side lock is,
// which sessionHeld asks the server), a row-strategy holding (the 1970
// mark, uncommitted: seen by a READ UNCOMMITTED read) until its
// transaction ends.
const heldExpr = "(owner <> '' AND (expires_at > " + utcNow + " OR expires_at = '1970-01-01 00:00:02'))"

// historySet appends one entry to a run's history, as the runtime's
// statements do (templates/jobs_queries.sql.tmpl, "history"): fields are
// the entry's fields after "at". A statement assigns it first, so it reads
// the row as it was before the change.
func historySet(fields string) string {
	return "history = JSON_ARRAY_APPEND(IF(JSON_LENGTH(history) >= 50, JSON_REMOVE(history, '$[0]'), IFNULL(history, JSON_ARRAY())), '$', " +
		"JSON_OBJECT('at', DATE_FORMAT({now}, '%Y-%m-%dT%H:%i:%s.%fZ'), " + fields + "))"
}

// queries are the layer's statements for one table prefix. Every read is a
// consistent read (or, for the locks table, a READ UNCOMMITTED one): none
// locks a row. Every write changes one row by primary key.
type queries struct {
	now string
	// leaders reads the unkeyed rows of the named locks (IN list appended).
	leaders string
	// lockCount counts, among the first cap rows of a lock, those held:
	// all of them, and those that show a session mark, which are held
	// only while their server-side lock is (see sessionHeld); lockMarks
	// reads the keys of those marked rows.
	lockCount, lockMarks string
	// locksScan reads up to ScanLimit rows after a cursor, in key order;
	// locksScanName the same within one lock; locksScanNameFrom from a
	// key on, that key included.
	locksScan, locksScanName, locksScanNameFrom string
	// queueCounts counts a queue's runs by state, each count capped.
	queueCounts string
	queuesRows  string
	queuePause  string
	queueResume string
	queueGet    string
	// lastTick is a scheduled job's newest tick.
	lastTick string
	// runsScan reads the filter columns of up to ScanLimit runs below an
	// id, newest first; runsGet the listed columns of the runs of an IN
	// list (appended); runGet one run in full.
	runsScan, runsList, runGet string
	// runsClaims reads the state and claim of the runs of an IN list
	// (appended).
	runsClaims          string
	runCancel, runRetry string
	// runPush enqueues a run due after a delay in µs; runPushAt one due at
	// a time in µs since the Unix epoch (no time zone involved), or now. A run with the unique key of an unfinished run of its job is
	// not inserted: LastInsertId is then that run's id, and no row is
	// affected.
	runPush, runPushAt string
	// retryScan reads a batch of a job's finished runs in a state, after
	// a (finished_at, id) cursor and before a time, through the state
	// index (finished runs have no deadline). retryIDs retries the runs of
	// an IN list (appended) still in a retryable state.
	retryScan, retryIDs string
}

func render(prefix string) queries {
	locks, runs, queues := prefix+"locks", prefix+"runs", prefix+"queues"
	r := strings.NewReplacer("{locks}", locks, "{runs}", runs, "{queues}", queues, "{now}", utcNow, "{held}", heldExpr)
	lockCols := "name, lock_key, owner, token, acquired_at, expires_at, TIMESTAMPDIFF(MICROSECOND, {now}, expires_at), {held}"
	runCols := "id, job, queue, state, priority, run_at, scheduled_at, attempt, max_attempts, worker, deadline, created_at, finished_at, unique_key, last_error"
	return queries{
		now:               r.Replace("SELECT {now}"),
		leaders:           r.Replace("SELECT " + lockCols + " FROM {locks} WHERE lock_key = '' AND {held} AND name IN "),
		lockCount:         r.Replace("SELECT COUNT(*), COALESCE(SUM(held), 0), COALESCE(SUM(held AND expires_at = '9999-12-31 23:59:59'), 0) FROM (SELECT {held} AS held, expires_at FROM {locks} WHERE name = ? LIMIT ?) t"),
		lockMarks:         r.Replace("SELECT lock_key FROM (SELECT lock_key, owner, expires_at FROM {locks} WHERE name = ? LIMIT ?) t WHERE owner <> '' AND expires_at = '9999-12-31 23:59:59'"),
		locksScan:         r.Replace("SELECT " + lockCols + " FROM {locks} WHERE name > ? OR (name = ? AND lock_key > ?) ORDER BY name, lock_key LIMIT ?"),
		locksScanName:     r.Replace("SELECT " + lockCols + " FROM {locks} WHERE name = ? AND lock_key > ? ORDER BY lock_key LIMIT ?"),
		locksScanNameFrom: r.Replace("SELECT " + lockCols + " FROM {locks} WHERE name = ? AND lock_key >= ? ORDER BY lock_key LIMIT ?"),
		queueCounts: r.Replace(`SELECT COUNT(*), COALESCE(SUM(run_at <= {now}), 0), COALESCE(SUM(attempt > 0), 0) FROM (SELECT run_at, attempt FROM {runs} WHERE queue = ? AND state = 'available' LIMIT ?) a
UNION ALL SELECT COUNT(*), 0, 0 FROM (SELECT 1 FROM {runs} WHERE queue = ? AND state = 'running' LIMIT ?) r
UNION ALL SELECT COUNT(*), 0, 0 FROM (SELECT 1 FROM {runs} WHERE queue = ? AND state = 'orphaned' LIMIT ?) o
UNION ALL SELECT COUNT(*), 0, 0 FROM (SELECT 1 FROM {runs} WHERE queue = ? AND state = 'discarded' LIMIT ?) d`),
		queuesRows:  r.Replace("SELECT queue, paused, paused_at FROM {queues} ORDER BY queue LIMIT 1000"),
		queueGet:    r.Replace("SELECT paused, paused_at FROM {queues} WHERE queue = ?"),
		queuePause:  r.Replace("INSERT INTO {queues} (queue, paused, paused_at, updated_at) VALUES (?, 1, {now}, {now}) ON DUPLICATE KEY UPDATE paused_at = IF(paused = 1, paused_at, {now}), updated_at = IF(paused = 1, updated_at, {now}), paused = 1"),
		queueResume: r.Replace("UPDATE {queues} SET paused = 0, paused_at = NULL, updated_at = {now} WHERE queue = ? AND paused = 1"),
		lastTick:    r.Replace("SELECT id, scheduled_at, state FROM {runs} WHERE job = ? AND dedupe >= 't' AND dedupe < 'u' ORDER BY dedupe DESC LIMIT 1"),
		runsScan:    r.Replace("SELECT id, job, queue, state FROM {runs} WHERE id < ? ORDER BY id DESC LIMIT ?"),
		runsList:    r.Replace("SELECT " + runCols + " FROM {runs} WHERE id IN "),
		runGet:      r.Replace("SELECT " + runCols + ", args, claim, timeout_us, history, headers FROM {runs} WHERE id = ?"),
		runsClaims:  r.Replace("SELECT id, state, claim FROM {runs} WHERE id IN "),
		runCancel: r.Replace("UPDATE {runs} SET " + historySet("'event', 'cancelled', 'attempt', attempt, 'worker', IF(state = 'running', worker, '')") + ", finished_at = IF(state = 'running', GREATEST(deadline, {now}), {now}), deadline = NULL, state = 'cancelled' " +
			"WHERE id = ? AND state IN ('available', 'running')"),
		runPush: r.Replace(`INSERT INTO {runs} (job, queue, state, priority, run_at, args, max_attempts, timeout_us, unique_key, headers, created_at)
VALUES (?, ?, 'available', ?, {now} + INTERVAL CAST(? AS SIGNED) MICROSECOND, ?, ?, ?, ?, ?, {now})
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`),
		runPushAt: r.Replace(`INSERT INTO {runs} (job, queue, state, priority, run_at, args, max_attempts, timeout_us, unique_key, headers, created_at)
VALUES (?, ?, 'available', ?, GREATEST(TIMESTAMP('1970-01-01 00:00:00') + INTERVAL CAST(? AS SIGNED) MICROSECOND, {now}), ?, ?, ?, ?, ?, {now})
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`),
		retryScan: r.Replace(`SELECT id, finished_at, queue FROM {runs} FORCE INDEX ({runs}_state)
WHERE state = ? AND deadline IS NULL AND job = ? AND (finished_at > ? OR (finished_at = ? AND id > ?)) AND finished_at < ?
ORDER BY finished_at, id LIMIT ?`),
		retryIDs: r.Replace("UPDATE {runs} SET " + historySet("'event', 'retried', 'attempt', attempt") + ", state = 'available', attempt = 0, run_at = {now}, finished_at = NULL WHERE state IN ('discarded', 'orphaned', 'cancelled') AND finished_at <= {now} AND id IN "),
		runRetry: r.Replace("UPDATE {runs} SET " + historySet("'event', 'retried', 'attempt', attempt") + ", state = 'available', attempt = 0, run_at = {now}, finished_at = NULL WHERE id = ? AND state IN ('discarded', 'orphaned', 'cancelled') AND finished_at <= {now}"),
	}
}

// inList returns "(?, ?, …)" for n values.
func inList(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}
