package driver

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"

	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// utcNow is the database clock in UTC with microseconds (see the utc_now
// SQL template).
const utcNow = "(UTC_TIMESTAMP() + INTERVAL MICROSECOND(NOW(6)) MICROSECOND)"

// insertRunRow is one row of InsertRunsSQL: RunInsert's VALUES.
const insertRunRow = "(?, ?, 'available', ?, " + utcNow + " + INTERVAL ? MICROSECOND, ?, ?, ?, ?, ?, ?, " + utcNow + ")"

// InsertRunsSQL returns the statement that inserts n runs into table (the
// prefixed runs table): the multi-row form of the RunInsert query, which
// sqlc cannot express. Rows that repeat a tick or an active unique key are
// left as they are. The generated job store runs it with InsertRunsArgs.
func InsertRunsSQL(table string, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (job, queue, state, priority, run_at, scheduled_at, args, max_attempts, timeout_us, unique_key, headers, created_at) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(insertRunRow)
	}
	// A no-op assignment of a column that is not AUTO_INCREMENT: "id = id"
	// fails on MySQL with error 1869 when one batch repeats a key.
	b.WriteString(" ON DUPLICATE KEY UPDATE job = job")
	return b.String()
}

// InsertRunsArgs returns the arguments of InsertRunsSQL for runs.
func InsertRunsArgs(runs []NewRun) []any {
	args := make([]any, 0, 10*len(runs))
	for _, r := range runs {
		var scheduled, unique any
		if !r.ScheduledAt.IsZero() {
			scheduled = r.ScheduledAt.UTC()
		}
		if r.UniqueKey != "" {
			unique = r.UniqueKey
		}
		args = append(args, r.Job, r.Queue, r.Priority, r.Delay.Microseconds(), scheduled, string(r.Args), r.MaxAttempts, r.Timeout.Microseconds(), unique, r.Headers)
	}
	return args
}

// maxPreparedSizes bounds the batch sizes an InsertStmts keeps prepared.
const maxPreparedSizes = 4

// prepareBackoff is how many inserts go as text after a prepare failed
// before the next try.
const prepareBackoff = 100

// InsertStmts runs the multi-row inserts of a job store as prepared
// statements, one per batch size, prepared on each connection once: a
// 100-row INSERT spends a tenth of the server's time in the SQL parser,
// and EnqueueMany went from 54.7k to 64.5k runs/s here prepared. It keeps
// up to 4 sizes (the ones used last), so it holds up to 4 prepared
// statements per open connection (the server's max_prepared_stmt_count
// bounds them across all clients). An insert in a transaction uses a
// prepared statement only once it exists (it never takes a second
// connection to prepare one). When the server will not prepare, or a
// prepared insert fails for want of a prepared statement (errors 1461,
// 1295), the insert goes as text, and the next 100 inserts do too. Safe
// for concurrent use; the zero value is not.
type InsertStmts struct {
	db    *sql.DB
	table string
	mu    sync.Mutex
	stmts map[int]*insertStmt
	used  []int        // batch sizes, least recently used first
	text  textFallback // after a failed prepare
}

// insertStmt is a prepared statement and the inserts using it: an evicted
// statement is closed by the last of them.
type insertStmt struct {
	stmt    *sql.Stmt
	users   int
	evicted bool
}

// NewInsertStmts returns the insert statements of table (the prefixed runs
// table) on db.
func NewInsertStmts(db *sql.DB, table string) *InsertStmts {
	return &InsertStmts{db: db, table: table, stmts: map[int]*insertStmt{}}
}

// Exec inserts runs in one statement (in tx when tx is not nil): the
// multi-row RunInsert, so runs that repeat a tick or an active unique key
// are left out.
func (s *InsertStmts) Exec(ctx context.Context, tx *sql.Tx, runs []NewRun) error {
	args := InsertRunsArgs(runs)
	if st := s.acquire(ctx, len(runs), tx == nil); st != nil {
		var err error
		if tx != nil {
			_, err = tx.StmtContext(ctx, st.stmt).ExecContext(ctx, args...)
		} else {
			_, err = st.stmt.ExecContext(ctx, args...)
		}
		s.release(st)
		if !servererr.IsNotPreparable(err) {
			return err
		}
		s.text.start()
	}
	query := InsertRunsSQL(s.table, len(runs))
	var err error
	if tx != nil {
		_, err = tx.ExecContext(ctx, query, args...)
	} else {
		_, err = s.db.ExecContext(ctx, query, args...)
	}
	return err
}

// acquire returns the prepared statement for n rows, preparing it if
// mayPrepare, or nil (send text). The caller releases it.
func (s *InsertStmts) acquire(ctx context.Context, n int, mayPrepare bool) *insertStmt {
	// After a failed prepare, text: a statement prepared before would be
	// prepared again on each connection that has not run it, and fail
	// the same way.
	if s.text.take() {
		return nil
	}
	s.mu.Lock()
	if st := s.stmts[n]; st != nil {
		st.users++
		s.used = append(slices.DeleteFunc(s.used, func(m int) bool { return m == n }), n)
		s.mu.Unlock()
		return st
	}
	s.mu.Unlock()
	if !mayPrepare {
		return nil
	}

	stmt, err := s.db.PrepareContext(ctx, InsertRunsSQL(s.table, n))
	if err != nil {
		s.text.start()
		return nil
	}
	s.mu.Lock()
	if st := s.stmts[n]; st != nil { // another insert prepared it meanwhile
		st.users++
		s.mu.Unlock()
		_ = stmt.Close()
		return st
	}
	var evicted *insertStmt
	if len(s.used) == maxPreparedSizes {
		old := s.used[0]
		s.used = s.used[1:]
		evicted = s.stmts[old]
		delete(s.stmts, old)
		evicted.evicted = true
		if evicted.users > 0 {
			evicted = nil // its last user closes it
		}
	}
	st := &insertStmt{stmt: stmt, users: 1}
	s.stmts[n] = st
	s.used = append(s.used, n)
	s.mu.Unlock()
	if evicted != nil {
		_ = evicted.stmt.Close()
	}
	return st
}

// release ends a use of st, closing it if it was evicted meanwhile.
func (s *InsertStmts) release(st *insertStmt) {
	s.mu.Lock()
	st.users--
	closeIt := st.evicted && st.users == 0
	s.mu.Unlock()
	if closeIt {
		_ = st.stmt.Close()
	}
}
