package runtime_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// TestNoStatementWarns runs every query lockgen generates (each method of
// the sqlc Queries, found by reflection so a new query cannot be left
// out), and the runtime's multi-row run insert, twice on one connection:
// once on an empty table and once on the rows the first round left. After
// each statement SHOW WARNINGS must be empty. It catches, on MySQL,
// warning 1287 of VALUES() in ON DUPLICATE KEY UPDATE, and on both
// servers truncations and implicit conversions.
func TestNoStatementWarns(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t).Open(t)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	q := lockgendb.New(conn)

	warnings := func(what string) {
		t.Helper()
		rows, err := conn.QueryContext(ctx, "SHOW WARNINGS")
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var level, message string
			var code int
			require.NoError(t, rows.Scan(&level, &code, &message))
			t.Errorf("%s: %s %d: %s", what, level, code, message)
		}
		require.NoError(t, rows.Err())
	}

	qv := reflect.ValueOf(q)
	var names []string
	for i := 0; i < qv.NumMethod(); i++ {
		if m := qv.Type().Method(i); m.Name != "WithTx" {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	require.Greater(t, len(names), 25, "queries found")

	var token, runID int64 = 1, 1
	fill := newFiller(&token, &runID)
	for round := 1; round <= 2; round++ {
		for _, name := range names {
			m := qv.MethodByName(name)
			args := []reflect.Value{reflect.ValueOf(ctx)}
			for j := 1; j < m.Type().NumIn(); j++ {
				args = append(args, fill.value(m.Type().In(j), ""))
			}
			out := m.Call(args)
			if errv := out[len(out)-1]; !errv.IsNil() {
				err := errv.Interface().(error)
				var me *mysql.MySQLError
				if name == "ServerGalera" && errors.As(err, &me) && me.Number == 1193 {
					continue // MySQL has no wsrep_on: that is the answer "not Galera"
				}
				require.ErrorIs(t, err, sql.ErrNoRows, "round %d: %s", round, name)
			}
			warnings(name)
			// Keep the token and run id of the rows the statements made.
			if res, ok := out[0].Interface().(sql.Result); ok && len(out) == 2 {
				if id, err := res.LastInsertId(); err == nil && id > 0 {
					switch {
					case strings.HasPrefix(name, "Run"):
						runID = id
					default:
						token = id
					}
				}
			}
		}
		// The multi-row insert, with a key repeated inside the batch and one
		// already in the table.
		runs := []driver.NewRun{
			{Job: "j", Queue: "q", Args: []byte("{}"), MaxAttempts: 1, UniqueKey: "dup"},
			{Job: "j", Queue: "q", Args: []byte("{}"), MaxAttempts: 1, UniqueKey: "dup"},
			{Job: "j", Queue: "q", Args: []byte("{}"), MaxAttempts: 1, ScheduledAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
				Headers: driver.Headers{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		}
		_, err := conn.ExecContext(ctx, driver.InsertRunsSQL("lockgen_runs", len(runs)), driver.InsertRunsArgs(runs)...)
		require.NoError(t, err, "round %d: InsertRunsSQL", round)
		warnings("InsertRunsSQL")
	}
}

// filler makes an argument of each parameter type the queries take, with
// values that address the rows the statements themselves create.
type filler struct {
	token, runID *int64
}

func newFiller(token, runID *int64) filler { return filler{token: token, runID: runID} }

func (f filler) value(t reflect.Type, field string) reflect.Value {
	v := reflect.New(t).Elem()
	switch x := v.Addr().Interface().(type) {
	case *string:
		*x = map[string]string{"Queue": "q", "Job": "j", "Args": "{}", "Worker": "w"}[field]
		if *x == "" {
			*x = "warn_check"
		}
	case *int64:
		switch field {
		case "", "ID":
			*x = *f.runID
		case "Token":
			*x = *f.token
		case "Claim":
			*x = 1
		default: // durations in µs, attempts, priorities
			*x = 1_000_000
		}
	case *int32:
		*x = 10
	case *any: // SessionGetLock's timeout
		*x = 0
	case *time.Time:
		*x = time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	case *sql.NullTime:
		*x = sql.NullTime{Time: time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC), Valid: true}
	case *sql.NullString:
		*x = sql.NullString{String: "warn_check", Valid: true}
	case *[]string:
		*x = []string{"warn_check"}
	case *[]int64:
		*x = []int64{*f.runID}
	case *[]sql.NullString:
		*x = []sql.NullString{{String: "warn_check:1", Valid: true}}
	case *driver.Headers:
		*x = driver.Headers{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	default:
		if t.Kind() != reflect.Struct {
			panic("TestNoStatementWarns: no value for parameter type " + t.String())
		}
		for i := 0; i < t.NumField(); i++ {
			v.Field(i).Set(f.value(t.Field(i).Type, t.Field(i).Name))
		}
	}
	return v
}
