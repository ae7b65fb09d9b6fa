package doctor

import (
	"slices"
	"strings"
)

// matcher compares names the way the server does.
type matcher struct {
	// fold: lower_case_table_names is not 0, names compare in lower case.
	fold bool
	// literal: MySQL's partial_revokes is on, which makes the _ and % of
	// database-level grants plain characters.
	literal bool
}

func (m matcher) eq(a, b string) bool {
	if m.fold {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// dbMatches tells whether the database-level pattern covers database.
func (m matcher) dbMatches(pattern, database string) bool {
	if m.fold {
		pattern, database = strings.ToLower(pattern), strings.ToLower(database)
	}
	if m.literal {
		return unescape(pattern) == database
	}
	return like([]rune(pattern), []rune(database))
}

// like is SQL LIKE with backslash escapes: % any run, _ any one character.
func like(p, s []rune) bool {
	for len(p) > 0 {
		switch p[0] {
		case '%':
			for i := 0; i <= len(s); i++ {
				if like(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '_':
			if len(s) == 0 {
				return false
			}
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// unescape drops the backslashes of a pattern's escapes.
func unescape(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '\\' && i+1 < len(pattern) {
			i++
		}
		b.WriteByte(pattern[i])
	}
	return b.String()
}

// access is what the session may do on one table.
type access struct {
	// have maps each privilege on the whole table to the scopes that give
	// it ("*.*", "`db`.*", "`db`.`t`", with " (role r)" when a MariaDB
	// role's line gives it).
	have map[string][]string
	// broad are the scopes in have that cover more than the table: a
	// database, a pattern of databases, or every one.
	broad map[string]bool
	// columns are privileges given on some columns only.
	columns []string
}

// on tells what gs gives on database.table. user is CURRENT_USER()
// (name@host), to tell the user's lines from a role's.
func (gs grants) on(database, table, user string, m matcher) access {
	a := access{have: map[string][]string{}, broad: map[string]bool{}}
	add := func(g grant, privs []string) {
		scope := "*.*"
		switch g.level {
		case levelDatabase:
			scope = quoteIdent(g.db) + ".*"
		case levelTable:
			scope = quoteIdent(g.db) + "." + quoteIdent(g.table)
		}
		if g.grantee != user && g.grantee != "" {
			if g.grantee == "PUBLIC" {
				scope += " (to PUBLIC)"
			} else {
				scope += " (role " + g.grantee + ")"
			}
		}
		a.broad[scope] = g.level != levelTable
		for _, p := range privs {
			if !slices.Contains(a.have[p], scope) {
				a.have[p] = append(a.have[p], scope)
			}
		}
	}
	// MySQL's partial revokes take global privileges away on a database.
	var revoked []string
	for _, g := range gs.lines {
		if g.revoke && g.level == levelDatabase && m.eq(unescape(g.db), database) {
			revoked = append(revoked, g.privs...)
		}
	}
	for _, g := range gs.lines {
		if g.revoke {
			continue
		}
		switch g.level {
		case levelGlobal:
			var privs []string
			for _, p := range g.privs {
				if !slices.Contains(revoked, p) {
					privs = append(privs, p)
				}
			}
			add(g, privs)
		case levelDatabase:
			if m.dbMatches(g.db, database) {
				add(g, g.privs)
			}
		case levelTable:
			if m.eq(g.db, database) && m.eq(g.table, table) {
				add(g, g.privs)
				a.columns = append(a.columns, g.columns...)
			}
		}
	}
	return a
}

// has tells whether the whole table is granted p.
func (a access) has(p string) bool {
	return len(a.have[p]) > 0 || len(a.have["ALL PRIVILEGES"]) > 0
}

// inactiveRoles are the roles granted to user that the session does not
// have active: neither in CURRENT_ROLE() nor granted to a role that is.
func (gs grants) inactiveRoles(user string, current []string) []string {
	active := map[string]bool{}
	for _, r := range current {
		active[r] = true
	}
	for changed := true; changed; {
		changed = false
		for _, rg := range gs.roles {
			if active[rg.grantee] && !active[rg.role] {
				active[rg.role], changed = true, true
			}
		}
	}
	var out []string
	for _, rg := range gs.roles {
		if rg.grantee == user && !active[rg.role] && !slices.Contains(out, rg.role) {
			out = append(out, rg.role)
		}
	}
	return out
}

// quoteIdent backquotes a name for messages (not "*").
func quoteIdent(s string) string {
	if s == "*" {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}
