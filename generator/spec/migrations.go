package spec

import (
	"fmt"
	"path"
)

// The migrations lockgen writes: number 1 creates the lock table, number 2
// the runs table, number 3 the queues table, number 4 adds the runs'
// history column and number 5 their headers column (2 to 5 only with
// jobs), and number 6 adds the lock table's session reservation columns
// (always), so adding jobs or a later table or column never rewrites a
// migration.
const (
	LocksMigration        = 1
	RunsMigration         = 2
	QueuesMigration       = 3
	HistoryMigration      = 4
	HeadersMigration      = 5
	LocksSessionMigration = 6
)

// Directions of a golang-migrate file; a goose file holds both.
const (
	Up   = "up"
	Down = "down"
)

// File is the path, relative to the spec's directory, of migration number n
// that creates table in m's format and directory: goose's single
// "00002_app_runs.sql", or golang-migrate's "0002_app_runs.up.sql" and
// ".down.sql" by direction.
func (m Migrations) File(n int, table, direction string) string {
	if m.Format == FormatGoose {
		return path.Join(m.Dir, fmt.Sprintf("%05d_%s.sql", n, table))
	}
	return path.Join(m.Dir, fmt.Sprintf("%04d_%s.%s.sql", n, table, direction))
}
