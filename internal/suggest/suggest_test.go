package suggest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClosest(t *testing.T) {
	keys := []string{"name", "strategy", "ttl", "renew_every", "wait", "key"}
	for _, tc := range []struct {
		got, want string
		ok        bool
	}{
		{"tll", "ttl", true},
		{"TTL", "ttl", true},
		{"renew-every", "renew_every", true},
		{"renewevery", "renew_every", true},
		{"nme", "name", true},
		{"weight", "", false},
		{"", "", false},
		{"strategies", "", false},
	} {
		got, ok := Closest(tc.got, keys)
		assert.Equal(t, tc.ok, ok, tc.got)
		assert.Equal(t, tc.want, got, tc.got)
	}
}

func TestCommand(t *testing.T) {
	commands := []string{"generate", "check", "doctor", "init", "version", "help"}
	for _, tc := range []struct {
		got, want string
		ok        bool
	}{
		{"gen", "generate", true},       // an abbreviation
		{"g", "generate", true},         // the only command starting with g
		{"GEN", "generate", true},       // any case
		{"genrate", "generate", true},   // a typo
		{"chekc", "check", true},        // a typo
		{"docter", "doctor", true},      // a typo
		{"verison", "version", true},    // a typo
		{"generated", "generate", true}, // one letter too many
		{"status", "", false},
		{"", "", false},
	} {
		got, ok := Command(tc.got, commands)
		assert.Equal(t, tc.ok, ok, tc.got)
		assert.Equal(t, tc.want, got, tc.got)
	}
	got, ok := Command("c", []string{"check", "create"})
	assert.False(t, ok, "an ambiguous abbreviation suggests nothing: got %q", got)
}
