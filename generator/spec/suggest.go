package spec

import (
	"fmt"
	"strings"
)

// maxSuggestDistance is the largest edit distance at which a misspelled word
// gets a "did you mean" suggestion.
const maxSuggestDistance = 2

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
// at most maxSuggestDistance edits away.
func closest(got string, choices []string) (string, bool) {
	got = strings.ToLower(got)
	best, bestDist := "", maxSuggestDistance+1
	for _, c := range choices {
		if d := editDistance(got, strings.ToLower(c), bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// editDistance returns the Levenshtein distance between a and b (in bytes),
// or limit if it is limit or more.
func editDistance(a, b string, limit int) int {
	if abs(len(a)-len(b)) >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
