// Package stmtcount wraps a real database/sql driver connector and counts
// the statements sent to the server (exec, query and prepare), so tests can
// prove how many round trips an operation costs. It is a counter around the
// real driver, not a fake.
package stmtcount

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
)

// Connector counts the statements of every connection it opens.
type Connector struct {
	driver.Connector
	n atomic.Int64
}

// Wrap returns a counting Connector around c.
func Wrap(c driver.Connector) *Connector { return &Connector{Connector: c} }

// Count returns the number of statements sent so far.
func (c *Connector) Count() int64 { return c.n.Load() }

// Connect opens a counting connection.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: &c.n}, nil
}

// countingConn forwards to the real connection. It implements the optional
// interfaces the MySQL driver's connections implement, so database/sql
// takes the same paths it takes without the wrapper.
type countingConn struct {
	driver.Conn
	n *atomic.Int64
}

// ExecContext counts a statement unless the driver answered ErrSkip (it
// sent nothing: without interpolateParams, a statement with arguments is
// prepared and executed instead, and those are counted).
func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.n.Add(1)
	}
	return res, err
}

// QueryContext counts as ExecContext does.
func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.n.Add(1)
	}
	return rows, err
}

// PrepareContext counts the PREPARE, and the returned statement counts
// each execution.
func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.n.Add(1)
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, n: c.n}, nil
}

// countingStmt counts the executions of a prepared statement (closing one
// sends no statement that waits for an answer).
type countingStmt struct {
	driver.Stmt
	n *atomic.Int64
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.n.Add(1)
	if st, ok := s.Stmt.(driver.StmtExecContext); ok {
		return st.ExecContext(ctx, args)
	}
	return s.Stmt.Exec(values(args)) //lint:ignore SA1019 what database/sql calls when the driver's statement has no ExecContext
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.n.Add(1)
	if st, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return st.QueryContext(ctx, args)
	}
	return s.Stmt.Query(values(args)) //lint:ignore SA1019 what database/sql calls when the driver's statement has no QueryContext
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	return s.Stmt.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// values are the arguments' values, in order (the MySQL driver takes no
// named arguments).
func values(args []driver.NamedValue) []driver.Value {
	v := make([]driver.Value, len(args))
	for i, a := range args {
		v[i] = a.Value
	}
	return v
}

// BeginTx counts START TRANSACTION, plus the SET TRANSACTION the MySQL
// driver sends first for a non-default isolation level; COMMIT and ROLLBACK
// are counted by the returned transaction.
func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.n.Add(1)
	if opts.Isolation != driver.IsolationLevel(0) {
		c.n.Add(1)
	}
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, n: c.n}, nil
}

type countingTx struct {
	driver.Tx
	n *atomic.Int64
}

func (t countingTx) Commit() error {
	t.n.Add(1)
	return t.Tx.Commit()
}

func (t countingTx) Rollback() error {
	t.n.Add(1)
	return t.Tx.Rollback()
}

func (c *countingConn) Ping(ctx context.Context) error {
	return c.Conn.(driver.Pinger).Ping(ctx)
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *countingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}
