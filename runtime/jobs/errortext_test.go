package jobs

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// TestErrorText: the kept error text is valid UTF-8 and at most
// MaxErrorText bytes, cut at a character boundary.
func TestErrorText(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"short":         {"boom", "boom"},
		"invalid utf-8": {"bad \xff byte", "bad \uFFFD byte"},
		"exact":         {strings.Repeat("a", MaxErrorText), strings.Repeat("a", MaxErrorText)},
		"cut in a rune": {strings.Repeat("a", MaxErrorText-1) + "€", strings.Repeat("a", MaxErrorText-1)},
		"cut after":     {strings.Repeat("a", MaxErrorText-3) + "€b", strings.Repeat("a", MaxErrorText-3) + "€"},
	} {
		got := errorText(errors.New(tc.in))
		assert.Equal(t, tc.want, got, name)
		assert.True(t, utf8.ValidString(got), name)
		assert.LessOrEqual(t, len(got), MaxErrorText, name)
	}
}
