// Package probe asks a MySQL-compatible server what lockgen needs to know
// before it trusts it: which server and version it is, whether it is a
// node of a cluster whose locks are not cluster-wide, which features each
// lock strategy and the job queue rely on, how the connection is set up,
// and whether lockgen's tables exist. The runtime probes once per Client
// at first use and refuses what cannot be safe; `lockgen doctor` prints the
// same report.
//
// A Report only states facts and reasons; the runtime turns a refusal into
// an error wrapping runtime.ErrUnsupported (a server or cluster) or
// runtime.ErrInvalid (a connection setting).
package probe

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Flavor is the kind of server.
type Flavor string

// The flavors lockgen tells apart. Only MariaDB and MySQL are supported.
const (
	MariaDB Flavor = "MariaDB"
	MySQL   Flavor = "MySQL"
	TiDB    Flavor = "TiDB"
	Unknown Flavor = "unknown"
)

// Cluster is the kind of replication cluster a server is a node of.
type Cluster string

// Clusters. Galera and Group Replication keep GET_LOCK and row locks local
// to one node.
const (
	NoCluster        Cluster = ""
	Galera           Cluster = "Galera"
	GroupReplication Cluster = "Group Replication"
)

// Feature is something a part of lockgen needs from the server.
type Feature string

// The features Support answers for.
const (
	// Lease is the lease strategy (also leader election and the lock of
	// singleton jobs): an upsert and the database clock.
	Lease Feature = "lease"
	// Session is the session strategy: GET_LOCK, cluster-wide.
	Session Feature = "session"
	// Row is the row strategy: SELECT … FOR UPDATE [NOWAIT], cluster-wide.
	Row Feature = "row"
	// Jobs is the job queue: FOR UPDATE SKIP LOCKED that really skips.
	Jobs Feature = "jobs"
)

// Features lists every Feature, in the order reports print them.
var Features = []Feature{Lease, Session, Row, Jobs}

// Report is what the server said.
type Report struct {
	// Version is VERSION(), Comment @@version_comment.
	Version, Comment string
	Flavor           Flavor
	// Major, Minor and Patch are parsed from Version.
	Major, Minor, Patch int
	Cluster             Cluster
	// MultiPrimary is true on a member of a Group Replication group in
	// multi-primary mode (group_replication_single_primary_mode OFF).
	MultiPrimary bool
	// ReadOnly is @@read_only or @@super_read_only: a replica, where every
	// lockgen write fails.
	ReadOnly bool
	// WaitTimeout is @@wait_timeout: the server drops a connection idle for
	// longer (a session lock with it). LockWaitTimeout is
	// @@innodb_lock_wait_timeout, in whole seconds on both servers.
	WaitTimeout, LockWaitTimeout time.Duration
	// TimeZone is the session's @@time_zone. Isolation is the session's
	// transaction isolation level.
	TimeZone, Isolation string
	// ParseTime is true when the connection returns DATETIME columns as
	// time.Time (the DSN's parseTime=true), which the generated queries
	// need. Location is the time.Location those values come in (the DSN's
	// loc), which must be UTC; empty without ParseTime.
	ParseTime bool
	Location  string
	// CharsetClient, CharsetConnection and CharsetResults are the session's
	// character_set_client, character_set_connection and
	// character_set_results: the character sets the server reads
	// statements in, converts literals to, and sends results in. SQLMode is
	// the session's sql_mode.
	CharsetClient, CharsetConnection, CharsetResults, SQLMode string
	// User is CURRENT_USER(), AuthPlugin its authentication plugin when the
	// server lets this user read it (else empty).
	User, AuthPlugin string
	// Database is DATABASE(); Tables tells, for each table asked about,
	// whether it exists there. Columns and Indexes are what those that
	// exist have (see Lacks).
	Database string
	Tables   map[string]bool
	Columns  map[string][]string `json:"-"`
	Indexes  map[string][]Index  `json:"-"`
}

// Querier runs the probe's statements: a *sql.DB, or a *sql.Tx (the probe
// only reads, so it may run inside a caller's transaction without touching
// what the transaction does).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Run probes the server behind db and checks for tables in the current
// database, with their columns and indexes. It costs a handful of
// statements; a failure to reach the server is returned as it is.
func Run(ctx context.Context, db Querier, tables ...string) (*Report, error) {
	r := &Report{Tables: map[string]bool{}}
	var database sql.NullString
	var now any
	err := db.QueryRowContext(ctx, "SELECT VERSION(), CURRENT_USER(), DATABASE(), UTC_TIMESTAMP(6)").
		Scan(&r.Version, &r.User, &database, &now)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	r.Database = database.String
	if t, ok := now.(time.Time); ok {
		r.ParseTime, r.Location = true, t.Location().String()
	}
	// One statement for every variable, answered only for those the server
	// has: some exist on one flavour only (tx_isolation, wsrep_on), and an
	// engine that only speaks MySQL's protocol may lack any of them.
	vars, err := variables(ctx, db, "version_comment", "time_zone", "wait_timeout", "innodb_lock_wait_timeout",
		"read_only", "super_read_only", "transaction_isolation", "tx_isolation", "wsrep_on", "innodb_version",
		"group_replication_group_name", "group_replication_single_primary_mode", "character_set_client", "character_set_connection", "character_set_results", "sql_mode")
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	r.Comment, r.TimeZone = vars["version_comment"], vars["time_zone"]
	r.CharsetClient, r.CharsetConnection = vars["character_set_client"], vars["character_set_connection"]
	r.CharsetResults, r.SQLMode = vars["character_set_results"], vars["sql_mode"]
	r.WaitTimeout = seconds(vars["wait_timeout"])
	r.LockWaitTimeout = seconds(vars["innodb_lock_wait_timeout"])
	r.ReadOnly = on(vars["read_only"]) || on(vars["super_read_only"])
	r.Isolation = vars["transaction_isolation"]
	if r.Isolation == "" {
		r.Isolation = vars["tx_isolation"]
	}
	if on(vars["wsrep_on"]) {
		r.Cluster = Galera
	}
	// A server configured for Group Replication names its group; that
	// needs no privilege to read, unlike the members table below.
	if vars["group_replication_group_name"] != "" {
		r.Cluster = GroupReplication
	}
	// Only a server with the plugin has the variable.
	if mode, ok := vars["group_replication_single_primary_mode"]; ok && !on(mode) {
		r.MultiPrimary = true
	}
	// InnoDB, whose row locks lockgen relies on, is what tells MySQL from
	// engines that only speak its protocol.
	r.Flavor, r.Major, r.Minor, r.Patch = flavor(r.Version, r.Comment, vars["innodb_version"] != "")
	if r.Cluster == NoCluster && r.Flavor == MySQL {
		var members int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM performance_schema.replication_group_members WHERE MEMBER_STATE <> 'OFFLINE'").Scan(&members)
		if err == nil && members > 0 {
			r.Cluster = GroupReplication
		}
	}
	// The plugin is readable only with privileges on mysql.user; without
	// them it stays unknown.
	if at := strings.LastIndex(r.User, "@"); at > 0 {
		var plugin string
		if err := db.QueryRowContext(ctx, "SELECT plugin FROM mysql.user WHERE user = ? AND host = ?", r.User[:at], r.User[at+1:]).Scan(&plugin); err == nil {
			r.AuthPlugin = plugin
		}
	}
	if len(tables) > 0 {
		if err := r.readTables(ctx, db, tables); err != nil {
			return nil, fmt.Errorf("probe: tables: %w", err)
		}
	}
	return r, nil
}

// variables reads the named session variables the server has.
func variables(ctx context.Context, db Querier, names ...string) (map[string]string, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := db.QueryContext(ctx, "SHOW SESSION VARIABLES WHERE Variable_name IN (?"+strings.Repeat(", ?", len(names)-1)+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var name string
		var value sql.NullString
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		vars[strings.ToLower(name)] = value.String
	}
	return vars, rows.Err()
}

// on reads a boolean variable ("ON", "1").
func on(v string) bool { return strings.EqualFold(v, "ON") || v == "1" }

// seconds reads a whole-seconds variable.
func seconds(v string) time.Duration {
	n, _ := strconv.ParseFloat(v, 64)
	return time.Duration(n * float64(time.Second))
}

var versionNumbers = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?`)

// flavor reads the kind of server and its version from VERSION() and
// @@version_comment. TiDB and Vitess report a MySQL version with their name
// after it; a server without InnoDB is not MySQL.
func flavor(version, comment string, innodb bool) (f Flavor, major, minor, patch int) {
	if m := versionNumbers.FindStringSubmatch(version); m != nil {
		major, _ = strconv.Atoi(m[1])
		minor, _ = strconv.Atoi(m[2])
		patch, _ = strconv.Atoi(m[3])
	}
	both := strings.ToLower(version + " " + comment)
	switch {
	case strings.Contains(both, "tidb"):
		return TiDB, major, minor, patch
	case strings.Contains(both, "mariadb"):
		return MariaDB, major, minor, patch
	case strings.Contains(both, "vitess"), strings.Contains(both, "dolt"), strings.Contains(both, "go-mysql-server"),
		!innodb, major == 0:
		return Unknown, major, minor, patch
	}
	return MySQL, major, minor, patch
}

// atLeast tells whether the server's version is major.minor or later.
func (r *Report) atLeast(major, minor int) bool {
	return r.Major > major || (r.Major == major && r.Minor >= minor)
}

// FractionalLockWait tells whether GET_LOCK waits fractions of a second.
// MariaDB does; MySQL (checked on 9.7.4) rounds the timeout to whole
// seconds: 0.3 returns at once, 0.7 and 1.4 wait one second.
func (r *Report) FractionalLockWait() bool { return r.Flavor == MariaDB }

// Server describes the server in a few words: "MySQL 9.7.4", "MariaDB
// 10.11.19 (Galera)".
func (r *Report) Server() string {
	s := string(r.Flavor) + " " + r.Version
	if r.Flavor == MariaDB || r.Flavor == MySQL {
		s = fmt.Sprintf("%s %d.%d.%d", r.Flavor, r.Major, r.Minor, r.Patch)
	}
	switch {
	case r.Cluster == GroupReplication && r.MultiPrimary:
		s += " (" + string(r.Cluster) + ", multi-primary)"
	case r.Cluster != NoCluster:
		s += " (" + string(r.Cluster) + ")"
	}
	return s
}

// Refusal returns why lockgen cannot run f safely on this server, or ""
// when it can. It speaks of the server only (flavor, version, cluster);
// Settings speaks of the connection.
func (r *Report) Refusal(f Feature) string {
	switch r.Flavor {
	case TiDB:
		return "TiDB takes no row lock for FOR UPDATE SKIP LOCKED, reports LAST_INSERT_ID 0 for the lock upsert and let a second holder in during tests; use MySQL 8.0+ or MariaDB 10.6+"
	case Unknown:
		return fmt.Sprintf("server %q (%s) is not MySQL or MariaDB; lockgen knows where other MySQL-compatible engines differ only for those it was tested on: use MySQL 8.0+ or MariaDB 10.6+", r.Version, r.Comment)
	case MySQL:
		if !r.atLeast(8, 0) {
			return fmt.Sprintf("MySQL %d.%d has no NOWAIT, SKIP LOCKED or microsecond-exact upserts lockgen relies on; use MySQL 8.0 or later", r.Major, r.Minor)
		}
	case MariaDB:
		if !r.atLeast(10, 6) {
			return fmt.Sprintf("MariaDB %d.%d has no SKIP LOCKED (10.6+); use MariaDB 10.6 or later", r.Major, r.Minor)
		}
	}
	if r.Cluster == GroupReplication && r.MultiPrimary {
		return MultiPrimaryRefusal
	}
	if (f == Session || f == Row) && r.Cluster != NoCluster {
		what := "GET_LOCK"
		if f == Row {
			what = "row locks (SELECT … FOR UPDATE)"
		}
		return fmt.Sprintf("on a %s cluster each node grants %s on its own, so two holders could run at once; use strategy lease", r.Cluster, what)
	}
	return ""
}

// MultiPrimaryRefusal is why lockgen refuses every feature on a member of
// a multi-primary Group Replication group: after a member leaves and
// rejoins under write load, members can give one transaction different
// GTIDs and then certify differently (MySQL Bug#121063, open; reproduced
// upstream on 8.4 and 9.7.2): a chaos run here on 9.7.4 ended with a
// rejoined member that had committed inserts the rest of the group had
// rejected. A member that commits a lease acquire its group rejected
// holds a lock the group gives to another: two holders.
const MultiPrimaryRefusal = "a multi-primary Group Replication group can split after a member rejoins under write load: members give one transaction different GTIDs and then disagree on what committed (MySQL Bug#121063; in a lockgen fault run on MySQL 9.7.4 a rejoined member committed inserts the rest of the group had rejected), so two holders could run at once and a tick could run twice; run the group in single-primary mode (SELECT group_replication_switch_to_single_primary_mode()) and reach its primary through runtime.Failover"

// GuardRefusal returns why Lease.Guard cannot hold a new holder off on
// this server, or "" when it can. Guard's shared lock on the lock row
// excludes an acquire only on the node that holds it: Galera certifies
// write sets, not shared locks, and so does Group Replication in
// multi-primary mode, so another node's acquire could commit before the
// guarded writes do. Every Group Replication group is refused, since a
// single-primary group can be switched to multi-primary online, after
// this probe.
func (r *Report) GuardRefusal() string {
	if r.Cluster == NoCluster {
		return ""
	}
	return fmt.Sprintf("on a %s cluster a shared row lock is not certified across nodes, so another node's holder could acquire before the guarded writes commit; compare the fencing token in the write itself", r.Cluster)
}

// utcNames are the names of locations that are UTC at every instant.
var utcNames = map[string]bool{"UTC": true, "Etc/UTC": true, "Etc/UCT": true, "UCT": true, "Universal": true,
	"Etc/Universal": true, "Zulu": true, "Etc/Zulu": true, "Etc/GMT": true, "GMT": true, "Etc/GMT+0": true, "Etc/GMT-0": true, "Etc/GMT0": true}

// Settings returns what is wrong with the connection itself, one sentence
// each, saying which DSN setting to change: a missing parseTime, a loc
// other than UTC, a character set other than utf8mb4, or an sql_mode that
// is not strict. Empty when nothing is.
func (r *Report) Settings() []string {
	var bad []string
	if !r.ParseTime {
		bad = append(bad, "the connection returns DATETIME columns as bytes: open the *sql.DB with parseTime=true in the DSN (go-sql-driver/mysql), which the generated queries need")
	} else if !utcNames[r.Location] {
		bad = append(bad, fmt.Sprintf("the connection's loc is %s: the driver writes and reads DATETIME values in it, so nodes whose DSNs differ in loc would store one scheduled tick as two (and run it twice), and a daylight-saving hour would repeat; open the *sql.DB with loc=UTC (go-sql-driver/mysql's default)", r.Location))
	}
	if why := r.charsetProblem(); why != "" {
		bad = append(bad, why)
	}
	if !r.Strict() {
		bad = append(bad, fmt.Sprintf("the connection's sql_mode is %q, with neither STRICT_TRANS_TABLES nor STRICT_ALL_TABLES: the server then stores a value it cannot keep (a character outside the column's character set, a string too long) mangled or cut, with a warning instead of an error, so two lock keys could become one row and two holders could run at once; remove sql_mode from the DSN or make it include STRICT_TRANS_TABLES (sql_mode=%%27STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION%%27), and if the DSN sets none, add STRICT_TRANS_TABLES to the server's sql_mode (the default of MySQL 5.7+ and MariaDB 10.2.4+)", r.SQLMode))
	}
	return bad
}

// Strict reports whether the session's sql_mode makes the server refuse,
// rather than mangle, a value a column cannot store.
func (r *Report) Strict() bool {
	for _, m := range strings.Split(r.SQLMode, ",") {
		if m = strings.TrimSpace(strings.ToUpper(m)); m == "STRICT_TRANS_TABLES" || m == "STRICT_ALL_TABLES" {
			return true
		}
	}
	return false
}

// charsetProblem says why the connection's character sets cannot carry
// every key exactly, or "" when they can: statements must be read and
// literals converted in utf8mb4, and results sent in utf8mb4 or unconverted
// (binary, or NULL: as stored, which is utf8mb4).
func (r *Report) charsetProblem() string {
	var off []string
	for _, v := range []struct{ name, value string }{
		{"character_set_client", r.CharsetClient},
		{"character_set_connection", r.CharsetConnection},
		{"character_set_results", r.CharsetResults},
	} {
		ok := strings.EqualFold(v.value, "utf8mb4")
		if v.name == "character_set_results" {
			ok = ok || v.value == "" || strings.EqualFold(v.value, "binary")
		}
		if !ok {
			value := v.value
			if value == "" {
				value = "unknown"
			}
			off = append(off, v.name+" "+value)
		}
	}
	if len(off) == 0 {
		return ""
	}
	return fmt.Sprintf("the connection's character set is not utf8mb4 (%s): characters it lacks (4-byte UTF-8 such as emoji in utf8/utf8mb3) are stored as '?' or refused, so two lock keys could become one row and two holders could run at once; open the *sql.DB with charset=utf8mb4 in the DSN (or a utf8mb4 collation, collation=utf8mb4_general_ci), or drop charset and collation from it (go-sql-driver/mysql's default is utf8mb4), and make sure the server does not override the client's choice (skip-character-set-client-handshake, a SET NAMES in init_connect)", strings.Join(off, ", "))
}

// MissingTables returns the tables asked about that do not exist, in the
// order they were asked for.
func (r *Report) MissingTables(tables ...string) []string {
	var missing []string
	for _, t := range tables {
		if !r.Tables[t] {
			missing = append(missing, t)
		}
	}
	return missing
}
