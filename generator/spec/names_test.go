package spec

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCamelCase(t *testing.T) {
	for _, tc := range []struct{ snake, camel, lower string }{
		{"order", "Order", "order"},
		{"master", "Master", "master"},
		{"send_sms", "SendSMS", "sendSMS"},
		{"user_id", "UserID", "userID"},
		{"order_id", "OrderID", "orderID"},
		{"id", "ID", "id"},
		{"url_path", "URLPath", "urlPath"},
		{"http_url", "HTTPURL", "httpURL"},
		{"utf8_text", "UTF8Text", "utf8Text"},
		{"api_v2_key", "APIV2Key", "apiV2Key"},
		{"ttl", "TTL", "ttl"},
		{"a1", "A1", "a1"},
		{"a_1_b", "A1B", "a1B"},
		{"type", "Type", "type"},
		{"ids", "Ids", "ids"},
		{"nightly_report", "NightlyReport", "nightlyReport"},
		// Not snake_case: never panics, empty words are dropped.
		{"", "", ""},
		{"_", "", ""},
		{"__a__b_", "AB", "aB"},
		{"Order_ID", "OrderID", "orderID"},
		{"émile_zola", "ÉmileZola", "émileZola"},
		{"\xff_x", "\ufffdX", "\ufffdX"},
	} {
		assert.Equal(t, tc.camel, CamelCase(tc.snake), "CamelCase(%q)", tc.snake)
		assert.Equal(t, tc.lower, LowerCamelCase(tc.snake), "LowerCamelCase(%q)", tc.snake)
	}
}

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
		got, ok := closest(tc.got, keys)
		assert.Equal(t, tc.ok, ok, tc.got)
		assert.Equal(t, tc.want, got, tc.got)
	}
}

func TestParamProblem(t *testing.T) {
	assert.Empty(t, paramProblem("orderID"))
	assert.Equal(t, "a Go keyword", paramProblem("func"))
	assert.Equal(t, "a predeclared Go identifier", paramProblem("nil"))
	assert.Equal(t, "a predeclared Go identifier", paramProblem("any"))
	assert.Equal(t, "not a valid Go identifier", paramProblem("1a"))
	assert.Contains(t, paramProblem("ctx"), "generated code")
}
