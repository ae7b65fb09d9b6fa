package demodb

import (
	"strings"
	"testing"
)

// TestConfigNeverQuotesThePassword: DSNs the driver cannot parse fail with
// an error that holds no part of the password (the driver's own message
// can: "default addr for network 'app:s3cr' unknown").
func TestConfigNeverQuotesThePassword(t *testing.T) {
	for _, tc := range []struct{ dsn, secret string }{
		{"app:s3cr/etPW@tcp(db:3306)", "s3cr/etPW"},
		{"app:se/cretPW@tcp(db:3306)/x?parseTime=maybe", "se/cretPW"},
		{"app:secretPW@tcp(db:3306/x", "secretPW"},
		{"app:secretPW@unix(/tmp/x/y)/db?tls=nope", "secretPW"},
	} {
		_, err := Config(tc.dsn)
		if err == nil {
			t.Fatalf("%s: parsed", tc.dsn)
		}
		for i := 0; i+4 <= len(tc.secret); i++ {
			if part := tc.secret[i : i+4]; strings.Contains(err.Error(), part) {
				t.Errorf("%s: error %q holds %q of the password", tc.dsn, err, part)
			}
		}
		if !strings.Contains(err.Error(), "bad DSN") {
			t.Errorf("%s: error %q does not say the DSN is bad", tc.dsn, err)
		}
	}
}
