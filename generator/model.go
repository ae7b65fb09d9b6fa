package generator

import (
	"fmt"
	"path"
	"path/filepath"
	"time"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/ops"
	"github.com/lockgen/lockgen/templates"
)

// Names of the files and packages lockgen writes; not configurable.
const (
	dbPackage     = "lockgendb"
	wrappersFile  = "lockgen.go"
	storeFile     = "lockgen_store.go"
	schemaFile    = "schema.sql"
	queriesFile   = "queries.sql"
	tableBaseName = "locks"
)

// Import paths the generated code uses besides the standard library.
const runtimePath = "github.com/lockgen/lockgen/runtime"

// driverPath is the import path of the runtime's driver package, which the
// generated store implements.
const driverPath = runtimePath + "/driver"

// probePath is the import path of the runtime's server probe, whose
// features the generated CheckServer checks.
const probePath = runtimePath + "/probe"

// jobsPath is the import path of the runtime's jobs package, which the
// generated job methods call.
const jobsPath = runtimePath + "/jobs"

// versionGuard is the runtime constant every generated package refers to,
// so that it fails to build against a runtime it does not fit (see
// runtime.RegenerateWithLockgenGenerateV12).
const versionGuard = "RegenerateWithLockgenGenerateV12"

// The runtime of this repository must define versionGuard: bumping its
// version breaks this line until versionGuard follows.
const _ = runtime.RegenerateWithLockgenGenerateV12

// model is everything the renderers print, resolved from a spec. Renderers
// take no decisions: names, types, paths and doc text all come from here.
type model struct {
	// Package is the Go package name of the generated wrappers.
	Package string
	// SpecName is the spec file's base name, as named in doc comments.
	SpecName string
	// OutDir is the slash path of the Go output, relative to the spec dir.
	OutDir string
	// DBDir is OutDir/lockgendb; DBPackage its package name; DBImport its
	// Go import path.
	DBDir, DBPackage, DBImport string
	// SchemaPath and QueriesPath are the SQL files of DBDir.
	SchemaPath, QueriesPath string
	// TablePrefix is the validated prefix; Table the lock table's name.
	TablePrefix, Table string
	// Migrations are the migration files to render, in path order, and
	// MigrationsDir their directory relative to the spec dir.
	Migrations    []sqlFile
	MigrationsDir string
	// LocksMigration, RunsMigration and QueuesMigration are the paths,
	// relative to the spec dir, of the migrations that create the lock,
	// runs and queues tables (the up file); the last two are empty without
	// jobs.
	LocksMigration, RunsMigration, QueuesMigration string
	// HistoryMigration is the path of the migration that adds the runs'
	// history column, empty without jobs.
	HistoryMigration string
	// HeadersMigration is the path of the migration that adds the runs'
	// headers column, empty without jobs.
	HeadersMigration string
	// LocksSessionMigration is the path of the migration that adds the
	// lock table's session reservation columns.
	LocksSessionMigration string
	// Ops is what the operations layer needs of the spec (OpsConfig):
	// printed as the package's OpsConfig, and the source of openapi.json.
	Ops ops.Config
	// RunsTable and QueuesTable are the runs and queues tables' names;
	// empty without jobs.
	RunsTable, QueuesTable string
	// Receiver is the receiver name of the Locks methods; it differs from
	// every key parameter.
	Receiver string
	// Locks are the declared locks, in spec order.
	Locks []lockModel
	// Jobs are the declared jobs, in spec order, and Queues their queues
	// (none without jobs).
	Jobs   []jobModel
	Queues []spec.Queue
}

// sqlFile is one SQL output file and the template that renders it.
type sqlFile struct {
	Path     string
	Template string
}

// lockModel is one declared lock, with every Go name it needs.
type lockModel struct {
	// Name is the lock's name in the spec and in the lock table.
	Name string
	// GoName is Name in CamelCase ("Order").
	GoName string
	// NameConst is the exported constant holding Name ("OrderLockName").
	NameConst string
	// Field is the unexported Locks field holding the *runtime.Lock.
	Field string
	// Method names. Prune is empty for an unkeyed lock, WithTx for any
	// strategy but row.
	With, Try, Acquire, Holder, Prune, WithTx string
	TTL, RenewEvery, Wait                     time.Duration
	// IdleTimeout is a row lock's idle_timeout; zero for the default.
	IdleTimeout time.Duration
	// Strategy is the spec's strategy (spec.StrategyLease, ...).
	Strategy string
	// Session is true for the session strategy (GET_LOCK on a pinned
	// connection), false for the default lease strategy.
	Session bool
	// Row is true for the row strategy (SELECT ... FOR UPDATE in a
	// transaction held for the critical section); it has no TTL.
	Row bool
	// WaitOnServer is true for a lease lock with wait_mode server.
	WaitOnServer bool
	// Key is nil for an unkeyed lock.
	Key *keyModel
	// Leader is nil unless the lock declares leader: true.
	Leader *leaderModel
}

// leaderModel names the leader election methods of a leader lock.
type leaderModel struct {
	// RunAs campaigns ("RunAsMaster"), IsLeader reports whether this Locks
	// leads ("IsMasterLeader"), Current reads the leader ("MasterLeader").
	RunAs, IsLeader, Current string
}

// keyModel is the key of a keyed lock.
type keyModel struct {
	// Name is the snake_case key name ("order_id").
	Name string
	// Param is the Go parameter name ("orderID").
	Param string
	// GoType is the parameter's Go type: "int64" or "string".
	GoType string
	// Decimal is true when the key is formatted with strconv.FormatInt.
	Decimal bool
	// UUID is true for a uuid key: a string the runtime canonicalizes.
	UUID bool
}

// resolve builds the model of s, whose file is in the absolute directory
// specDir. It fails when no go.mod encloses the output directory.
func resolve(s *spec.Spec, specDir string) (*model, error) {
	outAbs := filepath.Join(specDir, filepath.FromSlash(s.Out))
	outImport, err := importPath(outAbs, filepath.Join(filepath.Dir(s.File), filepath.FromSlash(s.Out)))
	if err != nil {
		return nil, err
	}
	dbDir := path.Join(s.Out, dbPackage)
	m := &model{
		Package:     s.Package,
		SpecName:    filepath.Base(s.File),
		OutDir:      s.Out,
		DBDir:       dbDir,
		DBPackage:   dbPackage,
		DBImport:    path.Join(outImport, dbPackage),
		SchemaPath:  path.Join(dbDir, schemaFile),
		QueriesPath: path.Join(dbDir, queriesFile),
		TablePrefix: s.TablePrefix,
		Table:       s.TablePrefix + tableBaseName,
		Migrations:  migrations(s.Migrations, s.TablePrefix),
		// The runtime names it in the error for missing tables.
		MigrationsDir: s.Migrations.Dir,
		// And these in the errors for a table missing or unlike them.
		LocksMigration:        s.Migrations.File(spec.LocksMigration, s.TablePrefix+tableBaseName, spec.Up),
		LocksSessionMigration: s.Migrations.File(spec.LocksSessionMigration, s.TablePrefix+tableBaseName+locksSessionMigrationSuffix, spec.Up),
	}
	for _, lk := range s.Locks {
		m.Locks = append(m.Locks, resolveLock(lk))
	}
	m.Ops = OpsConfig(s)
	if len(s.Jobs) > 0 {
		m.Jobs, m.Queues = resolveJobs(s), s.Queues
		m.RunsTable = s.TablePrefix + runsTableBaseName
		m.RunsMigration = s.Migrations.File(spec.RunsMigration, m.RunsTable, spec.Up)
		m.QueuesTable = s.TablePrefix + queuesTableBaseName
		m.QueuesMigration = s.Migrations.File(spec.QueuesMigration, m.QueuesTable, spec.Up)
		m.HistoryMigration = s.Migrations.File(spec.HistoryMigration, m.RunsTable+historyMigrationSuffix, spec.Up)
		m.HeadersMigration = s.Migrations.File(spec.HeadersMigration, m.RunsTable+headersMigrationSuffix, spec.Up)
		m.Migrations = append(m.Migrations, runsMigrations(s.Migrations, s.TablePrefix)...)
	}
	m.Migrations = append(m.Migrations, locksSessionMigrations(s.Migrations, s.TablePrefix)...)
	m.Receiver = receiverName(m.Locks)
	for i := range m.Locks {
		if k := m.Locks[i].Key; k != nil && k.Decimal && k.Param == "strconv" {
			// The method body calls strconv.FormatInt; rename the parameter
			// so it does not shadow the package (callers never see it).
			k.Param += "Key"
		}
	}
	return m, nil
}

// resolveLock names the Go identifiers of one lock.
func resolveLock(lk spec.Lock) lockModel {
	g := lk.GoName
	m := lockModel{
		Name:        lk.Name,
		GoName:      g,
		NameConst:   g + "LockName",
		Field:       spec.LowerCamelCase(lk.Name) + "Lock",
		With:        "With" + g + "Lock",
		Try:         "Try" + g + "Lock",
		Acquire:     "Acquire" + g + "Lock",
		Holder:      g + "LockHolder",
		TTL:         lk.TTL,
		RenewEvery:  lk.RenewEvery,
		Wait:        lk.Wait,
		IdleTimeout: lk.IdleTimeout,
		Strategy:    lk.Strategy,
		Session:     lk.Strategy == spec.StrategySession,
		Row:         lk.Strategy == spec.StrategyRow,
		// WaitOnServer: the spec's wait_mode, server for lease locks only.
		WaitOnServer: lk.WaitMode == spec.WaitModeServer,
	}
	if m.Row {
		m.WithTx = m.With + "Tx"
	}
	if lk.Leader {
		m.Leader = &leaderModel{RunAs: "RunAs" + g, IsLeader: "Is" + g + "Leader", Current: g + "Leader"}
	}
	if lk.Key != nil {
		m.Prune = "Prune" + g + "Locks"
		m.Key = &keyModel{
			Name:    lk.Key.Name,
			Param:   lk.Key.GoName,
			GoType:  goKeyType(lk.Key.Type),
			Decimal: lk.Key.Type == "int64",
			UUID:    lk.Key.Type == "uuid",
		}
	}
	return m
}

// receiverName returns "l", or the first of "ls", "l2", "l3", ... that no
// key parameter uses.
func receiverName(locks []lockModel) string {
	used := map[string]bool{}
	for _, lk := range locks {
		if lk.Key != nil {
			used[lk.Key.Param] = true
		}
	}
	for _, name := range []string{"l", "ls"} {
		if !used[name] {
			return name
		}
	}
	for i := 2; ; i++ {
		if name := fmt.Sprintf("l%d", i); !used[name] {
			return name
		}
	}
}

// migrations returns the migration files of the lock table for m's format
// in m's directory.
func migrations(m spec.Migrations, prefix string) []sqlFile {
	return migrationFiles(m, spec.LocksMigration, prefix+tableBaseName, templates.GooseLocks, templates.LocksDown, templates.LocksUp)
}

// locksSessionMigrationSuffix ends the name of the migration that adds the
// lock table's session reservation columns: 0006_<prefix>locks_session.
const locksSessionMigrationSuffix = "_session"

// locksSessionMigrations are the migration files that add the lock table's
// session reservation columns: number 6, after the runs table's, so that
// a database made by the earlier migrations (with or without jobs) is
// upgraded in place.
func locksSessionMigrations(m spec.Migrations, prefix string) []sqlFile {
	return migrationFiles(m, spec.LocksSessionMigration, prefix+tableBaseName+locksSessionMigrationSuffix, templates.GooseLocksSession, templates.LocksSessionDown, templates.LocksSessionUp)
}

// historyMigrationSuffix ends the name of the migration that adds the runs
// table's history column: 0004_<prefix>runs_history.
const historyMigrationSuffix = "_history"

// headersMigrationSuffix ends the name of the migration that adds the runs
// table's headers column: 0005_<prefix>runs_headers.
const headersMigrationSuffix = "_headers"

// runsMigrations are the migration files of the runs table, the queues
// table and the runs' history and headers columns: always new files after
// the lock table's, so adding jobs never rewrites a migration, and the
// queues table and the columns (added later) upgrade a database made by
// the earlier migrations in place.
func runsMigrations(m spec.Migrations, prefix string) []sqlFile {
	runs := migrationFiles(m, spec.RunsMigration, prefix+runsTableBaseName, templates.GooseRuns, templates.RunsDown, templates.RunsUp)
	runs = append(runs, migrationFiles(m, spec.QueuesMigration, prefix+queuesTableBaseName, templates.GooseQueues, templates.QueuesDown, templates.QueuesUp)...)
	runs = append(runs, migrationFiles(m, spec.HistoryMigration, prefix+runsTableBaseName+historyMigrationSuffix, templates.GooseHistory, templates.HistoryDown, templates.HistoryUp)...)
	return append(runs, migrationFiles(m, spec.HeadersMigration, prefix+runsTableBaseName+headersMigrationSuffix, templates.GooseHeaders, templates.HeadersDown, templates.HeadersUp)...)
}

// migrationFiles names migration number n of base in m's format: one goose
// file, or a down and an up file, from the given templates.
func migrationFiles(m spec.Migrations, n int, base, goose, down, up string) []sqlFile {
	if m.Format == spec.FormatGoose {
		return []sqlFile{{Path: m.File(n, base, spec.Up), Template: goose}}
	}
	return []sqlFile{
		{Path: m.File(n, base, spec.Down), Template: down},
		{Path: m.File(n, base, spec.Up), Template: up},
	}
}

// goKeyType is the Go parameter type of a spec key type: uuid keys are
// strings (canonicalized by the runtime), the others are their own type.
func goKeyType(specType string) string {
	if specType == "uuid" {
		return "string"
	}
	return specType
}
