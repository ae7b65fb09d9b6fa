package probe

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestFlavor: VERSION() and @@version_comment of servers seen in the wild.
func TestFlavor(t *testing.T) {
	for _, tc := range []struct {
		version, comment string
		innodb           bool
		want             Flavor
		major, minor     int
	}{
		{"10.11.19-MariaDB-0+deb12u1", "Debian 12", true, MariaDB, 10, 11},
		{"10.5.27-MariaDB", "MariaDB Server", true, MariaDB, 10, 5},
		{"9.7.4-2", "(Debian)", true, MySQL, 9, 7},
		{"8.0.39", "MySQL Community Server - GPL", true, MySQL, 8, 0},
		{"8.0.mysql_aurora.3.05.2", "Source distribution", true, MySQL, 8, 0},
		{"8.0.36", "Source distribution", true, MySQL, 8, 0}, // RDS
		{"8.0.31-google", "(Google)", true, MySQL, 8, 0},
		{"5.7.44-log", "MySQL Community Server (GPL)", true, MySQL, 5, 7},
		{"8.0.11-TiDB-v8.4.0", "", true, TiDB, 8, 0},
		{"8.0.30-Vitess", "Version: 19.0.4", true, Unknown, 8, 0},
		{"8.0.11", "", false, Unknown, 8, 0}, // no InnoDB: go-mysql-server and the like
	} {
		f, major, minor, _ := flavor(tc.version, tc.comment, tc.innodb)
		assert.Equal(t, tc.want, f, tc.version)
		if tc.want != Unknown {
			assert.Equal(t, []int{tc.major, tc.minor}, []int{major, minor}, tc.version)
		}
	}
}

// TestRefusal: what lockgen refuses on which server, and why.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       Report
		f       Feature
		refused string // part of the reason; "" when allowed
	}{
		{"mariadb 10.11 lease", Report{Flavor: MariaDB, Major: 10, Minor: 11}, Lease, ""},
		{"mariadb 10.11 jobs", Report{Flavor: MariaDB, Major: 10, Minor: 11}, Jobs, ""},
		{"mariadb 10.5", Report{Flavor: MariaDB, Major: 10, Minor: 5}, Lease, "SKIP LOCKED"},
		{"mysql 9.7 row", Report{Flavor: MySQL, Major: 9, Minor: 7}, Row, ""},
		{"mysql 8.0 session", Report{Flavor: MySQL, Major: 8}, Session, ""},
		{"mysql 5.7", Report{Flavor: MySQL, Major: 5, Minor: 7}, Lease, "MySQL 8.0 or later"},
		{"tidb", Report{Flavor: TiDB, Major: 8}, Lease, "TiDB takes no row lock"},
		{"unknown", Report{Flavor: Unknown, Version: "8.0.11"}, Jobs, "not MySQL or MariaDB"},
		{"galera lease", Report{Flavor: MariaDB, Major: 10, Minor: 11, Cluster: Galera}, Lease, ""},
		{"galera session", Report{Flavor: MariaDB, Major: 10, Minor: 11, Cluster: Galera}, Session, "Galera cluster each node grants GET_LOCK"},
		{"galera row", Report{Flavor: MariaDB, Major: 10, Minor: 11, Cluster: Galera}, Row, "row locks"},
		{"group replication session", Report{Flavor: MySQL, Major: 8, Minor: 4, Cluster: GroupReplication}, Session, "Group Replication"},
		{"group replication jobs", Report{Flavor: MySQL, Major: 8, Minor: 4, Cluster: GroupReplication}, Jobs, ""},
		{"group replication lease", Report{Flavor: MySQL, Major: 9, Minor: 7, Cluster: GroupReplication}, Lease, ""},
		{"multi-primary lease", Report{Flavor: MySQL, Major: 9, Minor: 7, Cluster: GroupReplication, MultiPrimary: true}, Lease, "Bug#121063"},
		{"multi-primary jobs", Report{Flavor: MySQL, Major: 9, Minor: 7, Cluster: GroupReplication, MultiPrimary: true}, Jobs, "single-primary mode"},
		{"multi-primary session", Report{Flavor: MySQL, Major: 9, Minor: 7, Cluster: GroupReplication, MultiPrimary: true}, Session, "Bug#121063"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.Refusal(tc.f)
			if tc.refused == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tc.refused)
			}
		})
	}
}

// TestGuardRefusal: Guard's shared lock holds off acquires on one node
// only, so every cluster refuses it; a lone server (whatever its flavour)
// does not.
func TestGuardRefusal(t *testing.T) {
	for _, tc := range []struct {
		r       Report
		refused string
	}{
		{Report{Flavor: MariaDB, Major: 10, Minor: 11}, ""},
		{Report{Flavor: MySQL, Major: 9, Minor: 7}, ""},
		{Report{Flavor: MariaDB, Major: 10, Minor: 11, Cluster: Galera}, "Galera cluster a shared row lock is not certified"},
		{Report{Flavor: MySQL, Major: 8, Minor: 4, Cluster: GroupReplication}, "Group Replication cluster a shared row lock is not certified"},
	} {
		got := tc.r.GuardRefusal()
		if tc.refused == "" {
			assert.Empty(t, got, tc.r.Server())
		} else {
			assert.Contains(t, got, tc.refused, tc.r.Server())
		}
	}
}

// TestRunOnTheTestServer probes the real test server (MariaDB or MySQL,
// whichever LOCKGEN_TEST_DSN names) and checks what it reports against
// what the server says directly.
func TestRunOnTheTestServer(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	db := tdb.Open(t)
	r, err := Run(ctx, db, "lockgen_locks", "lockgen_runs", "no_such_table")
	require.NoError(t, err)

	var version string
	require.NoError(t, db.QueryRow("SELECT VERSION()").Scan(&version))
	assert.Equal(t, version, r.Version)
	want := MySQL
	if strings.Contains(version, "MariaDB") {
		want = MariaDB
	}
	assert.Equal(t, want, r.Flavor)
	assert.Equal(t, NoCluster, r.Cluster)
	for _, f := range Features {
		assert.Empty(t, r.Refusal(f), f)
	}
	assert.Empty(t, r.Settings())
	assert.True(t, r.ParseTime)
	assert.Equal(t, "UTC", r.Location)
	assert.Equal(t, "utf8mb4", r.CharsetClient)
	assert.Equal(t, "utf8mb4", r.CharsetConnection)
	assert.True(t, r.Strict(), r.SQLMode)
	assert.Equal(t, tdb.Name, r.Database)
	assert.Equal(t, []string{"no_such_table"}, r.MissingTables("lockgen_locks", "lockgen_runs", "no_such_table"))
	assert.Positive(t, r.WaitTimeout)
	assert.GreaterOrEqual(t, r.LockWaitTimeout, time.Second)
	assert.Equal(t, "REPEATABLE-READ", r.Isolation)
	assert.NotEmpty(t, r.User)

	// The same server without parseTime: the probe says so.
	cfg := tdb.Config.Clone()
	cfg.ParseTime = false
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	raw := sql.OpenDB(c)
	defer raw.Close()
	r, err = Run(ctx, raw)
	require.NoError(t, err)
	assert.False(t, r.ParseTime)
	require.Len(t, r.Settings(), 1)
	assert.Contains(t, r.Settings()[0], "parseTime=true")
}

// good is the part of a Report that the connection settings of a sound DSN
// give.
func good() Report {
	return Report{ParseTime: true, Location: "UTC", CharsetClient: "utf8mb4", CharsetConnection: "utf8mb4",
		CharsetResults: "utf8mb4", SQLMode: "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"}
}

// TestSettings: parseTime is required, loc must be UTC under any of its
// names, the character sets utf8mb4 and sql_mode strict; each refusal
// names the DSN setting to change.
func TestSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Report)
		want   []string // parts of the one refusal; none when accepted
	}{
		{"sound", func(*Report) {}, nil},
		{"Etc/UTC", func(r *Report) { r.Location = "Etc/UTC" }, nil},
		{"results unconverted", func(r *Report) { r.CharsetResults = "" }, nil},
		{"results binary", func(r *Report) { r.CharsetResults = "binary" }, nil},
		{"strict all tables", func(r *Report) { r.SQLMode = "STRICT_ALL_TABLES" }, nil},
		{"strict lower case", func(r *Report) { r.SQLMode = "ansi_quotes,strict_trans_tables" }, nil},
		{"loc", func(r *Report) { r.Location = "Europe/London" }, []string{"loc is Europe/London", "loc=UTC"}},
		{"no parseTime", func(r *Report) { r.ParseTime, r.Location = false, "" }, []string{"parseTime=true"}},
		{"utf8mb3", func(r *Report) {
			r.CharsetClient, r.CharsetConnection, r.CharsetResults = "utf8mb3", "utf8mb3", "utf8mb3"
		},
			[]string{"not utf8mb4 (character_set_client utf8mb3, character_set_connection utf8mb3, character_set_results utf8mb3)", "charset=utf8mb4", "collation=utf8mb4_general_ci"}},
		{"connection latin1", func(r *Report) { r.CharsetConnection = "latin1" }, []string{"(character_set_connection latin1)", "charset=utf8mb4"}},
		{"results utf8mb3", func(r *Report) { r.CharsetResults = "utf8mb3" }, []string{"(character_set_results utf8mb3)"}},
		{"charset unknown", func(r *Report) { r.CharsetClient = "" }, []string{"character_set_client unknown"}},
		{"sql_mode empty", func(r *Report) { r.SQLMode = "" }, []string{`sql_mode is ""`, "STRICT_TRANS_TABLES", "sql_mode=%27STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION%27", "server's sql_mode"}},
		{"sql_mode not strict", func(r *Report) { r.SQLMode = "NO_ENGINE_SUBSTITUTION,ANSI_QUOTES" }, []string{`sql_mode is "NO_ENGINE_SUBSTITUTION,ANSI_QUOTES"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.change(&r)
			bad := r.Settings()
			if tc.want == nil {
				assert.Empty(t, bad)
				return
			}
			require.Len(t, bad, 1)
			for _, w := range tc.want {
				assert.Contains(t, bad[0], w)
			}
		})
	}
	r := good()
	r.CharsetClient, r.SQLMode = "utf8mb3", ""
	assert.Len(t, r.Settings(), 2, "each problem in a sentence of its own")
}
