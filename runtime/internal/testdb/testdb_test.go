package testdb

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestApplicationUserHasOnlyTheLockgenGrants: the pools tests use log in as
// the test's own user, which can read and write the lockgen tables and
// nothing else (no DDL, no other table), while Admin can; the user is
// dropped with the database when the test ends, so runs do not pile users
// up on the server.
func TestApplicationUserHasOnlyTheLockgenGrants(t *testing.T) {
	var user string
	t.Run("inside", func(t *testing.T) {
		d := New(t)
		user = d.User
		db := d.Open(t)

		var current string
		if err := db.QueryRow("SELECT CURRENT_USER()").Scan(&current); err != nil {
			t.Fatal(err)
		}
		if current != d.User+"@%" || !strings.HasPrefix(d.User, "lockgen_t_") {
			t.Fatalf("pools log in as %s, want %s@%%", current, d.User)
		}
		var grants []string
		rows, err := db.Query("SHOW GRANTS")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err != nil {
				t.Fatal(err)
			}
			// MariaDB appends the password hash to the USAGE line.
			g, _, _ = strings.Cut(g, " IDENTIFIED BY PASSWORD")
			grants = append(grants, g)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(grants)
		to := " TO `" + d.User + "`@`%`"
		want := []string{
			"GRANT SELECT, INSERT, UPDATE, DELETE ON `" + d.Name + "`.`lockgen_locks`" + to,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON `" + d.Name + "`.`lockgen_queues`" + to,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON `" + d.Name + "`.`lockgen_runs`" + to,
			"GRANT USAGE ON *.*" + to,
		}
		if !slices.Equal(grants, want) {
			t.Fatalf("SHOW GRANTS:\n%s\nwant:\n%s", strings.Join(grants, "\n"), strings.Join(want, "\n"))
		}
		if got := Tables(t); !slices.Equal(got, []string{"lockgen_locks", "lockgen_runs", "lockgen_queues"}) {
			t.Fatalf("Tables = %v", got)
		}

		if _, err := db.Exec("INSERT INTO lockgen_locks (name, acquired_at, expires_at) VALUES ('x', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"); err != nil {
			t.Fatalf("the user cannot write a lockgen table: %v", err)
		}
		if _, err := db.Exec("DELETE FROM lockgen_locks"); err != nil {
			t.Fatalf("the user cannot delete from a lockgen table: %v", err)
		}
		for _, q := range []string{
			"CREATE TABLE own (v INT)",
			"DROP TABLE lockgen_runs",
			"ALTER TABLE lockgen_locks ADD COLUMN x INT",
			"SELECT COUNT(*) FROM mysql.user",
		} {
			_, err := db.Exec(q)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || (me.Number != 1142 && me.Number != 1044) {
				t.Errorf("%s: got %v, want access denied (1142 or 1044)", q, err)
			}
		}
		// What a test creates for its own writes, it creates as the admin
		// and grants.
		d.Exec(t, "CREATE TABLE own (v INT)")
		if _, err := db.Exec("INSERT INTO own VALUES (1)"); err == nil {
			t.Fatal("the user wrote a table it was not granted")
		}
		d.Grant(t, "own")
		if _, err := db.Exec("INSERT INTO own VALUES (1)"); err != nil {
			t.Fatalf("after Grant: %v", err)
		}
	})

	admin := open(t, BaseConfig(t))
	defer admin.Close()
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM mysql.user WHERE user = ?", user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("user %s is still there after its test ended", user)
	}
	if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s is still there after its test ended", user)
	}
}
