// Package spec loads and validates lockgen.yaml.
//
// Load never panics on any input and never returns a partially valid spec:
// it returns either a *Spec whose every field has been validated and
// defaulted, or an error listing every problem found, each as
// "file:line:col: what is wrong (how to fix it)", sorted by position.
package spec

import (
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/jobs"
)

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
	// Locks are the declared locks, in file order; there is at least one
	// unless the spec declares jobs. Their Names are unique, and so are
	// their GoNames.
	Locks []Lock
	// Queues are the job queues: those declared under queues:, in file
	// order, then the implicit queue "default" (with
	// DefaultQueueConcurrency) when a job uses it without it being
	// declared. Their Names are unique, and every Job.Queue is one of
	// them. Empty when there are no jobs.
	Queues []Queue
	// Jobs are the declared jobs, in file order. Their Names are unique,
	// and so are their GoNames, and no two jobs share a generated Go name
	// (see Job.Names).
	Jobs []Job
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

// Strategies, spelled as in the spec and in the runtime.
const (
	// StrategyLease is a row that expires by the database clock unless its
	// holder renews it (the default).
	StrategyLease = string(runtime.StrategyLease)
	// StrategySession is a server-side named lock (GET_LOCK) on a pinned
	// connection, plus the lock row for the fencing token.
	StrategySession = string(runtime.StrategySession)
	// StrategyRow holds the lock row's row lock (SELECT ... FOR UPDATE) in a
	// transaction that lasts the critical section; it has no ttl.
	StrategyRow = string(runtime.StrategyRow)
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
	// IdleTimeout is a row lock's idle_timeout: how long the server keeps
	// a holding's session when nothing arrives on it (whole seconds, 1s to
	// 24h). Zero for the runtime's default (20s), and for other strategies.
	IdleTimeout time.Duration
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

// Catch-up policies of a scheduled job: what its scheduler does with the
// ticks it missed while no node was running it; spelled as in the spec
// and in the runtime.
const (
	// CatchUpNone skips every missed tick.
	CatchUpNone = string(jobs.CatchUpNone)
	// CatchUpOne runs once for all the missed ticks (the default).
	CatchUpOne = string(jobs.CatchUpOne)
	// CatchUpAll runs once for every missed tick.
	CatchUpAll = string(jobs.CatchUpAll)
)

// Arg types: the spec spellings of Arg.Type.
const (
	ArgInt64    = "int64"    // Go int64
	ArgInt32    = "int32"    // Go int32
	ArgString   = "string"   // Go string
	ArgBool     = "bool"     // Go bool
	ArgFloat64  = "float64"  // Go float64
	ArgTime     = "time"     // Go time.Time
	ArgDuration = "duration" // Go time.Duration
	ArgStrings  = "[]string" // Go []string
	// ArgJSON is a value of a named Go type of the user's, stored as JSON;
	// the spec writes it json(<import path>.<TypeName>).
	ArgJSON = "json"
)

// Job is one declared job. A job with a Schedule is scheduled: its
// scheduler inserts one run per tick. A job without one is enqueued by the
// application. A scheduled job that declares Args can be enqueued too (its
// scheduled runs get zero-valued args). See Scheduled and Enqueueable.
type Job struct {
	// Pos is where the job's mapping starts in the spec file.
	Pos Pos
	// Name is the snake_case name from the spec, e.g. "nightly_report"
	// (same rules as Lock.Name). Job names are a namespace of their own:
	// a job and a lock may share a name.
	Name string
	// GoName is CamelCase(Name), e.g. "NightlyReport", "SendSMS": a valid
	// exported Go identifier.
	GoName string
	// Schedule is the cron schedule from the spec, its runs of white space
	// made single spaces and trimmed: 5 fields
	// (minute hour day-of-month month day-of-week), 6 with seconds first,
	// a descriptor (@yearly, @annually, @monthly, @weekly, @daily,
	// @midnight, @hourly) or "@every <duration>" with a whole number of
	// seconds, at least 1s. jobs.ParseSchedule, which the generated
	// RunJobs calls, accepts it: it has no TZ= or CRON_TZ= prefix and fires
	// at least once in five years.
	// Empty for a job that is not scheduled.
	Schedule string
	// Timezone is the IANA time zone the Schedule is read in, e.g.
	// "Asia/Shanghai"; time.LoadLocation accepts it and it is never
	// "Local". Default "UTC" for a scheduled job; empty for a job that is
	// not.
	Timezone string
	// Args are the job's typed arguments in declaration order; nil when it
	// declares none (never empty but non-nil). Their Names are unique, and
	// so are their GoNames.
	Args []Arg
	// Queue is the name of the queue the job's runs go to, one of
	// Spec.Queues. Default "default".
	Queue string
	// Timeout is how long a run may take before its context is cancelled
	// and it counts as failed: 1s to 24h. Default 10m.
	Timeout time.Duration
	// MaxAttempts is how many times a run is tried before it is discarded:
	// 1 (no retry) to 1000. Default 25.
	MaxAttempts int
	// BackoffInitial is the wait before the first retry of a failed run:
	// 10ms to 24h. Default 1s, or BackoffMax if that is shorter.
	BackoffInitial time.Duration
	// BackoffMax caps the wait between retries: BackoffInitial to 24h.
	// Default 1h, or BackoffInitial if that is longer.
	BackoffMax time.Duration
	// Priority orders due runs of a queue: higher runs first; -100 to 100.
	// Default 0.
	Priority int
	// CatchUp is what the scheduler does with missed ticks: "none", "one"
	// or "all" (CatchUp* constants). Default "one" for a scheduled job;
	// empty for a job that is not scheduled.
	CatchUp string
	// MinInterval is the least time between two ticks that run (like
	// ShedLock's lockAtLeastFor, but measured between ticks, not run
	// starts): a tick sooner than this after the last tick with a run is
	// skipped and recorded. 0 to 24h, and for an "@every" schedule at most
	// its interval. Default 0; always 0 for a job that is not scheduled.
	MinInterval time.Duration
	// Retention is how long finished runs are kept before they are pruned:
	// 1m to 8760h (a year). Default 168h (a week).
	Retention time.Duration
	// Concurrency limits the runs of the job at once across the cluster:
	// 0 (the default) is no limit beyond its queue's, 1 makes the job a
	// cluster-wide singleton. No other value is accepted yet.
	Concurrency int
}

// Scheduled reports whether the job has a schedule.
func (j Job) Scheduled() bool {
	return j.Schedule != ""
}

// Enqueueable reports whether the application can enqueue the job, and so
// whether Enqueue<GoName> and <GoName>Args are generated for it: a job
// without a schedule, or one that declares args.
func (j Job) Enqueueable() bool {
	return j.Schedule == "" || len(j.Args) > 0
}

// Names returns the Go names generated for j, in order: the handler method
// <GoName>, the argument struct <GoName>Args and the Methods. Load rejects
// specs in which two jobs would share one of them (whether or not the job
// is Enqueueable or has args), so the generator can put them in one
// namespace.
func (j Job) Names() []string {
	return append([]string{j.GoName, j.GoName + "Args"}, j.Methods()...)
}

// Methods returns the enqueue methods named for j, in order:
// Enqueue<GoName>, Enqueue<GoName>Tx and Enqueue<GoName>Many. The generator
// writes the first two for an Enqueueable job and the third when it also
// has args; Load checks all three against other jobs and locks either way.
func (j Job) Methods() []string {
	e := "Enqueue" + j.GoName
	return []string{e, e + "Tx", e + "Many"}
}

// Arg is one typed argument of a job; it becomes a field of the job's
// <GoName>Args struct.
type Arg struct {
	// Pos is where the argument's name is in the spec file.
	Pos Pos
	// Name is the snake_case name from the spec, e.g. "order_id" (same
	// rules as Lock.Name).
	Name string
	// GoName is CamelCase(Name), the exported struct field, e.g. "OrderID".
	GoName string
	// Type is the spec spelling of the type, one of the Arg* constants:
	// "int64", "int32", "string", "bool", "float64", "time", "duration",
	// "[]string" or "json".
	Type string
	// GoType is the Go type: "int64", "int32", "string", "bool",
	// "float64", "time.Time", "time.Duration", "[]string", or for "json"
	// the exported type name (e.g. "Payload") in the package Import.
	GoType string
	// Import is the import path of GoType's package for "json", e.g.
	// "example.com/app/model"; empty for every other type.
	Import string
}

// Queue is a job queue: the runs of the jobs in it share its workers.
type Queue struct {
	// Pos is where the queue's mapping starts in the spec file; zero for
	// the implicit "default" queue.
	Pos Pos
	// Name is the snake_case name, e.g. "default" or "mail" (same rules as
	// Lock.Name).
	Name string
	// Concurrency is how many of the queue's runs each node handles at
	// once: 1 to 10000. Default 100.
	Concurrency int
	// External marks a queue worked outside the Go program, by consumers
	// of the HTTP API (lockgen serve, or lockgenapi mounted by the
	// application): the generated JobHandlers has no method for its jobs
	// and RunJobs claims none of its runs (it still inserts their
	// scheduled ticks and prunes them). It takes no concurrency, and its
	// jobs none.
	External bool
}
