// Package servererr names the MariaDB and MySQL server errors that lockgen's
// runtime and jobs branch on, in one place, and how retried failures are
// logged.
package servererr

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// The server errors lockgen branches on. MariaDB and
// MySQL share the numbers except where noted; docs/decisions.md ("What
// differs between MariaDB and MySQL") lists every difference lockgen
// handles.
const (
	DuplicateKey    = 1062 // ER_DUP_ENTRY
	UnknownVariable = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE: wsrep_on on MySQL
	LockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT; also MariaDB's answer to NOWAIT
	Deadlock        = 1213 // ER_LOCK_DEADLOCK: the transaction was rolled back
	MySQLNowaitBusy = 3572 // ER_LOCK_NOWAIT: MySQL's answer to NOWAIT
	UnsupportedPS   = 1295 // ER_UNSUPPORTED_PS: a statement the server cannot prepare
	TooManyPrepared = 1461 // ER_MAX_PREPARED_STMT_COUNT_REACHED
	BigintRange     = 1690 // ER_DATA_OUT_OF_RANGE: the not-acquired branch of driver.SessionPin's one-statement acquire and release
	// Group Replication in multi-primary mode certifies each transaction
	// against the other members' and rolls back the loser: with 3101, or
	// with 1180 naming the storage engine's deadlock (error 149), both
	// seen on MySQL 9.7 when members took the same lock row at once.
	CertificationRollback = 3101 // ER_TRANSACTION_ROLLBACK_DURING_COMMIT: "Plugin instructed the server to rollback the current transaction"
	ErrorDuringCommit     = 1180 // ER_ERROR_DURING_COMMIT: "Got error %d - '%s' during COMMIT"

	// Refusals: the server turned the connection or the statement away for
	// a reason that says nothing about the statement itself.
	TooManyConnections     = 1040 // ER_CON_COUNT_ERROR
	AccessDenied           = 1045 // ER_ACCESS_DENIED_ERROR: e.g. a password rotated under a running process
	ServerShutdown         = 1053 // ER_SERVER_SHUTDOWN
	HostBlocked            = 1129 // ER_HOST_IS_BLOCKED
	TooManyUserConnections = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	UserLimitReached       = 1226 // ER_USER_LIMIT_REACHED: max_user_connections and other resource limits
	ReadOnly               = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only, e.g. a demoted primary
	ConnectionKilled       = 1927 // ER_CONNECTION_KILLED (MariaDB)
	TableAccessDenied      = 1142 // ER_TABLEACCESS_DENIED_ERROR
	ReadOnlyTransaction    = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	ReadOnlyMode           = 1836 // ER_READ_ONLY_MODE
	// NotPrimaryNode is Galera's answer on a node outside the primary
	// component (isolated from its peers, or joining): "WSREP has not yet
	// prepared node for application use" (ER_UNKNOWN_COM_ERROR's number).
	NotPrimaryNode = 1047
	// ReplicationHookFailed is Group Replication's answer to a commit on
	// a member that is leaving or has left the group (ER_RUN_HOOK_ERROR,
	// "Error on observer while running replication hook 'before_commit'"):
	// the transaction is rolled back.
	ReplicationHookFailed = 3100
	// ServerOfflineMode is the answer of a server in offline_mode to a
	// user without CONNECTION_ADMIN: a Group Replication member that left
	// its group with group_replication_exit_state_action OFFLINE_MODE
	// (MySQL 9's default).
	ServerOfflineMode = 3032
)

func number(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return 0, false
	}
	return me.Number, true
}

func is(err error, numbers ...uint16) bool {
	n, ok := number(err)
	if !ok {
		return false
	}
	for _, want := range numbers {
		if n == want {
			return true
		}
	}
	return false
}

// IsTransient reports whether err is a server error after which the same
// autocommit statement can be retried at once: a deadlock (1213, also
// Galera's answer to a write that lost certification), a lock wait timeout
// (1205), or Group Replication's certification rollback (3101, or 1180
// for the engine's deadlock, error 149, during COMMIT). Each rolls the
// statement back entirely. Another 1180 is not: its commit may have
// failed for a reason a retry does not cure.
func IsTransient(err error) bool {
	if is(err, Deadlock, LockWaitTimeout, CertificationRollback) {
		return true
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == ErrorDuringCommit && strings.HasPrefix(me.Message, "Got error 149 ")
}

// IsRefusal reports a server error that refuses the connection or the
// statement for a reason that says nothing about the statement: too many
// connections, a user's resource limit, access denied after a password
// rotation, a blocked host, a read-only (demoted) server, a shutdown or a
// killed connection, a Galera node outside the primary component (1047),
// a Group Replication member out of its group (3100, or 3032 when it went
// into offline mode). Like a lost
// connection, it may last for minutes and then pass; the statement should
// be retried later, not given up on.
func IsRefusal(err error) bool {
	return is(err, TooManyConnections, AccessDenied, ServerShutdown, HostBlocked,
		TooManyUserConnections, UserLimitReached, ReadOnly, ConnectionKilled, NotPrimaryNode, ReplicationHookFailed,
		ServerOfflineMode)
}

// IsNotWritable reports an error that says the connection's server does
// not take writes now: read-only (1290, 1836, 1792: a replica, or a
// primary that was demoted), a Galera node outside the primary component
// (1047) or a Group Replication member out of its group (3100, 3032).
func IsNotWritable(err error) bool {
	return is(err, ReadOnly, ReadOnlyMode, ReadOnlyTransaction, NotPrimaryNode, ReplicationHookFailed, ServerOfflineMode)
}

// IsTableAccessDenied reports a statement refused for want of a privilege
// on a table (1142).
func IsTableAccessDenied(err error) bool { return is(err, TableAccessDenied) }

// IsLockWaitFailure reports a row lock that was not granted in time: a lock
// wait timeout (1205, which is also MariaDB's answer to NOWAIT) or MySQL's
// NOWAIT (3572).
func IsLockWaitFailure(err error) bool {
	return is(err, LockWaitTimeout, MySQLNowaitBusy)
}

// IsNotAcquiredBranch reports error 1690, which the one-statement session
// acquire and release (driver.SessionPin.BoundGetLock, ReleaseClose) raise
// on purpose when GET_LOCK or RELEASE_LOCK did not answer 1.
func IsNotAcquiredBranch(err error) bool { return is(err, BigintRange) }

// IsDeadlock reports InnoDB's deadlock error, after which the server has
// rolled back the whole transaction.
func IsDeadlock(err error) bool { return is(err, Deadlock) }

// IsUnknownVariable reports a system variable the server does not have.
func IsUnknownVariable(err error) bool { return is(err, UnknownVariable) }

// IsNotPreparable reports a prepared statement the server will not keep:
// too many prepared statements (1461) or one it cannot prepare (1295).
func IsNotPreparable(err error) bool { return is(err, TooManyPrepared, UnsupportedPS) }

// IsDuplicateKey reports a unique key violation.
func IsDuplicateKey(err error) bool { return is(err, DuplicateKey) }

// TransientTries is how many deadlocks or lock wait timeouts in a row a
// loop's retried statement may hit before they are logged as a warning.
const TransientTries = 5

// WarnUnlessTransient logs a failed statement that its loop retries, the
// failures-th failure in a row: at Debug when the server rolled it back for
// a deadlock or a lock wait (IsTransient: normal under contention between
// workers, and the retry usually succeeds) fewer than TransientTries times
// in a row, at Warn otherwise (any other error, or retries that keep
// failing). A statement that is not retried passes 1.
func WarnUnlessTransient(log *slog.Logger, msg string, err error, failures int, args ...any) {
	level := slog.LevelWarn
	if IsTransient(err) && failures < TransientTries {
		level = slog.LevelDebug
	}
	if failures > 1 {
		args = append(args, "failures_in_a_row", failures)
	}
	log.Log(context.Background(), level, msg, append(args, "error", err)...)
}
