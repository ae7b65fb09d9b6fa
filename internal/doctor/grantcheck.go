package doctor

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/lockgen/lockgen/runtime/probe"
)

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
