package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/claimplace"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// Defaults and bounds of Config and of the list operations.
const (
	DefaultTablePrefix = "lockgen_"
	DefaultTimeout     = 5 * time.Second
	DefaultCountCap    = 10000
	// DefaultLimit is a list's page size when the request gives none;
	// MaxLimit the largest it may ask for.
	DefaultLimit = 50
	MaxLimit     = 500
	// ScanLimit is how many rows one page of a list reads at most to find
	// its items: a page with fewer items than asked, and a Next cursor,
	// means the rows read so far held no more.
	ScanLimit = 5000
)

// Config says which deployment the layer operates: its tables and what its
// lockgen.yaml declares.
type Config struct {
	// TablePrefix prefixes the tables' names (DefaultTablePrefix when
	// empty): <prefix>locks, <prefix>runs, <prefix>queues.
	TablePrefix string
	// Locks are the declared locks; Jobs the declared jobs; Queues the
	// declared queues besides the jobs' own.
	Locks  []Lock
	Jobs   []Job
	Queues []string
	// Timeout bounds each statement (DefaultTimeout when 0); a consumer's
	// claim is bounded by it as a whole (its rescue, pause read, clock
	// read and claim statements together).
	Timeout time.Duration
	// CountCap is how many index entries one count reads at most
	// (DefaultCountCap when 0).
	CountCap int
	// Store claims, heartbeats and records runs for consumers over HTTP
	// (Claim, Heartbeat, Complete, Fail): in an application, its generated
	// store (lockgendb.NewStore(db)). When nil, New uses the store lockgen
	// generates for the default table prefix, on db; with another prefix,
	// db must then be opened with Connector, or those operations answer
	// CodeUnavailable.
	Store driver.JobStore
}

// Lock is a declared lock.
type Lock struct {
	Name     string `json:"name"`
	Strategy string `json:"strategy"`
	Keyed    bool   `json:"keyed"`
	Leader   bool   `json:"leader"`
	// WaitOnServer is true for a lease lock whose waiters wait on the
	// server (wait_mode: server) rather than poll its row: the server can
	// then tell who waits.
	WaitOnServer bool `json:"wait_on_server,omitempty"`
}

// Job is a declared job.
type Job struct {
	Name  string `json:"name"`
	Queue string `json:"queue"`
	// Schedule and Timezone are the cron spec and its IANA zone of a
	// scheduled job; Schedule is empty otherwise.
	Schedule string `json:"schedule,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Args are the declared arguments, which Push checks.
	Args []Arg `json:"args,omitempty"`
	// MaxAttempts, Timeout and Priority are what a pushed run gets unless
	// the push overrides them (MaxAttempts 25 and Timeout 10m when 0, as
	// lockgen.yaml's defaults).
	MaxAttempts int           `json:"max_attempts,omitempty"`
	Timeout     time.Duration `json:"-"`
	Priority    int           `json:"priority,omitempty"`
	// BackoffInitial and BackoffMax bound the wait before a retry of a
	// run that failed over HTTP, as for a Go handler (jobs.Backoff; 1 s and
	// 1 h when 0).
	BackoffInitial time.Duration `json:"-"`
	BackoffMax     time.Duration `json:"-"`
}

// Ops runs the operations against one database. It is safe for concurrent
// use.
type Ops struct {
	db     *sql.DB
	cfg    Config
	q      queries
	store  driver.JobStore // nil: consuming over HTTP is unavailable
	rescue rescueGate
	// places are where the claims of each queue go on from (claimOnce),
	// for up to fromFirstEvery after a claim from the first.
	placesMu       sync.Mutex
	places         map[string]*claimplace.Place
	fromFirstEvery time.Duration
	// stopWaiting is closed by StopWaiting.
	stopWaiting chan struct{}
	stopOnce    sync.Once
	queues      []string // declared queues, sorted
	schedules   map[string]jobs.Schedule
}

// prefixPattern is what a table prefix may hold: it is pasted into SQL.
var prefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// New checks cfg and renders the SQL for its table prefix. It fails with
// an *Error (CodeInvalid) on a bad prefix or schedule; it does not touch
// the database. db must be opened as the runtime's pool is, with
// parseTime=true and loc=UTC: the tables hold UTC times.
func New(db *sql.DB, cfg Config) (*Ops, error) {
	if db == nil {
		return nil, invalid("db", "ops.New needs a database pool")
	}
	return build(db, cfg)
}

// OpenAPI is the OpenAPI description of the HTTP API for cfg (see
// Ops.OpenAPI), without a database: what `lockgen generate` writes beside
// the generated code. It fails as New does on a bad cfg.
func OpenAPI(cfg Config) (map[string]any, error) {
	o, err := build(nil, cfg)
	if err != nil {
		return nil, err
	}
	return o.OpenAPI(), nil
}

// build is New without the check of db.
func build(db *sql.DB, cfg Config) (*Ops, error) {
	if cfg.TablePrefix == "" {
		cfg.TablePrefix = DefaultTablePrefix
	}
	if !prefixPattern.MatchString(cfg.TablePrefix) {
		return nil, invalid("table_prefix", "table prefix %q must be letters, digits and underscores, not starting with a digit", cfg.TablePrefix)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.CountCap <= 0 {
		cfg.CountCap = DefaultCountCap
	}
	// A pool opened with Connector renames the default tables to its
	// prefix: the layer's own SQL then names the default tables too.
	sqlPrefix := cfg.TablePrefix
	if db != nil {
		switch p := connectorPrefix(db.Driver()); {
		case p != DefaultTablePrefix && p != cfg.TablePrefix:
			return nil, invalid("table_prefix", "the pool renames the tables to prefix %q, not the configured %q", p, cfg.TablePrefix)
		case p != DefaultTablePrefix:
			sqlPrefix = DefaultTablePrefix
		}
	}
	o := &Ops{db: db, cfg: cfg, q: render(sqlPrefix), store: cfg.Store, schedules: map[string]jobs.Schedule{}, stopWaiting: make(chan struct{}),
		fromFirstEvery: claimFromFirstEvery}
	if o.store == nil && db != nil && sqlPrefix == DefaultTablePrefix {
		o.store = defaultStore(db)
	}
	queues := slices.Clone(cfg.Queues)
	for _, j := range cfg.Jobs {
		if j.Queue == "" {
			j.Queue = jobs.DefaultQueue
		}
		queues = append(queues, j.Queue)
		if j.Schedule != "" {
			s, err := jobs.ParseSchedule(j.Schedule, j.Timezone)
			if err != nil {
				return nil, invalid("jobs", "job %q: %v", j.Name, err)
			}
			o.schedules[j.Name] = s
		}
	}
	slices.Sort(queues)
	o.queues = slices.Compact(queues)
	return o, nil
}

// Config returns the configuration, defaults filled in.
func (o *Ops) Config() Config { return o.cfg }

// DeclaredQueues returns the declared queues, sorted.
func (o *Ops) DeclaredQueues() []string { return slices.Clone(o.queues) }

// Code classifies an *Error for the doors: an HTTP status, a CLI exit.
type Code string

// The codes of Error.
const (
	// CodeInvalid: the request is wrong (HTTP 400, CLI exit 2).
	CodeInvalid Code = "invalid"
	// CodeNotFound: no such run (HTTP 404).
	CodeNotFound Code = "not_found"
	// CodeConflict: the run's state does not allow the change (HTTP 409).
	CodeConflict Code = "conflict"
	// CodeForbidden: the door refused a write (HTTP 403).
	CodeForbidden Code = "forbidden"
	// CodeCancelled: an operator cancelled the run a consumer works on:
	// it should stop (HTTP 409).
	CodeCancelled Code = "cancelled"
	// CodeUnavailable: the operation cannot be done now (HTTP 503): the
	// run's row is held by another transaction for a moment, or the layer
	// was built without a store to consume with.
	CodeUnavailable Code = "unavailable"
)

// Error is an operation refused because of its input or the state of what
// it names. Nothing was written.
type Error struct {
	Code Code `json:"code"`
	// Field names the input at fault (for CodeInvalid), as the API spells
	// it.
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Code == CodeInvalid
	case ErrNotFound:
		return e.Code == CodeNotFound
	case ErrConflict:
		return e.Code == CodeConflict
	case ErrForbidden:
		return e.Code == CodeForbidden
	case ErrCancelled:
		return e.Code == CodeCancelled
	case ErrUnavailable:
		return e.Code == CodeUnavailable
	}
	return false
}

// Sentinels for errors.Is on an *Error.
var (
	ErrInvalid   = errors.New("ops: invalid request")
	ErrNotFound  = errors.New("ops: not found")
	ErrConflict  = errors.New("ops: conflict")
	ErrForbidden = errors.New("ops: forbidden")
	// ErrCancelled is a consumer's run cancelled by an operator.
	ErrCancelled   = errors.New("ops: cancelled")
	ErrUnavailable = errors.New("ops: unavailable")
)

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// checkName checks a queue, job or lock name given by a request.
func checkName(field, name string, max int) error {
	switch {
	case name == "" || len(name) > max:
		return invalid(field, "%s must be 1 to %d bytes", field, max)
	case !utf8.ValidString(name):
		return invalid(field, "%s is not valid UTF-8", field)
	}
	return nil
}

// checkQueue accepts a declared queue only: a pause of a queue no job uses
// would be a typo that silently does nothing.
func (o *Ops) checkQueue(queue string) error {
	if err := checkName("queue", queue, jobs.MaxQueue); err != nil {
		return err
	}
	if !slices.Contains(o.queues, queue) {
		return invalid("queue", "no job uses queue %q (the queues are %s)", queue, strings.Join(o.queues, ", "))
	}
	return nil
}

// checkJob accepts a declared job only.
func (o *Ops) checkJob(job string) error {
	if err := checkName("job", job, jobs.MaxJobName); err != nil {
		return err
	}
	for _, j := range o.cfg.Jobs {
		if j.Name == job {
			return nil
		}
	}
	names := make([]string, len(o.cfg.Jobs))
	for i, j := range o.cfg.Jobs {
		names[i] = j.Name
	}
	return invalid("job", "no job is named %q (the jobs are %s)", job, strings.Join(names, ", "))
}

// checkLimit fills in and bounds a page size.
func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultLimit, nil
	case limit < 0 || limit > MaxLimit:
		return 0, invalid("limit", "limit must be 1 to %d", MaxLimit)
	}
	return limit, nil
}

// bounded returns ctx bounded by the statement timeout.
func (o *Ops) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.cfg.Timeout)
}

// peek runs fn in a read-only READ UNCOMMITTED transaction: the locks
// table's row holdings are uncommitted rows, and a look that takes no
// lock must see them.
func (o *Ops) peek(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := o.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}
