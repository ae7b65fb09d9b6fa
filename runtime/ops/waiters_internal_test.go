package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParseLockData reads LOCK_DATA as both servers print it (these are
// the bytes MariaDB 10.11 and MySQL 9.7 printed for the keys) and refuses
// anything else.
func TestParseLockData(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`'a', 'k1'`, []string{"a", "k1"}},
		{`'a', ''`, []string{"a", ""}},
		{`'a', 'it''s, "x" é\\z'`, []string{"a", `it's, "x" é\z`}},
		{"'a', 'n\nt\tz\\0r\rq\x1ae'", []string{"a", "n\nt\tz\x00r\rq\x1ae"}},
		{`'a'`, []string{"a"}},
		{`supremum pseudo-record`, nil},
		{`'a', 'cut`, nil},
		{`'a',  'b'`, nil},
		{`'a', 'b' `, nil},
		{`'a\n'`, nil},
		{`1, 'b'`, nil},
		{``, nil},
	} {
		got, ok := parseLockData(tc.in)
		assert.Equal(t, tc.want != nil, ok, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}
