package doctor

import "strings"

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
