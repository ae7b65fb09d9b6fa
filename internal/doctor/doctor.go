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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/runtime/probe"
)

// Severity of a Check.
type Severity string

// Severities. Only Fail makes Result.OK false.
const (
	OK   Severity = "ok"
	Note Severity = "note"
	Fail Severity = "FAIL"
)

// Check is one finding, in plain words.
type Check struct {
	Severity Severity `json:"severity"`
	Topic    string   `json:"topic"`
	Message  string   `json:"message"`
}

// Use is one thing the spec declares (a lock, the jobs) and whether it can
// run on the server.
type Use struct {
	Name     string `json:"name"`
	Strategy string `json:"strategy"`
	Works    bool   `json:"works"`
	Why      string `json:"why,omitempty"`
}

// Result is the doctor's report.
type Result struct {
	// Addr and User say where doctor connected, never with a password.
	Addr     string        `json:"addr"`
	Server   string        `json:"server"`
	Report   *probe.Report `json:"probe"`
	SpecFile string        `json:"spec,omitempty"`
	Uses     []Use         `json:"uses"`
	Checks   []Check       `json:"checks"`
}

// OK tells whether everything the spec declares can run: no Check failed.
func (r *Result) OK() bool {
	for _, c := range r.Checks {
		if c.Severity == Fail {
			return false
		}
	}
	return true
}

func (r *Result) add(s Severity, topic, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Severity: s, Topic: topic, Message: fmt.Sprintf(format, args...)})
}

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

	uses, locksTable, runsTable := declared(o.Spec)
	tables := []string{locksTable}
	if runsTable != "" {
		tables = append(tables, runsTable)
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
	for _, t := range tables {
		if denied {
			r.add(Fail, t, "user %s may not use database %q at all (error 1044), so whether table %s exists is unknown: the user has no privilege there, or only through a role that is not active (see the grants)", report.User, cfg.DBName, t)
			continue
		}
		if report.Tables[t] {
			r.add(OK, t, "table %s exists", t)
		} else {
			where := "the migrations lockgen generate wrote"
			if o.Spec != nil {
				where = fmt.Sprintf("the migrations in %s/ (relative to %s)", o.Spec.Migrations.Dir, o.Spec.File)
			}
			r.add(Fail, t, "table %s does not exist in database %q, or user %s has no privilege on it (see the grants): apply %s", t, report.Database, report.User, where)
		}
	}
	checkGrants(ctx, db, r, report.Database, tables)

	// Timeouts against the spec.
	checkTimeouts(r, report, cfg, o.Spec)

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

// declared lists what the spec uses and its table names; without a spec,
// every strategy and the jobs on the default prefix.
func declared(s *spec.Spec) (uses []Use, locks, runs string) {
	if s == nil {
		for _, f := range probe.Features {
			uses = append(uses, Use{Name: string(f), Strategy: string(f)})
		}
		return uses, "lockgen_locks", "lockgen_runs"
	}
	for _, l := range s.Locks {
		uses = append(uses, Use{Name: "lock " + l.Name, Strategy: l.Strategy})
	}
	if len(s.Jobs) > 0 {
		uses = append(uses, Use{Name: fmt.Sprintf("jobs (%d)", len(s.Jobs)), Strategy: string(probe.Jobs)})
		runs = s.TablePrefix + "runs"
	}
	return uses, s.TablePrefix + "locks", runs
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

// needed are the privileges lockgen's statements use on its tables.
var needed = []string{"SELECT", "INSERT", "UPDATE", "DELETE"}

// checkGrants reads SHOW GRANTS and says, for each table, which needed
// privileges are missing (a failure) and whether the user has more than it
// needs there (a note): other privileges, or the needed ones through a
// grant on every table of a database or more.
func checkGrants(ctx context.Context, db *sql.DB, r *Result, database string, tables []string) {
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		r.add(Note, "grants", "cannot read SHOW GRANTS: %v", err)
		return
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			r.add(Note, "grants", "cannot read SHOW GRANTS: %v", err)
			return
		}
		lines = append(lines, g)
	}
	if err := rows.Err(); err != nil {
		r.add(Note, "grants", "cannot read SHOW GRANTS: %v", err)
		return
	}
	gs := parseGrants(lines)
	if gs.unread > 0 {
		// Never the line itself: MariaDB's carry the password hash.
		r.add(Note, "grants", "%d line(s) of SHOW GRANTS were not understood; what they grant is not counted below", gs.unread)
	}
	m := grantMatcher(ctx, db)
	user := r.Report.User
	var current sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_ROLE()").Scan(&current); err == nil {
		if roles := gs.inactiveRoles(user, currentRoles(current.String)); len(roles) > 0 {
			// MariaDB has one default role; MySQL any number (or
			// activate_all_roles_on_login).
			how := fmt.Sprintf("SET DEFAULT ROLE %s FOR %s", quoteAccount(roles[0]), quoteAccount(user))
			if r.Report.Flavor == probe.MySQL {
				quoted := make([]string, len(roles))
				for i, role := range roles {
					quoted[i] = quoteAccount(role)
				}
				how = fmt.Sprintf("SET DEFAULT ROLE %s TO %s", strings.Join(quoted, ", "), quoteAccount(user))
			}
			if len(roles) == 1 {
				r.add(Note, "grants", "role %s is granted to %s but is not active when it connects (not a default role), so its privileges are not counted: to use it, %s", roles[0], user, how)
			} else {
				r.add(Note, "grants", "roles %s are granted to %s but are not active when it connects (not default roles), so their privileges are not counted: to use them, %s", strings.Join(roles, ", "), user, how)
			}
		}
	}
	for _, t := range tables {
		a := gs.on(database, t, user, m)
		var missing, partial []string
		for _, p := range needed {
			if !a.has(p) {
				missing = append(missing, p)
				if slices.Contains(a.columns, p) {
					partial = append(partial, p)
				}
			}
		}
		grant := fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %s.%s TO %s", database, t, quoteAccount(user))
		if len(missing) > 0 {
			msg := fmt.Sprintf("user %s lacks %s on %s.%s: %s", user, strings.Join(missing, ", "), database, t, grant)
			if len(partial) > 0 {
				msg += fmt.Sprintf(" (it has %s on some columns only; lockgen reads and writes whole rows)", strings.Join(partial, ", "))
			}
			r.add(Fail, "grants", "%s", msg)
		}
		var excess, from []string
		for p, scopes := range a.have {
			if slices.Contains(needed, p) {
				continue
			}
			excess = append(excess, p)
			for _, s := range scopes {
				if !slices.Contains(from, s) {
					from = append(from, s)
				}
			}
		}
		slices.Sort(excess)
		slices.Sort(from)
		if len(excess) > 0 {
			list := strings.Join(excess, ", ")
			if len(excess) > 5 {
				list = fmt.Sprintf("%s and %d more", strings.Join(excess[:5], ", "), len(excess)-5)
			}
			r.add(Note, "grants", "user %s has more than lockgen needs on %s.%s: %s (granted ON %s); the application needs only SELECT, INSERT, UPDATE, DELETE on the lockgen tables", user, database, t, list, strings.Join(from, ", ON "))
			continue
		}
		if len(missing) > 0 {
			continue
		}
		var broad []string
		for _, p := range needed {
			for _, s := range a.have[p] {
				if a.broad[s] && !slices.Contains(broad, s) {
					broad = append(broad, s)
				}
			}
		}
		slices.Sort(broad)
		if len(broad) > 0 {
			r.add(Note, "grants", "user %s has SELECT, INSERT, UPDATE, DELETE on %s.%s through a grant ON %s, which covers more tables than lockgen's; grant them on each lockgen table instead: %s", user, database, t, strings.Join(broad, ", ON "), grant)
			continue
		}
		r.add(OK, "grants", "user %s has exactly SELECT, INSERT, UPDATE, DELETE on %s.%s", user, database, t)
	}
}

// grantMatcher reads how the server compares the names of grants:
// lower_case_table_names, and MySQL's partial_revokes (which makes the
// wildcards of database-level grants plain characters).
func grantMatcher(ctx context.Context, db *sql.DB) matcher {
	var m matcher
	rows, err := db.QueryContext(ctx, "SHOW VARIABLES WHERE Variable_name IN ('lower_case_table_names', 'partial_revokes')")
	if err != nil {
		return m
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if rows.Scan(&name, &value) != nil {
			return m
		}
		switch strings.ToLower(name) {
		case "lower_case_table_names":
			m.fold = value != "0"
		case "partial_revokes":
			m.literal = strings.EqualFold(value, "ON") || value == "1"
		}
	}
	return m
}

// quoteAccount writes CURRENT_USER()'s name@host as 'name'@'host'.
func quoteAccount(user string) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	at := strings.LastIndex(user, "@")
	if at < 0 {
		return q(user)
	}
	return q(user[:at]) + "@" + q(user[at+1:])
}

// WriteText prints the result for people: the server, what the spec
// declares and whether it works there, then every check, failures first.
func (r *Result) WriteText(w io.Writer) {
	p := r.Report
	cluster := "not a cluster node"
	if p.Cluster != probe.NoCluster {
		cluster = "a " + string(p.Cluster) + " node"
	}
	mode := "read-write"
	if p.ReadOnly {
		mode = "READ-ONLY"
	}
	loc := p.Location
	if !p.ParseTime {
		loc = "(no parseTime)"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "server\t%s (VERSION() %q, %s), %s, %s\n", r.Server, p.Version, p.Comment, cluster, mode)
	fmt.Fprintf(tw, "connection\t%s as %s, database %q\n", r.Addr, p.User, p.Database)
	fmt.Fprintf(tw, "settings\tparseTime=%t, loc=%s, time_zone %s, isolation %s\n", p.ParseTime, loc, p.TimeZone, p.Isolation)
	tw.Flush()

	what := "every strategy and the jobs (no spec given)"
	if r.SpecFile != "" {
		what = "what " + r.SpecFile + " declares"
	}
	fmt.Fprintf(w, "\n%s:\n", what)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, u := range r.Uses {
		verdict := "works"
		if !u.Works {
			verdict = "REFUSED: " + u.Why
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", u.Name, u.Strategy, verdict)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nchecks:\n")
	checks := slices.Clone(r.Checks)
	order := map[Severity]int{Fail: 0, Note: 1, OK: 2}
	slices.SortStableFunc(checks, func(a, b Check) int { return order[a.Severity] - order[b.Severity] })
	for _, c := range checks {
		fmt.Fprintf(w, "  %-4s  %s: %s\n", c.Severity, c.Topic, c.Message)
	}
	fails := 0
	for _, c := range checks {
		if c.Severity == Fail {
			fails++
		}
	}
	if fails == 0 {
		fmt.Fprintf(w, "\nresult: everything %s can run here\n", strings.TrimPrefix(what, "what "))
	} else {
		fmt.Fprintf(w, "\nresult: %d problem(s), marked FAIL above\n", fails)
	}
}

// WriteJSON prints the result as one JSON object, with "ok" added.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		OK bool `json:"ok"`
		*Result
	}{r.OK(), r})
}
