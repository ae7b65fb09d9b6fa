package runtime

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// Failover returns a database/sql connector that opens each connection on
// the first of members that takes writes now, starting with the member the
// last connection went to: the members of a MySQL Group Replication group
// in single-primary mode, whose primary moves when it fails, or the nodes
// of a Galera cluster, of which one may be cut off from the others. It is
// libpq's target_session_attrs=read-write for MySQL and MariaDB: open your
// pool with sql.OpenDB(runtime.Failover(c1, c2, c3)), each member a
// connector of its own (go-sql-driver's mysql.NewConnector, best wrapped in
// ConnectTimeout so a member that swallows the handshake is passed over
// soon). docs/OPERATING.md ("Clusters") says why lockgen chose this over
// MySQL Router.
//
// A member takes writes when it is not read-only (read_only,
// super_read_only) and, on Group Replication, when it sees itself ONLINE
// as the PRIMARY of a group whose majority it sees ONLINE (a primary cut
// off in a minority still says PRIMARY, and its commits would wait for
// good; a member restarted outside its group says OFFLINE and would take
// writes alone unless configured super_read_only), or, on Galera, when the
// node is ready (wsrep_ready: it is in the primary component). The check
// is one statement on the new connection, two on its first connection to
// a member. On Group Replication the user needs SELECT on
// performance_schema.replication_group_members: without it every member
// of a group is refused, with an error saying so.
//
// A connection Failover opened that a statement then finds on a server
// that no longer takes writes (1290 read-only, 1836, 1792, Galera's 1047,
// Group Replication's 3100 and 3032: a primary that was demoted or expelled while
// the connection was idle in the pool) returns that error and is not
// used again: database/sql closes it, and the next connection goes to
// the member that takes writes now. When no member takes writes, Connect
// fails with every member's reason.
//
// Failover chooses where new connections go; it does not make a lock
// safe across a failover: that is the lease strategy's database clock
// and fencing token, which the new primary has from the group.
func Failover(members ...driver.Connector) driver.Connector {
	f := &failover{members: members, flavors: make([]atomic.Int32, len(members))}
	return f
}

type failover struct {
	members []driver.Connector
	// last is the member the latest connection went to.
	last atomic.Int32
	// flavors caches each member's server kind (flavorMySQL,
	// flavorMariaDB) once a connection told it.
	flavors []atomic.Int32
}

const (
	flavorUnknown = iota
	flavorMySQL
	flavorMariaDB
)

// ErrNoWritableMember is wrapped by Failover's Connect when no member
// takes writes (each member's reason follows it).
var ErrNoWritableMember = errors.New("lockgen: no member takes writes")

// Connect opens a connection on the first member, from the last one used,
// that takes writes.
func (f *failover) Connect(ctx context.Context) (driver.Conn, error) {
	if len(f.members) == 0 {
		return nil, fmt.Errorf("%w: Failover was given no members", ErrNoWritableMember)
	}
	start := int(f.last.Load())
	var reasons []string
	for k := range f.members {
		i := (start + k) % len(f.members)
		conn, err := f.members[i].Connect(ctx)
		if err == nil {
			err = f.check(ctx, i, conn)
			if err == nil {
				f.last.Store(int32(i))
				return wrapConn(conn), nil
			}
			_ = conn.Close()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		reasons = append(reasons, fmt.Sprintf("member %d: %v", i+1, err))
	}
	return nil, fmt.Errorf("%w: %s", ErrNoWritableMember, strings.Join(reasons, "; "))
}

// Driver returns the first member's driver.
func (f *failover) Driver() driver.Driver {
	if len(f.members) == 0 {
		return nil
	}
	return f.members[0].Driver()
}

// errNotWritable says a member answered but does not take writes now.
var errNotWritable = errors.New("does not take writes")

// check reports whether the member i, on conn, takes writes.
func (f *failover) check(ctx context.Context, i int, conn driver.Conn) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return fmt.Errorf("the driver's connection cannot run a query")
	}
	flavor := f.flavors[i].Load()
	if flavor == flavorUnknown {
		row, err := queryRow(ctx, q, "SELECT VERSION()")
		if err != nil {
			return err
		}
		flavor = flavorMySQL
		if strings.Contains(strings.ToLower(asString(row[0])), "mariadb") {
			flavor = flavorMariaDB
		}
		f.flavors[i].Store(flavor)
	}
	if flavor == flavorMariaDB {
		// wsrep_ready is only a status variable with a Galera provider
		// loaded; with wsrep_on off the node is a server of its own.
		row, err := queryRow(ctx, q, `SELECT @@global.read_only, @@global.wsrep_on,
			(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_READY')`)
		if err != nil {
			return err
		}
		if asInt(row[0]) != 0 {
			return fmt.Errorf("%w: read_only", errNotWritable)
		}
		if asInt(row[1]) != 0 && !strings.EqualFold(asString(row[2]), "ON") {
			return fmt.Errorf("%w: the Galera node is not ready (wsrep_ready %s: outside the primary component)", errNotWritable, asString(row[2]))
		}
		return nil
	}
	row, err := queryRow(ctx, q, `SELECT @@global.read_only OR @@global.super_read_only,
		(SELECT CONCAT(MEMBER_STATE, ' ', MEMBER_ROLE) FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@global.server_uuid),
		(SELECT COUNT(*) FROM performance_schema.replication_group_members),
		(SELECT COUNT(*) FROM performance_schema.replication_group_members WHERE MEMBER_STATE = 'ONLINE')`)
	if servererr.IsTableAccessDenied(err) {
		// A user without SELECT on the group's members table. A server
		// with no Group Replication plugin is a server of its own, and
		// read_only says enough; a group member's state cannot be read,
		// and a member outside its group may take writes alone (a
		// restarted member without super_read_only in its
		// configuration): refuse it, saying what to grant.
		if _, gerr := queryRow(ctx, q, "SELECT @@global.group_replication_group_name"); !servererr.IsUnknownVariable(gerr) {
			if gerr != nil {
				return gerr
			}
			return fmt.Errorf("%w: a Group Replication member whose state this user cannot read (%v): GRANT SELECT ON performance_schema.replication_group_members TO the user", errNotWritable, err)
		}
		row, err = queryRow(ctx, q, `SELECT @@global.read_only OR @@global.super_read_only, NULL, 0, 0`)
	}
	if err != nil {
		return err
	}
	if asInt(row[0]) != 0 {
		return fmt.Errorf("%w: read_only or super_read_only", errNotWritable)
	}
	self, members, online := asString(row[1]), asInt(row[2]), asInt(row[3])
	state, role, _ := strings.Cut(self, " ")
	switch {
	case self == "":
		return nil // no Group Replication: a server of its own
	case state != "ONLINE":
		// OFFLINE too: a member outside its group (restarted, or
		// stopped) takes writes alone unless it is read-only.
		return fmt.Errorf("%w: the group member is %s", errNotWritable, state)
	case role != "PRIMARY" && role != "":
		return fmt.Errorf("%w: the group member is a %s", errNotWritable, role)
	case 2*online <= members:
		return fmt.Errorf("%w: the member sees %d of %d members online (no majority)", errNotWritable, online, members)
	}
	return nil
}

// queryRow runs query on q and returns its one row.
func queryRow(ctx context.Context, q driver.QueryerContext, query string) ([]driver.Value, error) {
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	row := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(row); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%q returned no row", query)
		}
		return nil, err
	}
	return row, nil
}

func asString(v driver.Value) string {
	switch v := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

func asInt(v driver.Value) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case []byte:
		var n int64
		_, _ = fmt.Sscan(string(v), &n)
		return n
	}
	return 0
}

// demoted reports an error that says the connection's server no longer
// takes writes.
func demoted(err error) bool {
	return err != nil && servererr.IsNotWritable(err)
}

// failoverConn is a connection Failover opened: it forwards everything to
// the driver's connection and is not reused after an error that says its
// server no longer takes writes.
type failoverConn struct {
	conn driver.Conn
	mu   sync.Mutex
	bad  bool
}

func wrapConn(c driver.Conn) driver.Conn { return &failoverConn{conn: c} }

// note marks the connection bad after err if it says so, and returns err.
func (c *failoverConn) note(err error) error {
	if demoted(err) {
		c.mu.Lock()
		c.bad = true
		c.mu.Unlock()
	}
	return err
}

func (c *failoverConn) isBad() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bad
}

var (
	_ driver.Conn               = (*failoverConn)(nil)
	_ driver.ConnBeginTx        = (*failoverConn)(nil)
	_ driver.ConnPrepareContext = (*failoverConn)(nil)
	_ driver.ExecerContext      = (*failoverConn)(nil)
	_ driver.QueryerContext     = (*failoverConn)(nil)
	_ driver.Pinger             = (*failoverConn)(nil)
	_ driver.SessionResetter    = (*failoverConn)(nil)
	_ driver.Validator          = (*failoverConn)(nil)
	_ driver.NamedValueChecker  = (*failoverConn)(nil)
)

func (c *failoverConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *failoverConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := c.conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.conn.Prepare(query)
	}
	if err != nil {
		return nil, c.note(err)
	}
	return &failoverStmt{Stmt: st, c: c}, nil
}

func (c *failoverConn) Close() error { return c.conn.Close() }

func (c *failoverConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *failoverConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.conn.(driver.ConnBeginTx)
	if !ok {
		return nil, driver.ErrSkip
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.note(err)
	}
	return failoverTx{tx: tx, c: c}, nil
}

func (c *failoverConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	return res, c.note(err)
}

func (c *failoverConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	return rows, c.note(err)
}

func (c *failoverConn) Ping(ctx context.Context) error {
	if p, ok := c.conn.(driver.Pinger); ok {
		return c.note(p.Ping(ctx))
	}
	return nil
}

// ResetSession refuses a connection whose server no longer takes writes:
// database/sql then closes it instead of handing it out.
func (c *failoverConn) ResetSession(ctx context.Context) error {
	if c.isBad() {
		return driver.ErrBadConn
	}
	if r, ok := c.conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid is false for a connection whose server no longer takes writes:
// database/sql closes it instead of putting it back in the pool.
func (c *failoverConn) IsValid() bool {
	if c.isBad() {
		return false
	}
	if v, ok := c.conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *failoverConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// failoverTx notes the errors of a transaction's end (a commit on a
// member expelled meanwhile fails with 3100).
type failoverTx struct {
	tx driver.Tx
	c  *failoverConn
}

func (t failoverTx) Commit() error   { return t.c.note(t.tx.Commit()) }
func (t failoverTx) Rollback() error { return t.c.note(t.tx.Rollback()) }

// failoverStmt notes the errors of a prepared statement's executions.
type failoverStmt struct {
	driver.Stmt
	c *failoverConn
}

var (
	_ driver.StmtExecContext   = (*failoverStmt)(nil)
	_ driver.StmtQueryContext  = (*failoverStmt)(nil)
	_ driver.NamedValueChecker = (*failoverStmt)(nil)
)

func (s *failoverStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.Stmt.(driver.StmtExecContext)
	if !ok {
		return nil, fmt.Errorf("lockgen: the driver's statement has no ExecContext")
	}
	res, err := e.ExecContext(ctx, args)
	return res, s.c.note(err)
}

func (s *failoverStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.Stmt.(driver.StmtQueryContext)
	if !ok {
		return nil, fmt.Errorf("lockgen: the driver's statement has no QueryContext")
	}
	rows, err := q.QueryContext(ctx, args)
	return rows, s.c.note(err)
}

func (s *failoverStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
