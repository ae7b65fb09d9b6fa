// Package prose joins words into the sentences of lockgen's messages and
// generated doc comments.
package prose

import "strings"

// And joins items as in a sentence: "a", "a and b", "a, b and c".
func And(items []string) string { return join(items, "and") }

// Or joins items as in a sentence: "a", "a or b", "a, b or c".
func Or(items []string) string { return join(items, "or") }

func join(items []string, conj string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
}
