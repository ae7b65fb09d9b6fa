package spec

import (
	"fmt"
	"strings"

	"github.com/lockgen/lockgen/internal/suggest"
)

// choiceHint is the hint for got, which is not one of choices: a suggestion
// of the closest choice if one is near enough, else the list of choices
// introduced by what, e.g. "valid keys: name, ttl".
func choiceHint(got string, choices []string, what string) string {
	if s, ok := closest(got, choices); ok {
		return fmt.Sprintf("did you mean %q?", s)
	}
	return what + ": " + strings.Join(choices, ", ")
}

// closest returns the first choice nearest to got, ignoring case, if it is
// at most suggest.MaxDistance edits away.
func closest(got string, choices []string) (string, bool) {
	return suggest.Closest(got, choices)
}
