// Package doctor checks a database server against what lockgen needs, for
// `lockgen doctor`: the server's probe (runtime/probe, the same checks the
// runtime makes at first use), each declared strategy and the job queue,
// the server's timeouts against the spec's TTLs and waits, the tables, the
// current user's grants on them, and the connection settings lockgen
// depends on. A Result says, in plain words, what works, what is refused
// and why.
package doctor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/runtime/probe"
)

// Options say what to check.
type Options struct {
	// DSN is the go-sql-driver/mysql DSN, used as given (doctor reports its
	// parseTime and loc as they are).
	DSN string
	// Spec is the loaded lockgen.yaml; nil checks every strategy and the
	// jobs against the default table prefix.
	Spec *spec.Spec
}

// Run connects, probes and checks. It fails only when the DSN is bad or the
// server cannot be reached; everything else is a Check.
func Run(ctx context.Context, o Options) (*Result, error) {
	cfg, err := mysql.ParseDSN(o.DSN)
	if err != nil {
		// The parser's message can quote the password: never show it.
		return nil, errors.New("bad DSN: expected go-sql-driver/mysql's form user:password@tcp(host:port)/dbname?parseTime=true (a password with / or @ in it must be URL-safe)")
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, errors.New("bad DSN: the driver refused its settings")
	}
	db := sql.OpenDB(c)
	defer db.Close()
	db.SetMaxOpenConns(1)

	uses, kinds := declared(o.Spec)
	var tables []string
	for _, k := range kinds {
		if !k.column {
			tables = append(tables, k.name)
		}
	}
	report, err := probe.Run(ctx, db, tables...)
	// A user with no privilege in the database (none granted, or only
	// through a role that is not active) may not even connect to it: probe
	// without it, and read the grants.
	var me *mysql.MySQLError
	denied := errors.As(err, &me) && me.Number == errDBAccessDenied && cfg.DBName != ""
	if denied {
		outside := cfg.Clone()
		outside.DBName = ""
		c, cerr := mysql.NewConnector(outside)
		if cerr != nil {
			return nil, errors.New("bad DSN: the driver refused its settings")
		}
		db = sql.OpenDB(c)
		defer db.Close()
		db.SetMaxOpenConns(1)
		if report, err = probe.Run(ctx, db); err == nil {
			report.Database = cfg.DBName
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s as %s: %w", cfg.Addr, cfg.User, err)
	}
	r := &Result{Addr: cfg.Addr, Server: report.Server(), Report: report, Uses: uses}
	if o.Spec != nil {
		r.SpecFile = o.Spec.File
	}

	// Strategies and jobs.
	for i, u := range r.Uses {
		why := report.Refusal(probe.Feature(u.Strategy))
		r.Uses[i].Works, r.Uses[i].Why = why == "", why
		if why != "" {
			r.add(Fail, u.Name, "%s is refused: %s", u.Strategy, why)
		}
	}

	// Connection settings.
	for _, bad := range report.Settings() {
		r.add(Fail, "connection", "%s", bad)
	}
	if report.ReadOnly {
		r.add(Fail, "read_only", "the server is read-only (a replica?): every lockgen write fails; connect to the primary")
	}
	r.add(Note, "time_zone", "session time_zone is %s; lockgen reads the clock with UTC_TIMESTAMP, so it does not matter", report.TimeZone)

	// Tables and grants.
	for _, k := range kinds {
		t := k.name
		if denied {
			r.add(Fail, t, "user %s may not use database %q at all (error 1044), so whether table %s exists is unknown: the user has no privilege there, or only through a role that is not active (see the grants)", report.User, cfg.DBName, t)
			continue
		}
		if lacks := report.Lacks(k.schema(t)); len(lacks) > 0 {
			problem := probe.SchemaProblem
			if k.column {
				problem = probe.ColumnsProblem
			}
			r.add(Fail, t, "%s", problem(t, report.Database, lacks, "migration "+migrationOf(o.Spec, k.fileName(), k.migration)))
		} else if k.column {
			continue // the table's own line says whether it exists
		} else if report.Tables[t] {
			r.add(OK, t, "table %s exists and has every column and index of its migration", t)
		} else {
			// A database made by earlier migrations lacks only the later
			// tables (the queues table, migration 3): name the file.
			r.add(Fail, t, "table %s does not exist in database %q, or user %s has no privilege on it (see the grants): apply migration %s", t, report.Database, report.User, migrationOf(o.Spec, t, k.migration))
		}
	}
	checkGrants(ctx, db, r, report.Database, tables)

	// Timeouts against the spec.
	checkTimeouts(r, report, cfg, o.Spec)
	checkBinlog(ctx, db, r)

	if report.AuthPlugin != "" {
		msg := fmt.Sprintf("user %s authenticates with %s", report.User, report.AuthPlugin)
		if report.AuthPlugin == "caching_sha2_password" && cfg.Passwd != "" && cfg.TLS == nil {
			msg += "; without TLS, go-sql-driver/mysql fetches the server's RSA key for a first login over plain TCP, which a man in the middle could replace: use tls=true in production"
		}
		r.add(Note, "auth", "%s", msg)
	} else {
		r.add(Note, "auth", "the auth plugin of %s is not readable without SELECT on mysql.user (fine: lockgen does not need it)", report.User)
	}
	return r, nil
}

// table is one of lockgen's tables: its name, what its migration creates
// and that migration's number.
type table struct {
	name      string
	schema    func(string) probe.TableSchema
	migration int
	// file is the table part of the migration's file name when it is not
	// name (a migration that adds a column: 0004_<prefix>runs_history).
	file string
	// column: the migration adds columns to a table an earlier one
	// creates, and is checked only when that table exists.
	column bool
}

// fileName is the table part of k's migration file name.
func (k table) fileName() string {
	if k.file != "" {
		return k.file
	}
	return k.name
}

// declared lists what the spec uses and its tables; without a spec, every
// strategy and the jobs on the default prefix.
func declared(s *spec.Spec) (uses []Use, tables []table) {
	prefix, jobs := "lockgen_", true
	if s == nil {
		for _, f := range probe.Features {
			uses = append(uses, Use{Name: string(f), Strategy: string(f)})
		}
	} else {
		prefix, jobs = s.TablePrefix, len(s.Jobs) > 0
		for _, l := range s.Locks {
			uses = append(uses, Use{Name: "lock " + l.Name, Strategy: l.Strategy})
		}
		if jobs {
			uses = append(uses, Use{Name: fmt.Sprintf("jobs (%d)", len(s.Jobs)), Strategy: string(probe.Jobs)})
		}
	}
	tables = []table{{name: prefix + "locks", schema: probe.LocksSchema, migration: spec.LocksMigration}}
	if jobs {
		tables = append(tables, table{name: prefix + "runs", schema: probe.RunsSchema, migration: spec.RunsMigration},
			table{name: prefix + "queues", schema: probe.QueuesSchema, migration: spec.QueuesMigration},
			table{name: prefix + "runs", schema: probe.RunsHistorySchema, migration: spec.HistoryMigration, file: prefix + "runs_history", column: true},
			table{name: prefix + "runs", schema: probe.RunsHeadersSchema, migration: spec.HeadersMigration, file: prefix + "runs_headers", column: true})
	}
	if slices.ContainsFunc(uses, func(u Use) bool { return u.Strategy == string(probe.Session) || u.Strategy == string(probe.Row) }) {
		// Only the session strategy and a row takeover read the
		// reservation columns.
		tables = append(tables, table{name: prefix + "locks", schema: probe.LocksSessionSchema, migration: spec.LocksSessionMigration, file: prefix + "locks_session", column: true})
	}
	return uses, tables
}

// migrationOf names migration n of s, which creates table t, with where
// its path is relative to.
func migrationOf(s *spec.Spec, t string, n int) string {
	m, file := spec.Migrations{Dir: spec.DefaultMigrationsDir, Format: spec.FormatGolangMigrate}, "lockgen.yaml"
	if s != nil {
		m, file = s.Migrations, s.File
	}
	return fmt.Sprintf("%s (relative to %s)", m.File(n, t, spec.Up), file)
}

// checkBinlog fails binlog_format=STATEMENT where the binary log is on: a
// replica would replay the statements whose effect depends on the locks
// the primary saw (the outcomes of runs skip rows other transactions hold,
// the takeover of a dead session holding reads IS_FREE_LOCK) without those
// locks, and end up with other rows changed than the primary's.
func checkBinlog(ctx context.Context, db *sql.DB, r *Result) {
	var logBin int
	var format sql.NullString
	// MySQL 9 warns that binlog_format is deprecated; reading it is fine.
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin, @@SESSION.binlog_format").Scan(&logBin, &format); err != nil {
		r.add(Note, "binlog_format", "could not read the binary log's settings (%v); keep binlog_format ROW or MIXED where it is on", err)
		return
	}
	switch {
	case logBin == 0:
		r.add(OK, "binlog_format", "the binary log is off: nothing replays lockgen's statements")
	case strings.EqualFold(format.String, "STATEMENT"):
		r.add(Fail, "binlog_format", "binlog_format is STATEMENT with the binary log on: a replica would replay the statements that skip rows other transactions hold (the outcomes of runs) and the takeover of a dead session holding (IS_FREE_LOCK) without the primary's locks, and change other rows; set binlog_format=ROW (MySQL's default) or MIXED (MariaDB's), for the server or in the DSN")
	default:
		r.add(OK, "binlog_format", "binlog_format is %s: the binary log records the rows lockgen's statements change", format.String)
	}
}

// checkTimeouts compares the server's and the DSN's timeouts with the
// spec's locks.
func checkTimeouts(r *Result, report *probe.Report, cfg *mysql.Config, s *spec.Spec) {
	r.add(Note, "timeouts", "wait_timeout %s, innodb_lock_wait_timeout %s", report.WaitTimeout, report.LockWaitTimeout)
	if s == nil {
		return
	}
	var longestWait time.Duration
	for _, l := range s.Locks {
		if l.Strategy != spec.StrategyLease {
			longestWait = max(longestWait, l.Wait)
		}
		// A session holding pins an idle connection; it checks it every
		// renew_every, which must come before the server drops it.
		if l.Strategy == spec.StrategySession && report.WaitTimeout > 0 && l.RenewEvery >= report.WaitTimeout {
			r.add(Fail, "lock "+l.Name, "renew_every %s is not below wait_timeout %s: the server drops the idle pinned connection and its GET_LOCK", l.RenewEvery, report.WaitTimeout)
		}
		if l.Strategy == spec.StrategyLease && report.WaitTimeout > 0 && l.TTL >= report.WaitTimeout {
			r.add(Note, "lock "+l.Name, "ttl %s is not below wait_timeout %s: a holding's wake connection may be dropped (waiters then poll)", l.TTL, report.WaitTimeout)
		}
	}
	// session and row locks wait inside one statement (GET_LOCK, the row
	// lock wait); the driver's readTimeout must outlast it.
	if cfg.ReadTimeout > 0 && longestWait > 0 && cfg.ReadTimeout <= longestWait {
		r.add(Fail, "readTimeout", "the DSN's readTimeout %s is not longer than the longest session or row wait %s: the driver would cut the waiting statement; raise it or drop it", cfg.ReadTimeout, longestWait)
	}
}

// errDBAccessDenied is the server's error for a user that may not use the
// database it names.
const errDBAccessDenied = 1044
