package spec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// field is one key a mapping of the spec may have.
type field struct {
	name     string
	required bool
	// planned marks keys of the design that are not built yet: they are
	// recognized (and rejected with a precise error) but not listed as valid.
	planned bool
	// example shows the key with a typical value; it is used in hints.
	example string
}

// value is a key of a mapping and its value, aliases resolved.
type value struct {
	key   *yaml.Node
	node  *yaml.Node
	field field
	// label names the key in messages: its name, prefixed by the names of
	// the mappings it is nested in, e.g. "migrations.dir".
	label string
}

// loader walks a parsed spec and collects every problem it finds.
type loader struct {
	file string
	errs ErrorList
}

// errorf records a problem at n.
func (l *loader) errorf(n *yaml.Node, hint, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Pos: pos(n), Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// pos returns the position of n, never below 1:1.
func pos(n *yaml.Node) Pos {
	return Pos{Line: max(n.Line, 1), Col: max(n.Column, 1)}
}

// resolve returns the node an alias refers to, positioned at the alias, or n
// itself if it is not an alias.
func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.AliasNode || n.Alias == nil {
		return n
	}
	r := *n.Alias
	r.Line, r.Column = n.Line, n.Column
	return &r
}

// kindName describes the kind of n for error messages.
func kindName(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode:
		return "a single value"
	default:
		return "an alias"
	}
}

// isNull reports whether n is an empty or null value ("key:", "key: ~").
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// validKeys lists the keys of schema that are not planned.
func validKeys(schema []field) []string {
	var keys []string
	for _, f := range schema {
		if !f.planned {
			keys = append(keys, f.name)
		}
	}
	return keys
}

// lookupField finds the field named name in schema.
func lookupField(schema []field, name string) (field, bool) {
	for _, f := range schema {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

// mapping checks that n, described by what (e.g. "each lock") and example,
// is a mapping whose keys are in schema, each at most once, with every
// required key present. It reports every problem, and returns the values of
// the known keys, labelled with prefix + key, and whether n was a mapping at
// all.
func (l *loader) mapping(n *yaml.Node, what, example, prefix string, schema []field) (map[string]value, bool) {
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "e.g. "+example, "%s must be a mapping, not %s", what, kindName(n))
		return nil, false
	}
	vals := make(map[string]value)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		switch f, known := lookupField(schema, k.Value); {
		case k.Kind != yaml.ScalarNode:
			l.errorf(k, "valid keys: "+strings.Join(validKeys(schema), ", "), "a key must be a plain name, not %s", kindName(k))
		case k.Tag == "!!merge":
			l.errorf(k, "write the keys out in full", "merge keys (<<) are not supported")
		case !known:
			l.errorf(k, choiceHint(k.Value, validKeys(schema), "valid keys"), "unknown key %q", k.Value)
		case vals[k.Value].key != nil:
			l.errorf(k, fmt.Sprintf("it is first set at line %d; remove one of them", vals[k.Value].key.Line), "duplicate key %q", k.Value)
		default:
			vals[k.Value] = value{key: k, node: v, field: f, label: prefix + f.name}
		}
	}
	for _, f := range schema {
		if _, ok := vals[f.name]; f.required && !ok {
			l.errorf(n, "add it, e.g. "+f.example, "missing required key %q", f.name)
		}
	}
	return vals, true
}

// nested checks that v's value is a mapping following schema; see mapping.
func (l *loader) nested(v value, schema []field) (map[string]value, bool) {
	if isNull(v.node) {
		l.errorf(v.node, "e.g. "+v.field.example, "%s has no value", v.label)
		return nil, false
	}
	return l.mapping(v.node, v.label, v.field.example, v.label+".", schema)
}

// list returns the items of v's value, which must be a list.
func (l *loader) list(v value) ([]*yaml.Node, bool) {
	if isNull(v.node) {
		l.errorf(v.node, "e.g. "+v.field.example, "%s has no value", v.label)
		return nil, false
	}
	if v.node.Kind != yaml.SequenceNode {
		l.errorf(v.node, "e.g. "+v.field.example, "%s must be a list, not %s", v.label, kindName(v.node))
		return nil, false
	}
	return v.node.Content, true
}

// scalar checks that v's value is a single non-null value.
func (l *loader) scalar(v value) bool {
	switch {
	case v.node.Kind != yaml.ScalarNode:
		l.errorf(v.node, "e.g. "+v.field.example, "%s must be a single value, not %s", v.label, kindName(v.node))
		return false
	case isNull(v.node):
		l.errorf(v.node, "e.g. "+v.field.example, "%s has no value", v.label)
		return false
	}
	return true
}

// text returns v's value as a string. Any single value is text: "123" and
// "true" are too.
func (l *loader) text(v value) (string, bool) {
	if !l.scalar(v) {
		return "", false
	}
	return v.node.Value, true
}

// boolean returns v's value, which must be true or false.
func (l *loader) boolean(v value) (bool, bool) {
	if !l.scalar(v) {
		return false, false
	}
	b, err := strconv.ParseBool(v.node.Value)
	if v.node.Tag != "!!bool" || err != nil {
		l.errorf(v.node, "e.g. "+v.field.example, "%s must be true or false, not %q", v.label, v.node.Value)
		return false, false
	}
	return b, true
}

// duration returns v's value, which must be a Go duration such as "3s".
func (l *loader) duration(v value) (time.Duration, bool) {
	if !l.scalar(v) {
		return 0, false
	}
	d, err := time.ParseDuration(v.node.Value)
	if err == nil {
		return d, true
	}
	if _, numErr := strconv.ParseFloat(v.node.Value, 64); numErr == nil {
		l.errorf(v.node, "add a unit, e.g. "+v.field.example, "%s %s has no unit", v.label, v.node.Value)
	} else {
		l.errorf(v.node, "use a Go duration such as 500ms, 3s or 1m30s", "%s %q is not a duration", v.label, v.node.Value)
	}
	return 0, false
}

// FormatDuration writes d the way a spec writes it: time.Duration.String
// without the zero units it ends with ("3s", "1m", "1m30s", "168h", "1.5s",
// "500ms", "0s"). Spec errors and generated doc comments both use it.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// wholeNumber matches decimal whole numbers.
var wholeNumber = regexp.MustCompile(`^[-+]?[0-9]+$`)

// integer returns v's value, which must be a whole number. A number too
// large for an int64 comes back clamped to the nearest int64, so that range
// checks report it.
func (l *loader) integer(v value) (int64, bool) {
	if !l.scalar(v) {
		return 0, false
	}
	// YAML makes a whole number too large for an int64 a float.
	whole := v.node.Tag == "!!int" || v.node.Tag == "!!float" && wholeNumber.MatchString(v.node.Value)
	n, err := strconv.ParseInt(v.node.Value, 0, 64)
	if !whole || err != nil && !errors.Is(err, strconv.ErrRange) {
		l.errorf(v.node, "e.g. "+v.field.example, "%s must be a whole number, not %q", v.label, v.node.Value)
		return 0, false
	}
	return n, true
}
