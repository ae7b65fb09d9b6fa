// Package spec loads and validates lockgen.yaml.
//
// Load never panics on any input and never returns a partially valid spec:
// it returns either a *Spec whose every field has been validated and
// defaulted, or an error listing every problem found, each as
// "file:line:col: what is wrong (how to fix it)", sorted by position.
package spec

import "time"

// Pos is a position in the spec file (1-based line and column).
type Pos struct {
	Line int
	Col  int
}

// Spec is a validated lockgen.yaml with defaults applied.
type Spec struct {
	// File is the path the spec was loaded from, as given to Load.
	File string
	// Version is the spec format version; only 1 exists.
	Version int
	// Package is the Go package name of the generated code: a lower-case
	// identifier ([a-z][a-z0-9_]*), never a Go keyword, never "main", never
	// ending in "_test".
	Package string
	// Out is the output directory of the generated Go code, relative to the
	// spec file's directory (cleaned, slash-separated, never absolute, never
	// escaping with ..). Default ".".
	Out string
	// Migrations says where and how migrations are written.
	Migrations Migrations
	// TablePrefix prefixes every table lockgen creates. Default "lockgen_".
	// It matches ^[a-z][a-z0-9_]{0,29}$, so it is a lower-case SQL
	// identifier that leaves at least 34 characters of MySQL's 64 for the
	// table name.
	TablePrefix string
	// Locks are the declared locks, in file order; there is at least one.
	// Their Names are unique, and so are their GoNames.
	Locks []Lock
}

// Migrations configures the migration files lockgen writes.
type Migrations struct {
	// Dir is relative to the spec file's directory (same rules as Out).
	// Default "migrations".
	Dir string
	// Format is "golang-migrate" (default) or "goose".
	Format string
}

// Migration formats.
const (
	FormatGolangMigrate = "golang-migrate"
	FormatGoose         = "goose"
)

// Strategies.
const (
	// StrategyLease is a row that expires by the database clock unless its
	// holder renews it (the default).
	StrategyLease = "lease"
	// StrategySession is a server-side named lock (GET_LOCK) on a pinned
	// connection, plus the lock row for the fencing token.
	StrategySession = "session"
	// StrategyRow holds the lock row's row lock (SELECT ... FOR UPDATE) in a
	// transaction that lasts the critical section; it has no ttl.
	StrategyRow = "row"
)

// Lock is one declared lock.
type Lock struct {
	// Pos is where the lock's mapping starts in the spec file.
	Pos Pos
	// Name is the snake_case name from the spec, e.g. "master" or "order":
	// it matches ^[a-z][a-z0-9]*(_[a-z0-9]+)*$ and has at most 64 bytes.
	Name string
	// GoName is CamelCase(Name): Name in CamelCase with common initialisms
	// upper-cased, e.g. "Master", "Order", "SendSMS", "UserID". It is a valid
	// exported Go identifier.
	GoName string
	// Strategy is "lease" (the default), "session" or "row".
	Strategy string
	// TTL is how long a lease lasts without renewal: 100ms to 24h. Zero
	// for strategy row, which has no ttl (and no RenewEvery).
	TTL time.Duration
	// RenewEvery is how often a held lease is renewed; default TTL/3,
	// must be > 0 and < TTL.
	RenewEvery time.Duration
	// Wait is how long With<Name>Lock waits before giving up with
	// ErrNotAcquired: 0 to 1h. Default 0 (try once).
	Wait time.Duration
	// Key, when set, makes the lock keyed: one lease per key value.
	Key *Key
	// Leader asks for the leader election methods RunAs<GoName>,
	// Is<GoName>Leader and <GoName>Leader. Only an unkeyed lock is a
	// leader (Key is nil).
	Leader bool
	// WaitMode is how a lease lock's waiters in other processes learn that
	// it freed: "server" (they wait in GET_LOCK on a wake lock each holding
	// holds) or "poll" (they poll the row with backoff). Default "server"
	// for an unkeyed lease lock that waits (wait > 0 or leader), "poll"
	// otherwise; empty for session and row locks, which always wait on the
	// server.
	WaitMode string
}

// Wait modes of a lease lock.
const (
	WaitModePoll   = "poll"
	WaitModeServer = "server"
)

// Key describes the key of a keyed lock.
type Key struct {
	// Pos is where the key's mapping starts in the spec file.
	Pos Pos
	// Name is the snake_case key name, e.g. "order_id" (same rules as
	// Lock.Name).
	Name string
	// GoName is LowerCamelCase(Name), the Go parameter name, e.g. "orderID".
	// It is a valid unexported Go identifier, never a Go keyword, never a
	// predeclared identifier (string, len, nil, ...), and never "ctx" or
	// "fn", the other parameters of the generated functions.
	GoName string
	// Type is the spec type: "int64", "string" or "uuid" (a string the
	// runtime checks and stores in canonical lower case).
	Type string
}
