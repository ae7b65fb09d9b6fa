package ops

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/lockgen/lockgen/runtime"
)

// What waits for a held lock, where the server can tell.
//
// A waiter in another process waits in one of three ways, by strategy:
//
//   - row: in a SELECT … FOR UPDATE on the lock's row. InnoDB lists the
//     waiting lock with the row's primary key (name, lock_key):
//     performance_schema.data_locks on MySQL, information_schema's
//     INNODB_LOCK_WAITS and INNODB_LOCKS on MariaDB (PROCESS privilege).
//   - session, and lease with wait_mode server: in GET_LOCK on a
//     server-wide name (runtime.ServerLockName). Pending named locks are
//     listed only by performance_schema.metadata_locks, with the
//     wait/lock/metadata/sql/mdl instrument on: the default on MySQL, off
//     on MariaDB, whose performance_schema is itself off by default.
//   - lease without wait_mode server: it polls the row between attempts,
//     and no server can tell it from any other client.
//
// A holding's Waiters is set only when its way of waiting was read; the
// page's WaitersUnseen says, in words, what could not be.

// waitersCap bounds the rows each waiters query reads.
const waitersCap = 10000

// waitWay is how a holding's waiters in other processes wait.
type waitWay int

const (
	waitUnknown waitWay = iota // an undeclared lock
	waitRow                    // in a row lock wait
	waitNamed                  // in GET_LOCK on runtime.ServerLockName
	waitPolled                 // polling the row: nobody can tell
)

// waitWayOf is how the waiters of h wait, by its lock's declaration.
func (o *Ops) waitWayOf(h Holding) waitWay {
	l, _ := o.declaredLock(h.Lock)
	switch {
	case h.Strategy == "row":
		return waitRow
	case h.Strategy == "session" || l.WaitOnServer:
		return waitNamed
	case h.Strategy == "lease":
		return waitPolled
	}
	return waitUnknown
}

// waitKinds are the ways of waiting the holdings of a page use.
type waitKinds struct {
	rows, named bool
	polled      []string // the polling lease locks on the page, sorted
}

// waitKindsOf sorts a page's holdings by how their waiters wait.
func (o *Ops) waitKindsOf(items []Holding) waitKinds {
	var k waitKinds
	for _, h := range items {
		switch o.waitWayOf(h) {
		case waitRow:
			k.rows = true
		case waitNamed:
			k.named = true
		case waitPolled:
			if !slices.Contains(k.polled, h.Lock) {
				k.polled = append(k.polled, h.Lock)
			}
		}
	}
	slices.Sort(k.polled)
	return k
}

// declaredLock is the declared lock called name.
func (o *Ops) declaredLock(name string) (Lock, bool) {
	for _, l := range o.cfg.Locks {
		if l.Name == name {
			return l, true
		}
	}
	return Lock{}, false
}

// addWaiters counts the waiters of the page's holdings where the server
// can tell and says in page.WaitersUnseen what it could not. A failure to
// read them (a missing privilege, a server without the tables) is such a
// note, never an error of the page.
func (o *Ops) addWaiters(ctx context.Context, page *LockPage) {
	kinds := o.waitKindsOf(page.Items)
	if len(kinds.polled) > 0 {
		page.WaitersUnseen = append(page.WaitersUnseen, fmt.Sprintf(
			"Nobody can tell who waits for %s: lease waiters poll the row (wait_mode: server makes them wait where the server can tell).",
			strings.Join(kinds.polled, ", ")))
	}
	if !kinds.rows && !kinds.named {
		return
	}
	var version, database string
	var perfSchema bool
	if err := o.db.QueryRowContext(ctx, "SELECT VERSION(), DATABASE(), @@performance_schema").Scan(&version, &database, &perfSchema); err != nil {
		page.WaitersUnseen = append(page.WaitersUnseen, "Waiters are not shown: "+err.Error()+".")
		return
	}
	mariadb := strings.Contains(version, "MariaDB")
	if kinds.rows {
		rows, note := o.rowWaiters(ctx, mariadb, perfSchema, database)
		if note != "" {
			page.WaitersUnseen = append(page.WaitersUnseen, "Row lock waiters are not shown: "+note+".")
		} else {
			for i := range page.Items {
				if h := &page.Items[i]; o.waitWayOf(*h) == waitRow {
					n := rows[[2]string{h.Lock, h.Key}]
					h.Waiters = &n
				}
			}
		}
	}
	if kinds.named {
		named, note := o.namedWaiters(ctx, perfSchema)
		if note != "" {
			page.WaitersUnseen = append(page.WaitersUnseen, "Waiters in GET_LOCK (session locks, lease locks with wait_mode: server) are not shown: "+note+".")
			return
		}
		namespace := o.cfg.TablePrefix
		for i := range page.Items {
			if h := &page.Items[i]; o.waitWayOf(*h) == waitNamed {
				// A session lock's own name, or a lease's wake lock.
				n := named[runtime.ServerLockName(namespace, h.Lock, h.Key, h.Strategy != "session")]
				h.Waiters = &n
			}
		}
	}
}

// rowWaiters counts the transactions waiting for each (lock, key) row of
// the locks table, or says why it cannot.
func (o *Ops) rowWaiters(ctx context.Context, mariadb, perfSchema bool, database string) (map[[2]string]int64, string) {
	table := o.cfg.TablePrefix + "locks"
	var rows *sql.Rows
	var err error
	switch {
	case mariadb:
		// MariaDB serves these tables from a snapshot that it refreshes
		// only when nobody read it for 100 ms: readers polling faster
		// than that, together, see the same old snapshot.
		rows, err = o.db.QueryContext(ctx, `SELECT l.lock_data, COUNT(DISTINCT w.requesting_trx_id)
FROM information_schema.INNODB_LOCK_WAITS w JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id
WHERE l.lock_table = ? AND l.lock_index = 'PRIMARY' GROUP BY l.lock_data LIMIT ?`,
			"`"+database+"`.`"+table+"`", waitersCap)
		if err != nil {
			return nil, fmt.Sprintf("reading information_schema.INNODB_LOCK_WAITS failed (it needs the PROCESS privilege): %v", err)
		}
	case !perfSchema:
		return nil, "performance_schema is off (MySQL lists row lock waits in performance_schema.data_locks)"
	default:
		rows, err = o.db.QueryContext(ctx, `SELECT LOCK_DATA, COUNT(DISTINCT ENGINE_TRANSACTION_ID)
FROM performance_schema.data_locks
WHERE OBJECT_SCHEMA = ? AND OBJECT_NAME = ? AND INDEX_NAME = 'PRIMARY' AND LOCK_TYPE = 'RECORD' AND LOCK_STATUS = 'WAITING'
GROUP BY LOCK_DATA LIMIT ?`, database, table, waitersCap)
		if err != nil {
			return nil, fmt.Sprintf("reading performance_schema.data_locks failed (it needs SELECT on performance_schema): %v", err)
		}
	}
	defer rows.Close()
	counts := map[[2]string]int64{}
	for rows.Next() {
		var data sql.NullString
		var n int64
		if err := rows.Scan(&data, &n); err != nil {
			return nil, err.Error()
		}
		if vals, ok := parseLockData(data.String); ok && len(vals) == 2 {
			counts[[2]string{vals[0], vals[1]}] += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err.Error()
	}
	return counts, ""
}

// mdlInstrument is the performance_schema instrument that records
// metadata locks, named (user-level) locks among them.
const mdlInstrument = "wait/lock/metadata/sql/mdl"

// namedWaiters counts the sessions waiting in GET_LOCK for each name, or
// says why it cannot.
func (o *Ops) namedWaiters(ctx context.Context, perfSchema bool) (map[string]int64, string) {
	if !perfSchema {
		return nil, "performance_schema is off (turn it on, with the " + mdlInstrument + " instrument, to list them)"
	}
	var enabled string
	err := o.db.QueryRowContext(ctx, "SELECT ENABLED FROM performance_schema.setup_instruments WHERE NAME = ?", mdlInstrument).Scan(&enabled)
	switch {
	case err == sql.ErrNoRows:
		return nil, "this server has no " + mdlInstrument + " instrument"
	case err != nil:
		return nil, fmt.Sprintf("reading performance_schema.setup_instruments failed (it needs SELECT on performance_schema): %v", err)
	case enabled != "YES":
		return nil, fmt.Sprintf("the %s instrument is off (UPDATE performance_schema.setup_instruments SET ENABLED = 'YES' WHERE NAME = '%s')", mdlInstrument, mdlInstrument)
	}
	rows, err := o.db.QueryContext(ctx, `SELECT OBJECT_NAME, COUNT(*) FROM performance_schema.metadata_locks
WHERE OBJECT_TYPE = 'USER LEVEL LOCK' AND LOCK_STATUS = 'PENDING' GROUP BY OBJECT_NAME LIMIT ?`, waitersCap)
	if err != nil {
		return nil, fmt.Sprintf("reading performance_schema.metadata_locks failed (it needs SELECT on performance_schema): %v", err)
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err.Error()
		}
		counts[name] += n
	}
	if err := rows.Err(); err != nil {
		return nil, err.Error()
	}
	return counts, ""
}

// parseLockData reads InnoDB's LOCK_DATA for a record of a primary key of
// strings: each value in single quotes, separated by ", ", a quote inside
// doubled, a backslash written \\ and a NUL byte \0, every other byte as it
// is (both servers print them so). ok is false for anything else: the
// supremum pseudo-record, a value that is not a string, a cut-off value.
func parseLockData(s string) (vals []string, ok bool) {
	for {
		if !strings.HasPrefix(s, "'") {
			return nil, false
		}
		s = s[1:]
		var b strings.Builder
		closed := false
		for len(s) > 0 && !closed {
			c := s[0]
			switch {
			case c == '\'' && strings.HasPrefix(s, "''"):
				b.WriteByte('\'')
				s = s[2:]
			case c == '\'':
				closed = true
				s = s[1:]
			case c == '\\' && strings.HasPrefix(s, `\\`):
				b.WriteByte('\\')
				s = s[2:]
			case c == '\\' && strings.HasPrefix(s, `\0`):
				b.WriteByte(0)
				s = s[2:]
			case c == '\\':
				return nil, false
			default:
				b.WriteByte(c)
				s = s[1:]
			}
		}
		if !closed {
			return nil, false
		}
		vals = append(vals, b.String())
		if s == "" {
			return vals, true
		}
		if !strings.HasPrefix(s, ", ") {
			return nil, false
		}
		s = s[2:]
	}
}
