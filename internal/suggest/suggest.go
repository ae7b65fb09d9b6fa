// Package suggest finds the word a user probably meant: the spec loader's
// "did you mean" hints for keys and values, and the CLI's for commands.
package suggest

import "strings"

// MaxDistance is the largest edit distance at which a misspelled word gets a
// suggestion.
const MaxDistance = 2

// Closest returns the first choice nearest to got, ignoring case, if it is
// at most MaxDistance edits away.
func Closest(got string, choices []string) (string, bool) {
	got = strings.ToLower(got)
	best, bestDist := "", MaxDistance+1
	for _, c := range choices {
		if d := editDistance(got, strings.ToLower(c), bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// Command returns the command got probably names: the only choice that
// starts with it (an abbreviation such as "gen" for "generate"), else the
// Closest one.
func Command(got string, choices []string) (string, bool) {
	var prefixed []string
	for _, c := range choices {
		if got != "" && strings.HasPrefix(c, strings.ToLower(got)) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0], true
	}
	return Closest(got, choices)
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
