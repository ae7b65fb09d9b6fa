package driver

import (
	"context"
	"database/sql"
	"strings"
)

// DeleteKeys deletes, in the caller's transaction on conn, the rows of
// lock name in table whose keys are listed (rows the transaction locked
// already, as LeasePrunable locks them), and returns how many it deleted.
//
// Each row is found by its whole primary key: the keys are a derived table
// joined to table (STRAIGHT_JOIN, eq_ref on the primary key). A DELETE
// with `lock_key IN (…)` was planned as a scan of the whole table by both
// servers on a small table (MySQL even with FORCE INDEX (PRIMARY), its
// statistics saying a few rows), and then waited, until the lock wait
// timeout, for any row another transaction held, such as a row-strategy
// holding of another lock: the prune failed with 1205 for as long as that
// holding lasted.
func DeleteKeys(ctx context.Context, conn *sql.Conn, table, name string, keys []string) (int64, error) {
	return deleteByKey(ctx, conn, table, name, keys, nil)
}

// DeleteFreeSessionMarks is DeleteKeys for rows marked by session holdings
// (the far-future expiry): each is deleted only if it still shows the mark
// and IS_FREE_LOCK of lockNames[i], the GET_LOCK name session holders use
// for keys[i], is 1 when the DELETE reads it, under the row's lock.
func DeleteFreeSessionMarks(ctx context.Context, conn *sql.Conn, table, name string, keys, lockNames []string) (int64, error) {
	return deleteByKey(ctx, conn, table, name, keys, lockNames)
}

func deleteByKey(ctx context.Context, conn *sql.Conn, table, name string, keys, lockNames []string) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	var q strings.Builder
	args := make([]any, 0, 2*len(keys)+1)
	q.WriteString("DELETE t FROM (")
	for i, k := range keys {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		if lockNames == nil {
			q.WriteString("SELECT ? AS k")
			args = append(args, k)
		} else {
			q.WriteString("SELECT ? AS k, ? AS n")
			args = append(args, k, lockNames[i])
		}
	}
	q.WriteString(") d STRAIGHT_JOIN " + table + " t ON t.name = ? AND t.lock_key = d.k")
	args = append(args, name)
	if lockNames != nil {
		q.WriteString(" WHERE t.expires_at = '9999-12-31 23:59:59' AND IS_FREE_LOCK(d.n) = 1")
	}
	res, err := conn.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
