package spec

import (
	"bytes"
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a spec file.
//
// Pos points at the offending key or value (1-based line and column, both
// always >= 1). Msg says what is wrong and is never empty; Hint, when not
// empty, says how to fix it. Neither contains a newline.
type Error struct {
	File string
	Pos  Pos
	Msg  string
	Hint string
}

// Error formats e as "file:line:col: msg (hint)", or "file:line:col: msg"
// when there is no hint. When File is empty the "file:" prefix is omitted.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	fmt.Fprintf(&b, "%d:%d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
	if e.Hint != "" {
		fmt.Fprintf(&b, " (%s)", e.Hint)
	}
	return b.String()
}

// ErrorList is every problem found in a spec file, sorted by position (line,
// then column; problems at the same position keep the order they were
// found in). Load returns a non-empty ErrorList as its error; callers can
// get it back with errors.As.
type ErrorList []*Error

// Error formats the list one error per line, in order, without a trailing
// newline.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the errors of the list, so errors.As(err, &e) with
// e *Error finds the first one.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sort orders the list by position, keeping the discovery order of errors
// at the same position.
func (l ErrorList) sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Col, b.Pos.Col))
	})
}

// yamlLine matches the position prefix of yaml.v3's syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError turns an error from the YAML parser into an *Error. yaml.v3
// reports a line for most syntax errors and never a column, so the column is
// always 1; the line is clamped to the lines data has.
func syntaxError(file string, data []byte, err error) *Error {
	msg, line := err.Error(), 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		msg = msg[len(m[0]):]
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			line = min(max(n, 1), bytes.Count(data, []byte("\n"))+1)
		}
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.ReplaceAll(msg, "\n", " ")
	hint := "check the indentation, quoting and brackets on this line and the one before it"
	if hasTabIndent(data, line) {
		hint = "YAML does not allow tabs for indentation; indent with spaces"
	}
	return &Error{File: file, Pos: Pos{Line: line, Col: 1}, Msg: "invalid YAML: " + msg, Hint: hint}
}

// hasTabIndent reports whether the 1-based line of data, or the one before
// it, is indented with a tab.
func hasTabIndent(data []byte, line int) bool {
	lines := bytes.Split(data, []byte("\n"))
	for _, i := range []int{line - 2, line - 1} {
		if i >= 0 && i < len(lines) && bytes.Contains(leadingSpace(lines[i]), []byte("\t")) {
			return true
		}
	}
	return false
}

// leadingSpace returns the spaces and tabs at the start of b.
func leadingSpace(b []byte) []byte {
	return b[:len(b)-len(bytes.TrimLeft(b, " \t"))]
}
