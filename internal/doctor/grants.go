package doctor

import (
	"slices"
	"strings"
)

// This file reads SHOW GRANTS of the current session on MariaDB and MySQL
// and tells what the user may do on one table. Both servers list there the
// user's own grants and those of the roles active in the session (MySQL
// merges a role's privileges into the user's lines; MariaDB prints the
// active role's lines, and those of the roles granted to it, under the
// role's name), and the grants to PUBLIC (MariaDB 10.11+). A role granted
// but not active shows only as "GRANT role TO user": its privileges are
// not the session's, and not the application's either, which connects the
// same way.
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

// quoteIdent backquotes a name for messages (not "*").
func quoteIdent(s string) string {
	if s == "*" {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// token is a word, a punctuation mark, or a quoted name or string.
type token struct {
	s      string
	quoted bool // `name`, 'string' or "string"
}

func (t token) word(w string) bool { return !t.quoted && strings.EqualFold(t.s, w) }

// tokenize splits a SHOW GRANTS line.
func tokenize(line string) ([]token, bool) {
	var toks []token
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '`' || c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(line) {
					return nil, false
				}
				if line[j] == c {
					if j+1 < len(line) && line[j+1] == c { // doubled: one quote
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				if c != '`' && line[j] == '\\' && j+1 < len(line) { // string escape
					j++
				}
				b.WriteByte(line[j])
				j++
			}
			toks = append(toks, token{s: b.String(), quoted: true})
			i = j + 1
		case strings.IndexByte(",.@()*=;", c) >= 0:
			toks = append(toks, token{s: string(c)})
			i++
		default:
			j := i
			for j < len(line) && strings.IndexByte(" \t\n`'\",.@()*=;", line[j]) < 0 {
				j++
			}
			toks = append(toks, token{s: line[i:j]})
			i = j
		}
	}
	return toks, true
}

// parser walks tokens.
type parser struct {
	toks []token
	i    int
}

func (p *parser) done() bool { return p.i >= len(p.toks) }

func (p *parser) peek() token {
	if p.done() {
		return token{}
	}
	return p.toks[p.i]
}

func (p *parser) next() token {
	t := p.peek()
	p.i++
	return t
}

// keyword consumes the unquoted word w.
func (p *parser) keyword(w string) bool {
	if !p.done() && p.peek().word(w) {
		p.i++
		return true
	}
	return false
}

// punct consumes the punctuation mark s.
func (p *parser) punct(s string) bool {
	if !p.done() && !p.peek().quoted && p.peek().s == s {
		p.i++
		return true
	}
	return false
}

// name reads a database or table name: *, `quoted` or a bare word.
func (p *parser) name() (string, bool) {
	if p.done() {
		return "", false
	}
	t := p.next()
	if !t.quoted && (t.s == "," || t.s == "." || t.s == "@" || t.s == "(" || t.s == ")") {
		return "", false
	}
	return t.s, true
}

// account reads name[@host] as name@host (or name alone).
func (p *parser) account() (string, bool) {
	n, ok := p.name()
	if !ok || n == "*" {
		return "", false
	}
	if p.punct("@") {
		h, ok := p.name()
		if !ok {
			return "", false
		}
		return n + "@" + h, true
	}
	return n, true
}
