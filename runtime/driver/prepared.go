package driver

import (
	"context"
	"database/sql"
	"sync"

	"github.com/lockgen/lockgen/runtime/internal/servererr"
)

// PreparedDB is a pool (the DBTX of a generated queries package) that runs
// the statements it was given as prepared statements, each prepared once
// per connection, and everything else as it comes. The server then parses
// a hot statement once per connection instead of at every call, and the
// client sends its arguments in binary instead of building the text: the
// lease pair and Enqueue, one statement each, cost the server about a
// fifth less CPU prepared on this project's 2-core machine (see
// docs/decisions.md, "The lease statements and Enqueue's insert are
// prepared"). A prepared statement is one round trip per call, like the
// interpolated text (and one fewer than text sent without
// interpolateParams, which the driver prepares, executes and closes); a
// connection's first call of a statement adds one for the prepare.
//
// It only prepares statements run with ExecContext; QueryContext,
// QueryRowContext and PrepareContext go to the pool unchanged. When a
// prepare fails (too many prepared statements, error 1461; a statement the
// server cannot prepare, 1295; a proxy that refuses; any other error), the
// statement goes as text, and so do the next 100 of the given statements
// before one is prepared again; the text statement reports its own error,
// if there is one. A statement that failed for want of a prepared
// statement did not run, so sending it again as text never runs it twice.
// With interpolateParams=false in the DSN the driver prepares text too,
// so past the server's max_prepared_stmt_count both fail.
//
// The statements stay prepared until their connection closes: make one
// PreparedDB (one generated Store) per pool, not one per request. Safe for
// concurrent use.
type PreparedDB struct {
	db      *sql.DB
	prepare map[string]bool // the statements to run prepared
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	text    textFallback
}

// NewPreparedDB returns db, running the statements queries (their exact
// text, as ExecContext receives it) prepared.
func NewPreparedDB(db *sql.DB, queries ...string) *PreparedDB {
	p := &PreparedDB{db: db, prepare: map[string]bool{}, stmts: map[string]*sql.Stmt{}}
	for _, q := range queries {
		p.prepare[q] = true
	}
	return p
}

// ExecContext runs query with args: prepared when query is one of the
// statements given to NewPreparedDB, as text otherwise. Its results and
// errors are those of sql.DB.ExecContext.
func (p *PreparedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if p.prepare[query] {
		if stmt := p.stmt(ctx, query); stmt != nil {
			res, err := stmt.ExecContext(ctx, args...)
			if !servererr.IsNotPreparable(err) {
				return res, err
			}
			p.text.start()
		}
	}
	return p.db.ExecContext(ctx, query, args...)
}

// QueryContext is sql.DB.QueryContext.
func (p *PreparedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.db.QueryContext(ctx, query, args...)
}

// QueryRowContext is sql.DB.QueryRowContext.
func (p *PreparedDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.db.QueryRowContext(ctx, query, args...)
}

// PrepareContext is sql.DB.PrepareContext.
func (p *PreparedDB) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.db.PrepareContext(ctx, query)
}

// stmt returns query's prepared statement, preparing it the first time,
// or nil when the statement goes as text this time (after a failed
// prepare: database/sql prepares an existing statement again on each
// connection that has not run it, which fails the same way).
func (p *PreparedDB) stmt(ctx context.Context, query string) *sql.Stmt {
	if p.text.take() {
		return nil
	}
	p.mu.Lock()
	stmt := p.stmts[query]
	p.mu.Unlock()
	if stmt != nil {
		return stmt
	}
	stmt, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		p.text.start()
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prepared := p.stmts[query]; prepared != nil { // another call prepared it meanwhile
		_ = stmt.Close()
		return prepared
	}
	p.stmts[query] = stmt
	return stmt
}

// textFallback counts down the statements that go as text after the server
// would not prepare one.
type textFallback struct {
	mu   sync.Mutex
	left int
}

// start sends the next prepareBackoff statements as text.
func (f *textFallback) start() {
	f.mu.Lock()
	f.left = prepareBackoff
	f.mu.Unlock()
}

// take reports whether this statement goes as text, counting it.
func (f *textFallback) take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left == 0 {
		return false
	}
	f.left--
	return true
}
