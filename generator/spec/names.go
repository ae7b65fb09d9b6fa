package spec

import (
	"go/token"
	"go/types"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// initialisms are the words CamelCase writes in upper case: golint's list of
// common initialisms plus SMS. Never mutated.
var initialisms = map[string]bool{
	"ACL": true, "API": true, "ASCII": true, "CPU": true, "CSS": true,
	"DNS": true, "EOF": true, "GUID": true, "HTML": true, "HTTP": true,
	"HTTPS": true, "ID": true, "IP": true, "JSON": true, "LHS": true,
	"QPS": true, "RAM": true, "RHS": true, "RPC": true, "SLA": true,
	"SMS": true, "SMTP": true, "SQL": true, "SSH": true, "TCP": true,
	"TLS": true, "TTL": true, "UDP": true, "UI": true, "UID": true,
	"UUID": true, "URI": true, "URL": true, "UTF8": true, "VM": true,
	"XML": true, "XMPP": true, "XSRF": true, "XSS": true,
}

// CamelCase converts a snake_case name to an exported Go identifier: each
// word separated by "_" is capitalized, and common initialisms (ID, URL,
// SMS, ...) are written in upper case: "send_sms" -> "SendSMS",
// "user_id" -> "UserID", "order" -> "Order".
//
// For a valid snake_case name (see Lock.Name) the result is a valid exported
// Go identifier. Other input never panics: empty words are dropped and the
// rest of each word is kept as is.
func CamelCase(snake string) string {
	var b strings.Builder
	for _, w := range words(snake) {
		b.WriteString(upperWord(w))
	}
	return b.String()
}

// LowerCamelCase converts a snake_case name to an unexported Go identifier:
// like CamelCase, except that the first word is all lower case, even when it
// is an initialism: "order_id" -> "orderID", "id" -> "id",
// "url_path" -> "urlPath".
//
// The result may be a Go keyword or predeclared identifier ("type" ->
// "type"); Load rejects key names for which it is.
func LowerCamelCase(snake string) string {
	ws := words(snake)
	if len(ws) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(strings.ToLower(ws[0]))
	for _, w := range ws[1:] {
		b.WriteString(upperWord(w))
	}
	return b.String()
}

// words splits a snake_case name on "_", dropping empty words.
func words(snake string) []string {
	return strings.FieldsFunc(snake, func(r rune) bool { return r == '_' })
}

// upperWord capitalizes w, or upper-cases all of it if it is an initialism.
func upperWord(w string) string {
	if u := strings.ToUpper(w); initialisms[u] {
		return u
	}
	r, size := utf8.DecodeRuneInString(w)
	return string(unicode.ToUpper(r)) + w[size:]
}

// snakeCase matches the names lockgen accepts for locks and keys.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// maxNameLen is the longest lock or key name.
const maxNameLen = 64

// reservedParams are the parameter names the generated functions already
// use next to a key parameter, as in WithOrderLock(ctx, orderID, fn).
var reservedParams = map[string]string{
	"ctx": "the context parameter",
	"fn":  "the callback parameter",
}

// paramProblem says why ident cannot be the name of a generated Go
// parameter, or returns "" when it can.
func paramProblem(ident string) string {
	switch {
	case token.IsKeyword(ident):
		return "a Go keyword"
	case !token.IsIdentifier(ident):
		return "not a valid Go identifier"
	case types.Universe.Lookup(ident) != nil:
		return "a predeclared Go identifier"
	case reservedParams[ident] != "":
		return "already used by the generated code for " + reservedParams[ident]
	}
	return ""
}

// Methods returns the names of the methods of the generated Locks type that
// belong to lk, in the order they are generated: With<GoName>Lock,
// Try<GoName>Lock, Acquire<GoName>Lock and <GoName>LockHolder, then, for a
// leader, RunAs<GoName>, Is<GoName>Leader and <GoName>Leader. Load rejects
// specs in which two locks would get a method of the same name.
func (lk Lock) Methods() []string {
	g := lk.GoName
	ms := []string{"With" + g + "Lock", "Try" + g + "Lock", "Acquire" + g + "Lock", g + "LockHolder"}
	if lk.Key != nil {
		ms = append(ms, "Prune"+g+"Locks")
	}
	if lk.Strategy == StrategyRow {
		ms = append(ms, "With"+g+"LockTx")
	}
	if lk.Leader {
		ms = append(ms, "RunAs"+g, "Is"+g+"Leader", g+"Leader")
	}
	return ms
}
