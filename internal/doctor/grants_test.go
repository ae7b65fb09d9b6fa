package doctor

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The lines below are real SHOW GRANTS output of MariaDB 10.11.19 and
// MySQL 9.7.4, read as the user named in each case (each user was created
// with the GRANT statements its name says), except the partial revoke,
// which is the example of MySQL's manual (partial_revokes is off on the
// test server).

const (
	mariaUsage = "GRANT USAGE ON *.* TO `gx_tbl`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'"
	gxLocks    = "`lockgen_gx`.`lockgen_locks`"
	gxRuns     = "`lockgen_gx`.`lockgen_runs`"
)

func four(scope string) map[string][]string {
	return map[string][]string{"SELECT": {scope}, "INSERT": {scope}, "UPDATE": {scope}, "DELETE": {scope}}
}

func with(m map[string][]string, priv, scope string) map[string][]string {
	m[priv] = append(m[priv], scope)
	return m
}

func TestParseGrants(t *testing.T) {
	type lookup struct {
		db, table string
		have      map[string][]string // privileges on the whole table and where from
		columns   []string
		broad     []string // scopes of have that cover more than the table
	}
	for _, tc := range []struct {
		name     string
		user     string
		current  string // CURRENT_ROLE()
		m        matcher
		lines    []string
		lookups  []lookup
		inactive []string
		unread   int
	}{
		{
			name: "MariaDB table grants, one WITH GRANT OPTION", user: "gx_tbl@%",
			lines: []string{
				mariaUsage,
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_runs` TO `gx_tbl`@`%` WITH GRANT OPTION",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_locks` TO `gx_tbl`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: four(gxLocks)},
				{db: "lockgen_gx", table: "lockgen_runs", have: with(four(gxRuns), "GRANT OPTION", gxRuns)},
				{db: "lockgen_gy", table: "lockgen_locks", have: map[string][]string{}},
				{db: "LOCKGEN_GX", table: "lockgen_locks", have: map[string][]string{}},
			},
		},
		{
			name: "MySQL table grants", user: "gx_tbl@%", current: "NONE",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_tbl`@`%`",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_locks` TO `gx_tbl`@`%`",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_runs` TO `gx_tbl`@`%` WITH GRANT OPTION",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: four(gxLocks)},
				{db: "lockgen_gx", table: "lockgen_runs", have: with(four(gxRuns), "GRANT OPTION", gxRuns)},
			},
		},
		{
			name: "names compare in lower case when lower_case_table_names is set", user: "gx_tbl@%", m: matcher{fold: true},
			lines: []string{"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_locks` TO `gx_tbl`@`%`"},
			lookups: []lookup{
				{db: "LOCKGEN_GX", table: "Lockgen_Locks", have: four(gxLocks)},
			},
		},
		{
			name: "database grant (both servers print it so)", user: "gx_db@%",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_db`@`%`",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.* TO `gx_db`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: four("`lockgen_gx`.*"), broad: []string{"`lockgen_gx`.*"}},
				{db: "lockgen_gx", table: "anything", have: four("`lockgen_gx`.*"), broad: []string{"`lockgen_gx`.*"}},
				// The _ of a database-level grant is a wildcard.
				{db: "lockgenXgx", table: "lockgen_locks", have: four("`lockgen_gx`.*"), broad: []string{"`lockgen_gx`.*"}},
				{db: "lockgen_gxy", table: "lockgen_locks", have: map[string][]string{}},
			},
		},
		{
			name: "ALL PRIVILEGES and ALL", user: "gx_all@%",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_all`@`%`",
				"GRANT ALL PRIVILEGES ON `lockgen_gx`.* TO `gx_all`@`%`",
				"GRANT ALL PRIVILEGES ON `lockgen_gx`.`lockgen_locks` TO `gx_all`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{"ALL PRIVILEGES": {"`lockgen_gx`.*", gxLocks}}, broad: []string{"`lockgen_gx`.*"}},
				{db: "lockgen_gx", table: "lockgen_runs", have: map[string][]string{"ALL PRIVILEGES": {"`lockgen_gx`.*"}}, broad: []string{"`lockgen_gx`.*"}},
			},
		},
		{
			name: "MariaDB global grant after the password", user: "gx_glob@%",
			lines: []string{"GRANT SELECT, PROCESS ON *.* TO `gx_glob`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'"},
			lookups: []lookup{
				{db: "any", table: "lockgen_locks", have: map[string][]string{"SELECT": {"*.*"}, "PROCESS": {"*.*"}}, broad: []string{"*.*"}},
			},
		},
		{
			name: "MariaDB root", user: "root@127.0.0.1",
			lines: []string{
				"GRANT `gx_r1` TO `root`@`127.0.0.1` WITH ADMIN OPTION",
				"GRANT ALL PRIVILEGES ON *.* TO `root`@`127.0.0.1` WITH GRANT OPTION",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{"ALL PRIVILEGES": {"*.*"}, "GRANT OPTION": {"*.*"}}, broad: []string{"*.*"}},
			},
			// MariaDB grants a role to whoever creates it; it is not active.
			inactive: []string{"gx_r1"},
		},
		{
			name: "MySQL root: static and dynamic privileges, PROXY", user: "root@localhost", current: "NONE",
			lines: []string{
				"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, SHUTDOWN, PROCESS, FILE, REFERENCES, INDEX, ALTER, SHOW DATABASES, SUPER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, REPLICATION CLIENT, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, CREATE USER, EVENT, TRIGGER, CREATE TABLESPACE, CREATE ROLE, DROP ROLE ON *.* TO `root`@`localhost` WITH GRANT OPTION",
				"GRANT ALLOW_NONEXISTENT_DEFINER,APPLICATION_PASSWORD_ADMIN,AUDIT_ABORT_EXEMPT,AUDIT_ADMIN,AUTHENTICATION_POLICY_ADMIN,BACKUP_ADMIN,BINLOG_ADMIN,BINLOG_ENCRYPTION_ADMIN,CLONE_ADMIN,CONNECTION_ADMIN,CREATE_SPATIAL_REFERENCE_SYSTEM,ENCRYPTION_KEY_ADMIN,FIREWALL_EXEMPT,FLUSH_OPTIMIZER_COSTS,FLUSH_PRIVILEGES,FLUSH_STATUS,FLUSH_TABLES,FLUSH_USER_RESOURCES,GROUP_REPLICATION_ADMIN,GROUP_REPLICATION_STREAM,INNODB_REDO_LOG_ARCHIVE,INNODB_REDO_LOG_ENABLE,MANAGE_DATA_MASKING_POLICY,OPTIMIZE_LOCAL_TABLE,PASSWORDLESS_USER_ADMIN,PERSIST_RO_VARIABLES_ADMIN,REPLICATION_APPLIER,REPLICATION_SLAVE_ADMIN,RESOURCE_GROUP_ADMIN,RESOURCE_GROUP_USER,ROLE_ADMIN,SENSITIVE_VARIABLES_OBSERVER,SERVICE_CONNECTION_ADMIN,SESSION_VARIABLES_ADMIN,SET_ANY_DEFINER,SHOW_ROUTINE,SYSTEM_USER,SYSTEM_VARIABLES_ADMIN,TABLE_ENCRYPTION_ADMIN,TELEMETRY_LOG_ADMIN,TRANSACTION_GTID_TAG,XA_RECOVER_ADMIN ON *.* TO `root`@`localhost` WITH GRANT OPTION",
				"GRANT PROXY ON ``@`` TO `root`@`localhost` WITH GRANT OPTION",
			},
		},
		{
			name: "wildcard database patterns, escaped and not", user: "gx_pat@%", current: "NONE",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_pat`@`%`",
				"GRANT SELECT, INSERT ON `lockgen\\_%`.* TO `gx_pat`@`%`",
				"GRANT UPDATE, DELETE ON `lockgen_g%`.* TO `gx_pat`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{
					"SELECT": {"`lockgen\\_%`.*"}, "INSERT": {"`lockgen\\_%`.*"}, "UPDATE": {"`lockgen_g%`.*"}, "DELETE": {"`lockgen_g%`.*"},
				}, broad: []string{"`lockgen\\_%`.*", "`lockgen_g%`.*"}},
				// \_ is a plain _; the unescaped _ matches any character.
				{db: "lockgenXgx", table: "lockgen_locks", have: map[string][]string{"UPDATE": {"`lockgen_g%`.*"}, "DELETE": {"`lockgen_g%`.*"}}, broad: []string{"`lockgen_g%`.*"}},
				{db: "lockgen_t_1", table: "lockgen_locks", have: map[string][]string{"SELECT": {"`lockgen\\_%`.*"}, "INSERT": {"`lockgen\\_%`.*"}}, broad: []string{"`lockgen\\_%`.*"}},
				{db: "lockgen_", table: "lockgen_locks", have: map[string][]string{"SELECT": {"`lockgen\\_%`.*"}, "INSERT": {"`lockgen\\_%`.*"}}, broad: []string{"`lockgen\\_%`.*"}},
				{db: "lockgen", table: "lockgen_locks", have: map[string][]string{}},
			},
		},
		{
			name: "patterns are plain names under MySQL's partial_revokes", user: "gx_pat@%", m: matcher{literal: true},
			lines: []string{"GRANT SELECT, INSERT ON `lockgen\\_%`.* TO `gx_pat`@`%`"},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{}},
				{db: "lockgen_%", table: "lockgen_locks", have: map[string][]string{"SELECT": {"`lockgen\\_%`.*"}, "INSERT": {"`lockgen\\_%`.*"}}, broad: []string{"`lockgen\\_%`.*"}},
			},
		},
		{
			name: "MySQL partial revoke (the manual's example)", user: "u1@%", m: matcher{literal: true},
			lines: []string{
				"GRANT SELECT, INSERT ON *.* TO `u1`@`%`",
				"REVOKE INSERT ON `mysql`.* FROM `u1`@`%`",
			},
			lookups: []lookup{
				{db: "mysql", table: "user", have: map[string][]string{"SELECT": {"*.*"}}, broad: []string{"*.*"}},
				{db: "app", table: "lockgen_locks", have: map[string][]string{"SELECT": {"*.*"}, "INSERT": {"*.*"}}, broad: []string{"*.*"}},
			},
		},
		{
			name: "column grants are not table grants", user: "gx_col@%",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_col`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
				"GRANT SELECT (`a`, `id`), UPDATE (`a`) ON `lockgen_gx`.`lockgen_locks` TO `gx_col`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{}, columns: []string{"SELECT", "UPDATE"}},
			},
		},
		{
			name: "quoted names with a backquote and dots", user: "gx_weird@%", current: "NONE",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_weird`@`%`",
				"GRANT SELECT ON `lockgen_we``ird.db`.* TO `gx_weird`@`%`",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_we``ird.db`.`app.locks` TO `gx_weird`@`%`",
				"GRANT EXECUTE ON PROCEDURE `lockgen_gx`.`p` TO `gx_weird`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_we`ird.db", table: "app.locks", have: map[string][]string{
					"SELECT": {"`lockgen_we``ird.db`.*", "`lockgen_we``ird.db`.`app.locks`"}, "INSERT": {"`lockgen_we``ird.db`.`app.locks`"},
					"UPDATE": {"`lockgen_we``ird.db`.`app.locks`"}, "DELETE": {"`lockgen_we``ird.db`.`app.locks`"},
				}, broad: []string{"`lockgen_we``ird.db`.*"}},
				{db: "lockgen_gx", table: "p", have: map[string][]string{}},
			},
		},
		{
			name: "MariaDB default role, and a role granted to it", user: "gx_role@%", current: "gx_r1",
			lines: []string{
				"GRANT `gx_r1` TO `gx_role`@`%`",
				"GRANT USAGE ON *.* TO `gx_role`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
				"GRANT `gx_r2` TO `gx_r1`",
				"GRANT USAGE ON *.* TO `gx_r1`",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_locks` TO `gx_r1`",
				"GRANT USAGE ON *.* TO `gx_r2`",
				"GRANT SELECT, INSERT, UPDATE, DELETE, DROP ON `lockgen_gx`.`lockgen_runs` TO `gx_r2`",
				"SET DEFAULT ROLE `gx_r1` FOR `gx_role`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: four(gxLocks + " (role gx_r1)")},
				{db: "lockgen_gx", table: "lockgen_runs", have: with(four(gxRuns+" (role gx_r2)"), "DROP", gxRuns+" (role gx_r2)")},
			},
		},
		{
			name: "MySQL default role: its privileges merged into the user's lines", user: "gx_role@%", current: "`gx_r1`@`%`",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_role`@`%`",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_locks` TO `gx_role`@`%`",
				"GRANT SELECT, INSERT, UPDATE, DELETE, DROP ON `lockgen_gx`.`lockgen_runs` TO `gx_role`@`%`",
				"GRANT `gx_r1`@`%` TO `gx_role`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: four(gxLocks)},
				{db: "lockgen_gx", table: "lockgen_runs", have: with(four(gxRuns), "DROP", gxRuns)},
			},
		},
		{
			name: "MariaDB role granted, not a default role", user: "gx_nodef@%",
			lines: []string{
				"GRANT `gx_r1` TO `gx_nodef`@`%`",
				"GRANT USAGE ON *.* TO `gx_nodef`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
			},
			lookups:  []lookup{{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{}}},
			inactive: []string{"gx_r1"},
		},
		{
			name: "MySQL role granted, not a default role", user: "gx_nodef@%", current: "NONE",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_nodef`@`%`",
				"GRANT `gx_r1`@`%` TO `gx_nodef`@`%`",
			},
			lookups:  []lookup{{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{}}},
			inactive: []string{"gx_r1@%"},
		},
		{
			name: "MariaDB: one of two roles active, global grant WITH GRANT OPTION after the password", user: "gx_two@%", current: "gx_r3",
			lines: []string{
				"GRANT `gx_r1` TO `gx_two`@`%` WITH ADMIN OPTION",
				"GRANT `gx_r3` TO `gx_two`@`%`",
				"GRANT SELECT, INSERT ON *.* TO `gx_two`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122' WITH GRANT OPTION",
				"GRANT USAGE ON *.* TO `gx_r3`",
				"GRANT SELECT ON `lockgen_gx`.`lockgen_locks` TO `gx_r3`",
				"SET DEFAULT ROLE `gx_r3` FOR `gx_two`@`%`",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{
					"SELECT": {"*.*", gxLocks + " (role gx_r3)"}, "INSERT": {"*.*"}, "GRANT OPTION": {"*.*"},
				}, broad: []string{"*.*"}},
			},
			inactive: []string{"gx_r1"},
		},
		{
			name: "MySQL: two default roles", user: "gx_two@%", current: "`gx_r1`@`%`,`gx_r3`@`%`",
			lines: []string{
				"GRANT SELECT, INSERT ON *.* TO `gx_two`@`%` WITH GRANT OPTION",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.`lockgen_locks` TO `gx_two`@`%`",
				"GRANT SELECT, INSERT, UPDATE, DELETE, DROP ON `lockgen_gx`.`lockgen_runs` TO `gx_two`@`%`",
				"GRANT `gx_r3`@`%` TO `gx_two`@`%`",
				"GRANT `gx_r1`@`%` TO `gx_two`@`%` WITH ADMIN OPTION",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_locks", have: map[string][]string{
					"SELECT": {"*.*", gxLocks}, "INSERT": {"*.*", gxLocks}, "UPDATE": {gxLocks}, "DELETE": {gxLocks}, "GRANT OPTION": {"*.*"},
				}, broad: []string{"*.*"}},
			},
		},
		{
			name: "MariaDB PUBLIC", user: "gx_db@%",
			lines: []string{
				"GRANT USAGE ON *.* TO `gx_db`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
				"GRANT SELECT, INSERT, UPDATE, DELETE ON `lockgen_gx`.* TO `gx_db`@`%`",
				"GRANT SELECT ON `lockgen_gx`.`lockgen_runs` TO PUBLIC",
			},
			lookups: []lookup{
				{db: "lockgen_gx", table: "lockgen_runs", have: with(four("`lockgen_gx`.*"), "SELECT", gxRuns+" (to PUBLIC)"), broad: []string{"`lockgen_gx`.*"}},
			},
		},
		{
			name: "lines not understood are counted, never guessed", user: "x@%",
			lines:  []string{"GRANT", "GRANT SELECT ON", "GRANT SELECT ON `a`.`b` TO", "GRANT SELECT ON `unterminated TO x", "SHOW ME"},
			unread: 5,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := parseGrants(tc.lines)
			assert.Equal(t, tc.unread, gs.unread, "lines not understood")
			for _, l := range tc.lookups {
				a := gs.on(l.db, l.table, tc.user, tc.m)
				assert.Equal(t, l.have, a.have, "%s.%s", l.db, l.table)
				assert.Equal(t, l.columns, a.columns, "%s.%s: column grants", l.db, l.table)
				var broad []string
				for _, scopes := range a.have {
					for _, s := range scopes {
						if a.broad[s] && !slices.Contains(broad, s) {
							broad = append(broad, s)
						}
					}
				}
				assert.ElementsMatch(t, l.broad, broad, "%s.%s: broad scopes", l.db, l.table)
			}
			assert.Equal(t, tc.inactive, gs.inactiveRoles(tc.user, currentRoles(tc.current)), "inactive roles")
		})
	}
}

func TestLike(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{`lockgen\_%`, "lockgen_t_1", true},
		{`lockgen\_%`, "lockgenXt", false},
		{`lockgen_%`, "lockgenXt", true},
		{`a%b%c`, "aXXbYYc", true},
		{`a%b%c`, "aXXbYY", false},
		{`a\%`, "a%", true},
		{`a\%`, "ab", false},
		{`_`, "", false},
		{`%`, "", true},
		{`ü_`, "üx", true},
	} {
		assert.Equal(t, tc.want, like([]rune(tc.pattern), []rune(tc.s)), "%q LIKE %q", tc.s, tc.pattern)
	}
}
