package servererr

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
)

// TestWarnUnlessTransient: a deadlock or lock wait timeout that a worker
// loop retries is logged at Debug (three worker processes logged 0–4 WARN
// lines per run for them) until TransientTries of them come in a row, when
// the retries are taken as exhausted: then it is a warning; any other
// failure is a warning at once.
func TestWarnUnlessTransient(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	deadlock := fmt.Errorf("complete: %w", &mysql.MySQLError{Number: Deadlock})
	for _, tc := range []struct {
		err      error
		failures int
		level    string
	}{
		{deadlock, 1, "level=DEBUG"},
		{deadlock, TransientTries - 1, "level=DEBUG"},
		{deadlock, TransientTries, "level=WARN"},
		{&mysql.MySQLError{Number: LockWaitTimeout}, 1, "level=DEBUG"},
		{&mysql.MySQLError{Number: LockWaitTimeout}, TransientTries + 5, "level=WARN"},
		{&mysql.MySQLError{Number: 1146}, 1, "level=WARN"},
		{errors.New("connection refused"), 1, "level=WARN"},
	} {
		buf.Reset()
		WarnUnlessTransient(log, "recording failed", tc.err, tc.failures, "runs", 3)
		assert.Contains(t, buf.String(), tc.level, "%v, %d in a row", tc.err, tc.failures)
		assert.Contains(t, buf.String(), "runs=3")
		if tc.failures > 1 {
			assert.Contains(t, buf.String(), fmt.Sprintf("failures_in_a_row=%d", tc.failures))
		}
	}
}

// TestIsTransient: the errors after which the same autocommit statement is
// retried at once, with the texts the servers send; an error during COMMIT
// other than the engine's deadlock is not one of them.
func TestIsTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}, true},
		{&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"}, true},
		{&mysql.MySQLError{Number: 3101, Message: "Plugin instructed the server to rollback the current transaction."}, true},
		{fmt.Errorf("acquire: %w", &mysql.MySQLError{Number: 1180, Message: "Got error 149 - 'Lock deadlock; Retry transaction' during COMMIT"}), true},
		{&mysql.MySQLError{Number: 1180, Message: "Got error 28 - 'No space left on device' during COMMIT"}, false},
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{errors.New("driver: bad connection"), false},
	} {
		assert.Equal(t, tc.want, IsTransient(tc.err), "%v", tc.err)
	}
}

// TestSessionBranches: the session acquire's not-acquired branch is error
// 1690 (its BIGINT overflow) and nothing else.
func TestSessionBranches(t *testing.T) {
	overflow := &mysql.MySQLError{Number: 1690, Message: "BIGINT value is out of range in '9223372036854775807 + cast(connection_id() > 0 as signed)'"}
	assert.True(t, IsNotAcquiredBranch(fmt.Errorf("acquire: %w", overflow)))
	assert.False(t, IsNotAcquiredBranch(&mysql.MySQLError{Number: 1242, Message: "Subquery returns more than 1 row"}))
	assert.False(t, IsNotAcquiredBranch(errors.New("driver: bad connection")))
}
