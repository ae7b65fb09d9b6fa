package prose

import "testing"

func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		items   []string
		and, or string
	}{
		{nil, "", ""},
		{[]string{"a"}, "a", "a"},
		{[]string{"a", "b"}, "a and b", "a or b"},
		{[]string{"a", "b", "c"}, "a, b and c", "a, b or c"},
	} {
		if got := And(tc.items); got != tc.and {
			t.Errorf("And(%q) = %q, want %q", tc.items, got, tc.and)
		}
		if got := Or(tc.items); got != tc.or {
			t.Errorf("Or(%q) = %q, want %q", tc.items, got, tc.or)
		}
	}
}
