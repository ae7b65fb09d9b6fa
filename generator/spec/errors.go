package spec

import (
	"cmp"
	"fmt"
	"slices"
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
