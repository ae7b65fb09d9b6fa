package ops

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
)

// Connector returns a connector whose connections run the statements of
// the store lockgen generates for the default table prefix (lockgen_) on
// the tables of prefix instead: it renames lockgen_locks, lockgen_runs and
// lockgen_queues (and the indexes named after them) in every statement's
// text before the driver sees it; arguments are never touched. With the
// default prefix it returns c itself.
//
// A tool that has no generated package of its own (lockgen serve) opens
// its pool with it, so that New can claim and record runs for consumers
// over HTTP with that store whatever the deployment's prefix. An
// application sets Config.Store to its own generated store instead. It
// fails with an *Error (CodeInvalid) on a prefix New would refuse.
func Connector(c driver.Connector, prefix string) (driver.Connector, error) {
	if prefix == "" || prefix == DefaultTablePrefix {
		return c, nil
	}
	if !prefixPattern.MatchString(prefix) {
		return nil, invalid("table_prefix", "table prefix %q must be letters, digits and underscores, not starting with a digit", prefix)
	}
	var pairs []string
	for _, t := range []string{"locks", "runs", "queues"} {
		pairs = append(pairs, DefaultTablePrefix+t, prefix+t)
	}
	return &prefixConnector{base: c, prefix: prefix, rename: strings.NewReplacer(pairs...)}, nil
}

// connectorPrefix is the prefix a pool opened with Connector renames the
// default tables to: DefaultTablePrefix for any other pool.
func connectorPrefix(d driver.Driver) string {
	if p, ok := d.(prefixDriver); ok {
		return p.c.prefix
	}
	return DefaultTablePrefix
}

type prefixConnector struct {
	base   driver.Connector
	prefix string
	rename *strings.Replacer
}

func (c *prefixConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &prefixConn{Conn: conn, rename: c.rename}, nil
}

func (c *prefixConnector) Driver() driver.Driver { return prefixDriver{c} }

// prefixDriver is the Driver of a pool opened with Connector; it opens
// connections through the connector only.
type prefixDriver struct{ c *prefixConnector }

func (prefixDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("ops: a pool of ops.Connector opens its connections through the connector")
}

// prefixConn renames the tables in every statement and passes every
// optional interface of database/sql through to the driver's connection.
type prefixConn struct {
	driver.Conn
	rename *strings.Replacer
}

func (c *prefixConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(c.rename.Replace(query))
}

func (c *prefixConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, c.rename.Replace(query))
	}
	return c.Prepare(query)
}

func (c *prefixConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.Conn.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, c.rename.Replace(query), args)
	}
	return nil, driver.ErrSkip
}

func (c *prefixConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.Conn.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, c.rename.Replace(query), args)
	}
	return nil, driver.ErrSkip
}

func (c *prefixConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return nil, errors.New("ops: the driver's connection cannot begin a transaction with options (driver.ConnBeginTx)")
}

func (c *prefixConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *prefixConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *prefixConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *prefixConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
