package runtime

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
// loop retries anyway is logged at Debug (three worker processes logged
// 0–4 WARN lines per run for them); any other failure stays a warning.
func TestWarnUnlessTransient(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, tc := range []struct {
		err   error
		level string
	}{
		{fmt.Errorf("complete: %w", &mysql.MySQLError{Number: errDeadlock}), "level=DEBUG"},
		{&mysql.MySQLError{Number: errLockWaitTimeout}, "level=DEBUG"},
		{&mysql.MySQLError{Number: 1146}, "level=WARN"},
		{errors.New("connection refused"), "level=WARN"},
	} {
		buf.Reset()
		warnUnlessTransient(log, "recording failed", tc.err, "runs", 3)
		assert.Contains(t, buf.String(), tc.level, tc.err.Error())
		assert.Contains(t, buf.String(), "runs=3")
	}
}
