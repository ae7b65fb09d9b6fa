package doctor

import (
	"slices"
	"strings"
)

// This file reads SHOW GRANTS of the current session on MariaDB and MySQL
// (tokens.go splits the lines), and access.go tells what the user may do
// on one table. Both servers list there the user's own grants and those of
// the roles active in the session (MySQL merges a role's privileges into
// the user's lines; MariaDB prints the active role's lines, and those of
// the roles granted to it, under the role's name), and the grants to
// PUBLIC (MariaDB 10.11+). A role granted but not active shows only as
// "GRANT role TO user": its privileges are not the session's, and not the
// application's either, which connects the same way.
//
// The lines are never printed: MariaDB's carry the password hash.

// Scope levels of a grant.
const (
	levelGlobal   = "global"   // ON *.*
	levelDatabase = "database" // ON `db`.*, db a LIKE pattern (_ and % wild, \ escapes)
	levelTable    = "table"    // ON `db`.`table`
	levelRoutine  = "routine"  // ON PROCEDURE/FUNCTION/PACKAGE …: nothing on tables
)

// grant is one GRANT … ON … TO … line, or a REVOKE … ON … FROM … line
// (MySQL's partial revokes).
type grant struct {
	revoke bool
	// privs are the privileges on the whole scope, upper case ("ALL
	// PRIVILEGES" for ALL, "GRANT OPTION" for WITH GRANT OPTION); columns
	// those given on some columns only.
	privs, columns []string
	level          string
	db, table      string // unquoted, as the server prints them
	grantee        string // name@host, or a bare name (a MariaDB role, PUBLIC)
}

// roleGrant is a GRANT role TO grantee line.
type roleGrant struct{ role, grantee string }

// grants is SHOW GRANTS, read.
type grants struct {
	lines  []grant
	roles  []roleGrant
	unread int // lines not understood
}

// parseGrants reads the lines of SHOW GRANTS.
func parseGrants(lines []string) grants {
	var gs grants
	for _, line := range lines {
		toks, ok := tokenize(line)
		if !ok || len(toks) == 0 {
			gs.unread++
			continue
		}
		switch {
		case toks[0].word("GRANT"), toks[0].word("REVOKE"):
			if !gs.parseLine(toks) {
				gs.unread++
			}
		case toks[0].word("SET") && len(toks) > 2 && toks[1].word("DEFAULT") && toks[2].word("ROLE"):
			// MariaDB's default role: CURRENT_ROLE() says which roles are
			// active, which is what counts.
		default:
			gs.unread++
		}
	}
	return gs
}

// parseLine reads a GRANT or REVOKE line into gs; false when it cannot.
func (gs *grants) parseLine(toks []token) bool {
	p := &parser{toks: toks, i: 1}
	revoke := toks[0].word("REVOKE")
	if !revoke && p.peek().quoted {
		// GRANT role[, role] TO grantee [WITH ADMIN OPTION]
		var roles []string
		for {
			role, ok := p.account()
			if !ok {
				return false
			}
			roles = append(roles, role)
			if !p.punct(",") {
				break
			}
		}
		if !p.keyword("TO") {
			return false
		}
		grantee, ok := p.account()
		if !ok {
			return false
		}
		for _, r := range roles {
			gs.roles = append(gs.roles, roleGrant{role: r, grantee: grantee})
		}
		return true
	}
	g := grant{revoke: revoke}
	// privilege [(column, …)] [, …] ON
	for {
		var words []string
		for !p.done() && !p.peek().quoted && p.peek().s != "," && p.peek().s != "(" && !p.peek().word("ON") {
			words = append(words, strings.ToUpper(p.next().s))
		}
		if len(words) == 0 {
			return false
		}
		priv := strings.Join(words, " ")
		if priv == "ALL" {
			priv = "ALL PRIVILEGES"
		}
		if p.punct("(") {
			for !p.punct(")") {
				if p.done() {
					return false
				}
				p.next()
			}
			g.columns = append(g.columns, priv)
		} else if priv != "USAGE" {
			g.privs = append(g.privs, priv)
		}
		if p.keyword("ON") {
			break
		}
		if !p.punct(",") {
			return false
		}
	}
	// ON [TABLE | PROCEDURE | FUNCTION | PACKAGE [BODY]] db[.table]
	g.level = ""
	switch {
	case p.keyword("TABLE"):
	case p.keyword("PROCEDURE"), p.keyword("FUNCTION"), p.keyword("PACKAGE"):
		p.keyword("BODY")
		g.level = levelRoutine
	}
	if slices.Equal(g.privs, []string{"PROXY"}) {
		return true // GRANT PROXY ON user TO user: nothing on tables
	}
	db, ok := p.name()
	if !ok {
		return false
	}
	table := "*"
	if p.punct(".") {
		if table, ok = p.name(); !ok {
			return false
		}
	}
	g.db, g.table = db, table
	if g.level == "" {
		switch {
		case db == "*" && table == "*":
			g.level = levelGlobal
		case table == "*":
			g.level = levelDatabase
		default:
			g.level = levelTable
		}
	}
	to := "TO"
	if revoke {
		to = "FROM"
	}
	if !p.keyword(to) {
		return false
	}
	if g.grantee, ok = p.account(); !ok {
		return false
	}
	// The rest: MariaDB's IDENTIFIED … on the USAGE line, then options.
	for !p.done() {
		if p.keyword("WITH") {
			if p.keyword("GRANT") && p.keyword("OPTION") {
				g.privs = append(g.privs, "GRANT OPTION")
			}
			continue
		}
		p.next()
	}
	if g.level != levelRoutine {
		gs.lines = append(gs.lines, g)
	}
	return true
}

// currentRoles reads CURRENT_ROLE(): MySQL's "`r`@`%`,`s`@`%`" or NONE,
// MariaDB's bare name or NULL.
func currentRoles(s string) []string {
	if s == "" || s == "NONE" {
		return nil
	}
	if !strings.Contains(s, "`") {
		return []string{s}
	}
	toks, ok := tokenize(s)
	if !ok {
		return nil
	}
	var roles []string
	p := &parser{toks: toks}
	for !p.done() {
		r, ok := p.account()
		if !ok {
			return roles
		}
		roles = append(roles, r)
		p.punct(",")
	}
	return roles
}
