package main

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/internal/sqltest"
	"github.com/lockgen/lockgen/templates"
)

// TestDoctorNeverPrintsThePassword runs `lockgen doctor` as a user would,
// with -dsn and with LOCKGEN_DSN, in text and JSON, against the test
// server with a user whose password is recognizable: when everything
// works, with a wrong password, against a closed port, and with DSNs the
// driver cannot parse. Neither stdout nor stderr ever holds the password,
// and each says what happened.
func TestDoctorNeverPrintsThePassword(t *testing.T) {
	db := sqltest.New(t, "lockgen_cli_")
	schema, err := templates.Render(templates.Schema, templates.Data{Header: templates.Header, Prefix: "lockgen_", Jobs: true})
	require.NoError(t, err)
	cfg := db.Config.Clone()
	cfg.MultiStatements = true
	_, err = sqltest.Open(t, cfg).Exec(string(schema))
	require.NoError(t, err)

	var b [6]byte
	_, _ = rand.Read(b[:])
	user := "lgcli_" + hex.EncodeToString(b[:])
	password := "Pw_" + hex.EncodeToString(b[:]) + "_s3cr3t"
	wrong := "Wr_" + hex.EncodeToString(b[:]) + "_n0tit"
	_, err = db.Admin.Exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	for _, table := range []string{"lockgen_locks", "lockgen_runs", "lockgen_queues"} {
		_, err = db.Admin.Exec("GRANT SELECT, INSERT, UPDATE, DELETE ON " + db.Config.DBName + "." + table + " TO '" + user + "'@'%'")
		require.NoError(t, err)
	}
	dsn := func(password, addr string) string {
		c := db.Config.Clone()
		c.User, c.Passwd = user, password
		if addr != "" {
			c.Addr = addr
		}
		return c.FormatDSN()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())

	for _, tc := range []struct {
		label, dsn string
		code       int
		says       string // in stdout when the code is exitOK, else in stderr
	}{
		{"works", dsn(password, ""), exitOK, "result: everything"},
		{"wrong-password", dsn(wrong, ""), exitFail, "Access denied for user '" + user + "'"},
		{"closed-port", dsn(password, closed), exitFail, "connection refused"},
		// A "/" in the password ends the user part early: the driver's
		// parse error would quote the rest.
		{"unparsable", user + ":" + password + "/x@tcp(" + db.Config.Addr + ")", exitFail, "bad DSN"},
		// Not URL-decoded: the driver sends the password as written.
		{"percent", user + ":" + password + "%zz@tcp(" + db.Config.Addr + ")/" + db.Config.DBName + "?parseTime=true", exitFail, "Access denied for user '" + user + "'"},
	} {
		for mode, args := range map[string][]string{
			"text":        {"doctor", "-dsn", tc.dsn},
			"json":        {"doctor", "-json", "-dsn", tc.dsn},
			"LOCKGEN_DSN": {"doctor"},
		} {
			t.Run(tc.label+"/"+mode, func(t *testing.T) {
				t.Setenv("LOCKGEN_DSN", tc.dsn)
				code, stdout, stderr := lockgen(args...)
				assert.Equal(t, tc.code, code, "%v\nstdout:\n%s\nstderr:\n%s", args, stdout, stderr)
				switch {
				case tc.code == exitOK && slices.Contains(args, "-json"):
					assert.Contains(t, stdout, `"ok": true`)
					assert.Contains(t, stdout, user, "the report names the user")
				case tc.code == exitOK:
					assert.Contains(t, stdout, tc.says)
					assert.Contains(t, stdout, user, "the report names the user")
				default:
					assert.Contains(t, stderr, tc.says)
				}
				for _, pw := range []string{password, wrong} {
					assert.NotContains(t, stdout, pw, "%v: the password on stdout", args)
					assert.NotContains(t, stderr, pw, "%v: the password on stderr", args)
				}
			})
		}
	}
}
