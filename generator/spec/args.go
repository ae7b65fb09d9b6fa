package spec

import (
	"fmt"
	"go/token"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// args validates a job's args, keeping their order in the file.
func (l *loader) args(v value) []Arg {
	const example = "order_id: int64"
	switch {
	case isNull(v.node):
		l.errorf(v.node, "e.g. "+v.field.example, "args has no value")
		return nil
	case v.node.Kind != yaml.MappingNode:
		l.errorf(v.node, "e.g. "+v.field.example, "args must be a mapping, not %s", kindName(v.node))
		return nil
	case len(v.node.Content) == 0:
		l.errorf(v.node, "declare at least one, e.g. "+v.field.example+", or remove args", "args is empty")
		return nil
	}
	var args []Arg
	byName := map[string]*yaml.Node{}
	byGoName := map[string]*yaml.Node{}
	for i := 0; i+1 < len(v.node.Content); i += 2 {
		k, t := resolve(v.node.Content[i]), resolve(v.node.Content[i+1])
		name := k.Value
		switch {
		case k.Kind != yaml.ScalarNode:
			l.errorf(k, "e.g. "+example, "an arg name must be a plain name, not %s", kindName(k))
			continue
		case k.Tag == "!!merge":
			l.errorf(k, "write the args out in full", "merge keys (<<) are not supported")
			continue
		case !snakeCase.MatchString(name):
			l.errorf(k, "use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. "+example,
				"arg name %q is not snake_case", name)
			continue
		case len(name) > maxNameLen:
			l.errorf(k, "shorten it", "arg name is %d characters long, the maximum is %d", len(name), maxNameLen)
			continue
		}
		goName := CamelCase(name)
		if first, dup := byName[name]; dup {
			l.errorf(k, fmt.Sprintf("it is first declared at line %d; remove one of them", first.Line), "duplicate arg %q", name)
			continue
		}
		if first, dup := byGoName[goName]; dup {
			l.errorf(k, fmt.Sprintf("%q is at line %d; rename one of them", first.Value, first.Line),
				"args %q and %q are both the Go field %s", first.Value, name, goName)
			continue
		}
		byName[name], byGoName[goName] = k, k
		a := Arg{Pos: pos(k), Name: name, GoName: goName}
		a.Type, a.GoType, a.Import = l.argType(value{key: k, node: t, field: field{name: name, example: name + ": int64"}, label: "args." + name})
		args = append(args, a)
	}
	return args
}

// jsonArgType matches the json(...) arg type.
var jsonArgType = regexp.MustCompile(`^json\((.*)\)$`)

// goAliases are Go spellings of arg types, with their spec spelling.
var goAliases = map[string]string{"time.Time": ArgTime, "time.Duration": ArgDuration}

// argType checks an arg's type and returns its spec spelling, Go type and
// import path.
func (l *loader) argType(v value) (typ, goType, importPath string) {
	t, ok := l.text(v)
	if !ok {
		return "", "", ""
	}
	for _, at := range argTypes {
		if t == at.spec {
			return at.spec, at.goType, ""
		}
	}
	if m := jsonArgType.FindStringSubmatch(t); m != nil {
		goType, importPath = l.jsonArgType(v, strings.TrimSpace(m[1]))
		if goType == "" {
			return "", "", ""
		}
		return ArgJSON, goType, importPath
	}
	hint := "supported arg types: " + strings.Join(argTypeNames, ", ") + ", json(<import path>.<TypeName>)"
	switch s, ok := closest(t, argTypeNames); {
	case goAliases[t] != "":
		hint = fmt.Sprintf("write %s for a %s", goAliases[t], t)
	case strings.HasPrefix(t, "json"):
		hint = "write json(<import path>.<TypeName>), e.g. " + jsonArgExample
	case ok:
		hint = fmt.Sprintf("did you mean %q?", s)
	}
	l.errorf(v.node, hint, "unsupported arg type %q", t)
	return "", "", ""
}

// importPathElem matches one element of the import paths lockgen accepts:
// letters, digits and -_~+, in dot-separated runs (no leading, trailing or
// double dot).
var importPathElem = regexp.MustCompile(`^[A-Za-z0-9_~+-]+(\.[A-Za-z0-9_~+-]+)*$`)

// jsonArgType checks the inside of json(...), an import path and an
// exported type name joined by a dot, and returns the type name and the
// import path.
func (l *loader) jsonArgType(v value, ref string) (typeName, importPath string) {
	slash := strings.LastIndex(ref, "/")
	dot := strings.LastIndex(ref[slash+1:], ".")
	if dot < 0 {
		if ref == "" {
			l.errorf(v.node, "e.g. "+jsonArgExample, "json() names no type")
		} else {
			l.errorf(v.node, "write json(<import path>.<TypeName>), e.g. "+jsonArgExample, "json type %q has no import path", ref)
		}
		return "", ""
	}
	importPath, typeName = ref[:slash+1+dot], ref[slash+1+dot+1:]
	if !validImportPath(importPath) {
		l.errorf(v.node, "use the package's full import path, e.g. "+jsonArgExample, "json import path %q is not a valid Go import path", importPath)
		return "", ""
	}
	if !token.IsIdentifier(typeName) || !token.IsExported(typeName) {
		l.errorf(v.node, "name an exported type (not a pointer or generic instance), e.g. "+jsonArgExample,
			"json type %q is not an exported Go type name", typeName)
		return "", ""
	}
	return typeName, importPath
}

// validImportPath reports whether p is an import path lockgen accepts: a
// non-empty, slash-separated path of importPathElem elements.
func validImportPath(p string) bool {
	if p == "" {
		return false
	}
	for _, elem := range strings.Split(p, "/") {
		if !importPathElem.MatchString(elem) {
			return false
		}
	}
	return true
}
