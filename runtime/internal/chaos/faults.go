package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Span is a fault as it was applied, in CLOCK_MONOTONIC nanoseconds: the
// checker tells a process hit by a fault from a healthy one by its spans.
type Span struct {
	Kind string
	// Proc is the process; -1 for the server (a restart hits every
	// process, lockrows the runs in Runs) or a node (Node).
	Proc     int
	Node     int
	From, To int64
	// Killed says the process was SIGKILLed at From.
	Killed bool
	// Primary says a node fault hit the primary of a single-primary group.
	Primary bool
	// Skipped says a node fault was not applied (see nodeFault): it is
	// not recorded, so it widens no check's grace.
	Skipped bool
	// Runs are the runs whose rows a lockrows fault tried to lock (from
	// when its locking read was sent), Owners the processes that held
	// their claims when the fault picked them.
	Runs   []int64
	Owners []int
}

// describe says when sp was in force, counted from base.
func (sp Span) describe(base int64) string {
	target := fmt.Sprintf("p%d", sp.Proc)
	switch {
	case (Fault{Kind: sp.Kind}).nodeFault():
		target = fmt.Sprintf("node%d", sp.Node)
		if sp.Primary {
			target += " (the primary)"
		}
	case sp.Proc < 0:
		target = "server"
	}
	s := fmt.Sprintf("%s %s in force from %s to %s", sp.Kind, target, Dur(sp.From-base), Dur(sp.To-base))
	if sp.Kind == FaultLockRows {
		s += fmt.Sprintf(" on runs %v of %v", sp.Runs, sp.Owners)
	}
	return s
}

// procUser is the database user of worker slot i: one per process, so
// that a rotation locks out one process only.
func procUser(i int) string { return fmt.Sprintf("%s_p%d", appUser, i) }

// rotatedPass is a worker's password while a rotation locks it out.
const rotatedPass = "chaos-rotated-password"

// userHosts are the hosts every chaos user is created for: a server with
// anonymous users (”@'localhost') would match a local connection to
// those before a '%' account.
var userHosts = []string{"%", "localhost", "127.0.0.1"}

// rotate changes p's password and kills its sessions, so that its every
// new connection fails (1045) for d, then restores the password.
func (c *Controller) rotate(ctx context.Context, p *proc, d time.Duration) error {
	if err := c.setPassword(ctx, procUser(p.id), rotatedPass); err != nil {
		return err
	}
	c.killSessions(ctx, procUser(p.id), -1)
	time.Sleep(d)
	// The password must come back even when the server is down meanwhile
	// (a restart fault overlapping this one): until it does, the process
	// is locked out for good, which is no fault the plan made.
	var err error
	for try := 0; try < 120; try++ {
		if err = c.setPassword(ctx, procUser(p.id), appPass); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// setPassword sets user's password on the server, or on the first node
// of a cluster that takes it (a cluster replicates ALTER USER to the
// others).
func (c *Controller) setPassword(ctx context.Context, user, pass string) error {
	var err error
	for _, admin := range c.admins() {
		if err = setPasswordOn(ctx, admin, user, pass); err == nil {
			return nil
		}
	}
	return err
}

func setPasswordOn(ctx context.Context, admin *sql.DB, user, pass string) error {
	for _, host := range userHosts {
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("ALTER USER '%s'@'%s' IDENTIFIED BY '%s'", user, host, pass)); err != nil {
			return fmt.Errorf("chaos: setting %s's password: %w", user, err)
		}
	}
	return nil
}

// killSessions kills user's sessions, or (idle ≥ 0) those idle for idle
// seconds or more, on the server or on every node of a cluster, and
// returns how many it killed.
func (c *Controller) killSessions(ctx context.Context, user string, idle int) int {
	n := 0
	for _, admin := range c.admins() {
		n += killSessionsOn(ctx, admin, user, idle)
	}
	return n
}

func killSessionsOn(ctx context.Context, admin *sql.DB, user string, idle int) int {
	// A node that a fault stopped answers nothing: give up on it.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	q := "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?"
	args := []any{user}
	if idle >= 0 {
		q += " AND COMMAND = 'Sleep' AND TIME >= ?"
		args = append(args, idle)
	}
	rows, err := admin.QueryContext(ctx, q, args...)
	if err != nil {
		return 0
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	_ = rows.Close()
	n := 0
	for _, id := range ids {
		if _, err := admin.ExecContext(ctx, "KILL "+strconv.FormatInt(id, 10)); err == nil {
			n++
		}
	}
	return n
}

// lockRows holds, in an admin transaction, the rows of up to f.Arg running
// runs (those with the earliest deadlines: their workers stopped
// heartbeating first) locked for f.Dur, as an operator's or a report's
// SELECT … FOR UPDATE would. The rows' workers cannot heartbeat those runs
// meanwhile (exempt from the checks), every other run must go on.
func (c *Controller) lockRows(ctx context.Context, f Fault, sp *Span) error {
	return lockRunRows(ctx, c.admin, database+".chaos_runs", int(f.Arg), f.Dur, sp)
}

// lockRunRows locks the rows of up to n running runs of table for dur (see
// lockRows) and records them in sp. The fault is in force from the moment
// its locking read is sent, not from when it returns: the read locks the
// rows one by one, so while it waits for a row another transaction holds
// (another lockrows fault's, a worker's), the rows it locked before that
// one are held already, and their heartbeats skip them. So sp.From is set
// before the read, and sp.Runs names every run the read tried to lock, as
// long as it ran; a run whose row it never reached is exempt for nothing
// it could have suffered.
func lockRunRows(ctx context.Context, admin *sql.DB, table string, n int, dur time.Duration, sp *Span) error {
	tx, err := admin.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, "SELECT id, worker FROM "+table+" WHERE state = 'running' ORDER BY deadline LIMIT ?", n)
	if err != nil {
		return err
	}
	var ids []string
	var runs []int64
	var owners []int
	for rows.Next() {
		var id int64
		var worker string
		if err := rows.Scan(&id, &worker); err != nil {
			_ = rows.Close()
			return err
		}
		ids = append(ids, strconv.FormatInt(id, 10))
		runs = append(runs, id)
		var p, inc int
		if _, err := fmt.Sscanf(worker, "p%d.%d", &p, &inc); err == nil {
			owners = append(owners, p)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sp.From, sp.Runs, sp.Owners = Mono(), runs, owners
	rows, err = tx.QueryContext(lctx, "SELECT id FROM "+table+" FORCE INDEX (PRIMARY) WHERE id IN ("+strings.Join(ids, ",")+") AND state = 'running' FOR UPDATE")
	if err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	time.Sleep(dur)
	return nil
}

// keepAlive stands in for the server's TCP keep-alive, which closes a
// session whose client is gone: every few seconds it kills the workers'
// sessions idle for Config.KeepAlive or more (a worker closes its own
// idle connections after 10 s). Without it, every session a partition
// strands would stay open for the server's wait_timeout (8 h by default).
func (c *Controller) keepAlive(ctx context.Context) {
	idle := int(c.cfg.KeepAlive / time.Second)
	for sleepCtx(ctx, 5*time.Second) {
		for i := range c.cfg.Procs {
			if n := c.killSessions(ctx, procUser(i), idle); n > 0 {
				c.mu.Lock()
				c.faults["keep-alive closed a stranded session"] += n
				c.mu.Unlock()
			}
		}
	}
}

// watchTransactions writes to trx.log in Config.Dir, every 250 ms (times
// from start, the start of the faults, as in the progress lines), every
// transaction open for a second or more, of any user (the workers' and the
// lockrows fault's alike): its age, user, session, rows locked, what the
// session runs (its command, and its state: on a cluster, where a commit
// waits for the group), and which rows of the runs table it holds (MySQL) or who
// waits for whom (MariaDB). A
// run's heartbeat skips a row another transaction holds; when the checker
// says a healthy handler lost its lease, this log names who held its row.
func (c *Controller) watchTransactions(ctx context.Context, start int64) {
	f, err := os.Create(filepath.Join(c.cfg.Dir, "trx.log"))
	if err != nil {
		return
	}
	defer f.Close()
	// performance_schema.data_locks is MySQL's: MariaDB lists a lock only
	// while someone waits for it, so there the row count, the user and the
	// waits say it.
	_, dataLocksErr := c.admin.ExecContext(ctx, "SELECT 1 FROM performance_schema.data_locks LIMIT 0")
	for sleepCtx(ctx, 250*time.Millisecond) {
		rows, err := c.admin.QueryContext(ctx, `SELECT IFNULL(p.USER, ''), t.trx_id, t.trx_mysql_thread_id,
			TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)), t.trx_rows_locked, IFNULL(p.COMMAND, ''), IFNULL(p.TIME, 0),
			IFNULL(p.STATE, ''), IFNULL(t.trx_query, '')
			FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE t.trx_started < NOW(6) - INTERVAL 1 SECOND`)
		if err != nil {
			continue
		}
		at := Dur(Mono() - start)
		var lines []string
		var trxs []string
		for rows.Next() {
			var user, trx, command, state, query string
			var thread, ageUs, locked, idle int64
			if rows.Scan(&user, &trx, &thread, &ageUs, &locked, &command, &idle, &state, &query) != nil {
				continue
			}
			if len(query) > 120 {
				query = query[:120] + "…"
			}
			lines = append(lines, fmt.Sprintf("%s trx %s user %s session %d age %s rows_locked %d command %s for %ds state %q query %q", at, trx, user, thread, (time.Duration(ageUs)*time.Microsecond).Round(time.Millisecond), locked, command, idle, state, query))
			trxs = append(trxs, trx)
		}
		_ = rows.Close()
		if len(lines) > 0 {
			if dataLocksErr == nil {
				lines = append(lines, c.runLocksOf(ctx, at, trxs)...)
			} else {
				lines = append(lines, c.lockWaits(ctx, at)...)
			}
		}
		for _, l := range lines {
			if _, err := f.WriteString(l + "\n"); err != nil {
				return
			}
		}
	}
}

// lockWaits lists, on MariaDB, which transaction waits for which and on
// what: MariaDB shows a lock only while a transaction waits for it.
func (c *Controller) lockWaits(ctx context.Context, at string) []string {
	rows, err := c.admin.QueryContext(ctx, `SELECT w.requesting_trx_id, w.blocking_trx_id, IFNULL(l.lock_table, ''), IFNULL(l.lock_mode, ''), IFNULL(l.lock_data, '')
		FROM information_schema.INNODB_LOCK_WAITS w JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var req, blk, table, mode, data string
		if rows.Scan(&req, &blk, &table, &mode, &data) == nil {
			lines = append(lines, fmt.Sprintf("%s trx %s waits for trx %s: %s on %s %s", at, req, blk, mode, table, data))
		}
	}
	return lines
}

// runLocksOf lists, on MySQL, the row locks of the runs table that the
// transactions trxs hold.
func (c *Controller) runLocksOf(ctx context.Context, at string, trxs []string) []string {
	args := make([]any, len(trxs))
	marks := make([]string, len(trxs))
	for i, t := range trxs {
		args[i], marks[i] = t, "?"
	}
	rows, err := c.admin.QueryContext(ctx, `SELECT ENGINE_TRANSACTION_ID, LOCK_MODE, LOCK_STATUS, IFNULL(LOCK_DATA, '')
		FROM performance_schema.data_locks
		WHERE OBJECT_NAME = 'chaos_runs' AND LOCK_TYPE = 'RECORD' AND ENGINE_TRANSACTION_ID IN (`+strings.Join(marks, ",")+`)`, args...)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var trx, mode, status, data string
		if rows.Scan(&trx, &mode, &status, &data) == nil {
			lines = append(lines, fmt.Sprintf("%s trx %s holds %s %s on run %s", at, trx, mode, status, data))
		}
	}
	return lines
}

// watchStrands samples, every 2 s, the workers' transactions open for
// longer than Config.StrandBound: a claim or a row holding whose client
// gave up (a partition) while the server kept its transaction and its
// locks. Each is reported once, with the longest age seen.
func (c *Controller) watchStrands(ctx context.Context) {
	type strand struct {
		desc      string
		age, rows int64
	}
	seen := map[string]*strand{}
	var order []string
	for sleepCtx(ctx, 2*time.Second) {
		rows, err := c.admin.QueryContext(ctx, `SELECT p.USER, t.trx_id, t.trx_mysql_thread_id,
			TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), t.trx_rows_locked
			FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE p.USER LIKE ? AND t.trx_started < NOW() - INTERVAL ? SECOND`,
			appUser+`\_p%`, int(c.cfg.StrandBound/time.Second))
		if err != nil {
			continue
		}
		held := ""
		for rows.Next() {
			if held == "" {
				held = fmt.Sprint(c.dueLocked(ctx))
			}
			var user, trx string
			var thread, age, locked int64
			if rows.Scan(&user, &trx, &thread, &age, &locked) != nil {
				continue
			}
			key := user + " " + trx
			st := seen[key]
			if st == nil {
				st = &strand{desc: fmt.Sprintf("%s's session %d (transaction %s; due runs held locked when first seen: %s)", strings.TrimPrefix(user, appUser+"_"), thread, trx, held)}
				seen[key] = st
				order = append(order, key)
			}
			st.age, st.rows = max(st.age, age), max(st.rows, locked)
		}
		_ = rows.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range order {
		st := seen[k]
		c.strands = append(c.strands, fmt.Sprintf("%s held %d row locks open for %d s or more", st.desc, st.rows, st.age))
	}
}

// dueLocked returns the available runs due for 5 s or more that a
// transaction holds locked: no claim takes that long, so they are held by
// a claim whose client is gone.
func (c *Controller) dueLocked(ctx context.Context) []int64 {
	tx, err := c.admin.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil
	}
	defer func() { _ = tx.Rollback() }()
	const due = "SELECT id FROM " + database + ".chaos_runs WHERE state = 'available' AND run_at < UTC_TIMESTAMP(6) - INTERVAL 5 SECOND"
	ids := func(q string) []int64 {
		var ids []int64
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return nil
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if rows.Scan(&id) == nil {
				ids = append(ids, id)
			}
		}
		return ids
	}
	free := ids(due + " FOR UPDATE SKIP LOCKED")
	var held []int64
	for _, id := range ids(due) {
		if !slices.Contains(free, id) {
			held = append(held, id)
		}
	}
	return held
}

// sleepCtx sleeps d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// watchNodes writes to nodes.log in Config.Dir, every 250 ms (times from
// start, as in trx.log), each cluster node's view of the cluster whenever
// it changes: on Galera its state, the cluster's size, whether it takes
// statements (wsrep_ready) and its receive queue, and how long flow
// control paused the cluster since the last sample; on Group Replication
// the members it sees and their states and roles, and the transactions
// waiting for certification and to be applied. A node that does not
// answer within a second is written as such. When the checker finds a
// worker held up with no fault in force, this log says what the cluster
// was doing.
func (c *Controller) watchNodes(ctx context.Context, start int64) {
	if len(c.nodes) == 0 {
		return
	}
	f, err := os.Create(filepath.Join(c.cfg.Dir, "nodes.log"))
	if err != nil {
		return
	}
	defer f.Close()
	last := make([]string, len(c.nodes))
	paused := make([]int64, len(c.nodes)) // flow control's total, once read
	read := make([]bool, len(c.nodes))
	for sleepCtx(ctx, 250*time.Millisecond) {
		at := Dur(Mono() - start)
		for i, n := range c.nodes {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			view, p, err := c.nodeView(qctx, n.admin)
			cancel()
			if err != nil {
				view = "no answer: " + err.Error()
			}
			extra := ""
			if err == nil {
				if read[i] && p > paused[i] {
					extra = fmt.Sprintf(" (flow control paused %s since the last sample)", time.Duration(p-paused[i]).Round(time.Millisecond))
				}
				paused[i], read[i] = p, true
			}
			if view == last[i] && extra == "" {
				continue
			}
			last[i] = view
			if _, err := fmt.Fprintf(f, "%s node%d %s%s\n", at, i, view, extra); err != nil {
				return
			}
		}
	}
}

// nodeView returns a node's view of its cluster for watchNodes, and on
// Galera the nanoseconds flow control has paused it in all.
func (c *Controller) nodeView(ctx context.Context, db *sql.DB) (string, int64, error) {
	if c.kind == clusterGalera {
		var state, ready string
		var size, queue, paused int64
		err := db.QueryRowContext(ctx, `SELECT
			MAX(IF(VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT', VARIABLE_VALUE, NULL)),
			MAX(IF(VARIABLE_NAME = 'WSREP_READY', VARIABLE_VALUE, NULL)),
			MAX(IF(VARIABLE_NAME = 'WSREP_CLUSTER_SIZE', VARIABLE_VALUE, NULL)),
			MAX(IF(VARIABLE_NAME = 'WSREP_LOCAL_RECV_QUEUE', VARIABLE_VALUE, NULL)),
			MAX(IF(VARIABLE_NAME = 'WSREP_FLOW_CONTROL_PAUSED_NS', VARIABLE_VALUE, NULL))
			FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN
			('WSREP_LOCAL_STATE_COMMENT', 'WSREP_READY', 'WSREP_CLUSTER_SIZE', 'WSREP_LOCAL_RECV_QUEUE', 'WSREP_FLOW_CONTROL_PAUSED_NS')`).Scan(&state, &ready, &size, &queue, &paused)
		if err != nil {
			return "", 0, err
		}
		// The receive queue is written by tens, so that a sample does
		// not make a line of every transaction in flight.
		return fmt.Sprintf("%s ready %s size %d recv_queue %d+", state, ready, size, queue/10*10), paused, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT IFNULL(m.MEMBER_PORT, '-'), m.MEMBER_STATE, IFNULL(m.MEMBER_ROLE, '-'),
		IFNULL(s.COUNT_TRANSACTIONS_IN_QUEUE, 0), IFNULL(s.COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE, 0)
		FROM performance_schema.replication_group_members m
		LEFT JOIN performance_schema.replication_group_member_stats s ON s.MEMBER_ID = m.MEMBER_ID
		ORDER BY m.MEMBER_PORT`)
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	var members []string
	for rows.Next() {
		var port, state, role string
		var certQueue, applyQueue int64
		if err := rows.Scan(&port, &state, &role, &certQueue, &applyQueue); err != nil {
			return "", 0, err
		}
		// Queues by tens, as on Galera.
		members = append(members, fmt.Sprintf("%s %s %s queues %d+/%d+", port, state, role, certQueue/10*10, applyQueue/10*10))
	}
	if err := rows.Err(); err != nil {
		return "", 0, err
	}
	return "sees [" + strings.Join(members, ", ") + "]", 0, nil
}
