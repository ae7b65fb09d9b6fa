package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lockgen/lockgen/internal/prose"
)

// yamlLine matches the position prefix of yaml.v3's syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError turns an error from the YAML parser into an *Error at the line
// and column where the document goes wrong.
//
// yaml.v3's own line is unreliable: for most parser errors it is the start
// of the enclosing block ("while parsing a block mapping"), counted from 0,
// so a key mis-indented on line 6 of a list that starts on line 4 was
// reported at line 3; and it never gives a column. syntaxError finds the
// first line at which the document fails with the same message instead
// (see offendingLine), and points at that line's first character.
func syntaxError(file string, data []byte, err error) *Error {
	msg, reported := yamlMessage(err)
	lines := strings.Split(string(data), "\n")
	line := offendingLine(lines, msg, reported)
	text := lines[line-1]
	col := len(text) - len(strings.TrimLeft(text, " ")) + 1
	hint := "check the indentation, quoting and brackets on this line and the one before it"
	anchor := unknownAnchor.FindStringSubmatch(msg)
	switch {
	case anchor != nil:
		if i := strings.Index(text, "*"+anchor[1]); i >= 0 {
			col = i + 1
		}
		hint = fmt.Sprintf("an alias *%s repeats a value marked &%s earlier in the file; mark one, or write the value out", anchor[1], anchor[1])
	case hasTabIndent(lines, line):
		hint = "YAML does not allow tabs for indentation; indent with spaces"
	case blockErrors[msg] && indentHint(lines, line) != "":
		hint = indentHint(lines, line)
	}
	return &Error{File: file, Pos: Pos{Line: line, Col: col}, Msg: "invalid YAML: " + msg, Hint: hint}
}

// blockErrors are the parser messages that a line indented unlike the
// blocks around it causes.
var blockErrors = map[string]bool{
	"did not find expected key":                              true,
	"did not find expected '-' indicator":                    true,
	"mapping values are not allowed in this context":         true,
	"block sequence entries are not allowed in this context": true,
	"did not find expected <document start>":                 true,
}

// unknownAnchor matches yaml.v3's message for an alias without an anchor.
var unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// yamlMessage splits a YAML parser error into its message, on one line and
// without the "yaml: line N: " prefix, and N (0 when there is none).
func yamlMessage(err error) (msg string, line int) {
	msg = err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		msg = msg[len(m[0]):]
		line, _ = strconv.Atoi(m[1])
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	return strings.ReplaceAll(msg, "\n", " "), line
}

// maxScanBytes bounds the YAML that offendingLine re-parses line by line
// before it turns to bisection.
const maxScanBytes = 1 << 20

// offendingLine returns the 1-based number of the first line of lines whose
// addition makes the document fail with the parser message msg: the
// documents made of lines[:n] parse, or fail differently, for every smaller
// n. yaml.v3 reported the error at line reported, which is never after the
// offending line (it is the enclosing block's start, or the offending line
// itself counted from 0 or from 1), so the search starts there.
//
// It tries one line after another while the prefixes it re-parses add up
// to less than maxScanBytes (any spec a person writes), then bisects the
// rest, assuming that once a prefix fails with msg every longer one does.
// Without such a line it returns reported, within the file.
func offendingLine(lines []string, msg string, reported int) int {
	start := min(max(reported, 1), len(lines))
	failsSo := func(n int) bool {
		err := parseAll([]byte(strings.Join(lines[:n], "\n") + "\n"))
		if err == nil {
			return false
		}
		got, _ := yamlMessage(err)
		return got == msg
	}
	size, scanned := len(strings.Join(lines[:start-1], "\n")), 0
	n := start
	for ; n <= len(lines) && scanned < maxScanBytes; n++ {
		size += len(lines[n-1]) + 1
		scanned += size
		if failsSo(n) {
			return n
		}
	}
	if n > len(lines) || !failsSo(len(lines)) {
		return start
	}
	lo, hi := n, len(lines) // the first failing prefix is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		if failsSo(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// parseAll parses every document of data and returns the first error.
func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		switch err := decode(dec, &n); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// indentHint explains line n's indentation when it lines up with none of
// the blocks above it (the previous line, and each less indented line
// before it that encloses it), the usual cause of a YAML error there; else
// it returns "".
func indentHint(lines []string, n int) string {
	indent := spaces(lines[n-1])
	if strings.TrimSpace(lines[n-1]) == "" {
		return ""
	}
	var levels []string
	last := -1
	for i := n - 2; i >= 0; i-- {
		text := strings.TrimSpace(lines[i])
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		in := spaces(lines[i])
		if last >= 0 && in >= last {
			continue
		}
		levels = append(levels, fmt.Sprintf("%d (line %d)", in, i+1))
		if in == indent {
			if strings.HasPrefix(text, "- ") && !strings.HasPrefix(strings.TrimSpace(lines[n-1]), "-") {
				return fmt.Sprintf(`this line lines up with the "- " of the list item on line %d: indent it by %s to add it to that item, or start a new item with "- "`,
					i+1, plural(in+2+spaces(text[2:]), "space"))
			}
			return ""
		}
		// A list item's mapping starts after its "- ".
		if rest, ok := strings.CutPrefix(text, "- "); ok && in+2+spaces(rest) == indent {
			return ""
		}
		last = in
		if in == 0 {
			break
		}
	}
	if len(levels) == 0 {
		return ""
	}
	return fmt.Sprintf("this line is indented by %s, the blocks above it by %s: YAML nests by indentation, so indent it like one of them",
		plural(indent, "space"), prose.And(levels))
}

// spaces counts the spaces that start s.
func spaces(s string) int {
	return len(s) - len(strings.TrimLeft(s, " "))
}

// plural is "1 space" or "n spaces".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// hasTabIndent reports whether the 1-based line of lines, or the one before
// it, is indented with a tab.
func hasTabIndent(lines []string, line int) bool {
	for _, i := range []int{line - 2, line - 1} {
		if i >= 0 && i < len(lines) && strings.Contains(leadingSpace(lines[i]), "\t") {
			return true
		}
	}
	return false
}

// leadingSpace returns the spaces and tabs at the start of s.
func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t"))]
}
