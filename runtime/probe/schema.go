package probe

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Index is one index of a table, as information_schema.STATISTICS shows it.
type Index struct {
	Name    string
	Unique  bool
	Columns []string
}

// String is the index as a migration declares it: "UNIQUE KEY t_dedupe (job,
// dedupe)".
func (i Index) String() string {
	kind := "KEY "
	switch {
	case i.Name == "PRIMARY":
		return "PRIMARY KEY (" + strings.Join(i.Columns, ", ") + ")"
	case i.Unique:
		kind = "UNIQUE KEY "
	}
	return kind + i.Name + " (" + strings.Join(i.Columns, ", ") + ")"
}

// TableSchema is what lockgen's statements need of one of its tables: the
// columns they read and write, and the indexes their promises and plans
// rest on (the unique key that makes a tick one run, the claim and rescue
// ranges). It is what lockgen's migrations create; a table that lacks any
// of it makes statements fail ("Unknown column") or scan.
type TableSchema struct {
	Table   string
	Columns []string
	Indexes []Index
}

// LocksSchema is the lock table named table as the migration that creates
// it (templates/locks_create.sql.tmpl) declares it.
func LocksSchema(table string) TableSchema {
	return TableSchema{
		Table:   table,
		Columns: []string{"name", "lock_key", "owner", "token", "acquired_at", "expires_at", "holding"},
		Indexes: []Index{{Name: "PRIMARY", Unique: true, Columns: []string{"name", "lock_key"}}},
	}
}

// RunsSchema is the runs table named table as the migration that creates
// it (templates/runs_create.sql.tmpl) declares it; its indexes are named
// after it.
func RunsSchema(table string) TableSchema {
	return TableSchema{
		Table: table,
		Columns: []string{"id", "job", "queue", "state", "priority", "run_at", "scheduled_at", "args", "attempt",
			"max_attempts", "timeout_us", "claim", "worker", "deadline", "unique_key", "last_error", "created_at",
			"finished_at", "claim_ref", "dedupe"},
		Indexes: []Index{
			{Name: "PRIMARY", Unique: true, Columns: []string{"id"}},
			{Name: table + "_dedupe", Unique: true, Columns: []string{"job", "dedupe"}},
			{Name: table + "_claim", Columns: []string{"queue", "state", "priority", "run_at"}},
			{Name: table + "_state", Columns: []string{"state", "deadline", "job", "finished_at"}},
		},
	}
}

// RunsHistorySchema is what the migration that adds the runs' history
// column (templates/history_add.sql.tmpl) adds to the runs table named
// table: checked apart from RunsSchema, so that a database made by the
// earlier migrations is told to apply that one.
func RunsHistorySchema(table string) TableSchema {
	return TableSchema{Table: table, Columns: []string{"history"}}
}

// RunsHeadersSchema is what the migration that adds the runs' headers
// column (templates/headers_add.sql.tmpl) adds to the runs table named
// table, checked apart as RunsHistorySchema is.
func RunsHeadersSchema(table string) TableSchema {
	return TableSchema{Table: table, Columns: []string{"headers"}}
}

// LocksSessionSchema is what the migration that adds the lock table's
// session reservation (templates/locks_session_add.sql.tmpl) adds to the
// lock table named table, checked apart as RunsHistorySchema is: only
// the session and row strategies need it (a row takeover of a session
// holding's row reads it).
func LocksSessionSchema(table string) TableSchema {
	return TableSchema{Table: table, Columns: []string{"session_witness", "session_offset"}}
}

// ColumnsProblem is the message for a table that lacks what a later
// migration adds to it (lacks, as Lacks words it): apply that migration.
func ColumnsProblem(table, database string, lacks []string, migration string) string {
	return fmt.Sprintf("table %s in database %q lacks %s, which %s adds: apply it with your migration tool "+
		"(lockgen's statements fail with \"Unknown column\" until then)", table, database, strings.Join(lacks, ", "), migration)
}

// QueuesSchema is the queues table named table (queue pauses) as the
// migration that creates it (templates/queues_create.sql.tmpl) declares it.
func QueuesSchema(table string) TableSchema {
	return TableSchema{
		Table:   table,
		Columns: []string{"queue", "paused", "paused_at", "updated_at"},
		Indexes: []Index{{Name: "PRIMARY", Unique: true, Columns: []string{"queue"}}},
	}
}

// Lacks returns what the table of want lacks in the probed database, one
// phrase each ("column claim_ref", "index KEY t_claim (queue, state,
// priority, run_at)"): a column it does not have, an index it does not
// have or has on other columns or without its uniqueness. It is empty when
// the table has everything (extra columns and indexes are fine), and when
// the table is missing or was not asked about (see MissingTables).
func (r *Report) Lacks(want TableSchema) []string {
	if !r.Tables[want.Table] {
		return nil
	}
	var lacks []string
	for _, c := range want.Columns {
		if !slices.Contains(r.Columns[want.Table], c) {
			lacks = append(lacks, "column "+c)
		}
	}
	for _, w := range want.Indexes {
		i := slices.IndexFunc(r.Indexes[want.Table], func(i Index) bool { return strings.EqualFold(i.Name, w.Name) })
		switch {
		case i < 0:
			lacks = append(lacks, "index "+w.String())
		case !slices.Equal(r.Indexes[want.Table][i].Columns, w.Columns) || r.Indexes[want.Table][i].Unique != w.Unique:
			lacks = append(lacks, fmt.Sprintf("index %s (it has %s)", w, r.Indexes[want.Table][i]))
		}
	}
	return lacks
}

// readTables fills Tables, Columns and Indexes for tables: two statements
// on information_schema (a table the user has no privilege on is not
// shown there, so it reads as missing).
func (r *Report) readTables(ctx context.Context, db Querier, tables []string) error {
	r.Columns, r.Indexes = map[string][]string{}, map[string][]Index{}
	args := make([]any, len(tables))
	for i, t := range tables {
		r.Tables[t] = false
		args[i] = t
	}
	in := "(?" + strings.Repeat(", ?", len(tables)-1) + ")"
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN "+in+" ORDER BY TABLE_NAME, ORDINAL_POSITION", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			return err
		}
		r.Tables[table] = true
		r.Columns[table] = append(r.Columns[table], strings.ToLower(column))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.QueryContext(ctx, "SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN "+in+" ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var table, name, column string
		var nonUnique int
		if err := rows.Scan(&table, &name, &nonUnique, &column); err != nil {
			return err
		}
		idx := r.Indexes[table]
		if n := len(idx); n > 0 && idx[n-1].Name == name {
			idx[n-1].Columns = append(idx[n-1].Columns, strings.ToLower(column))
			continue
		}
		r.Indexes[table] = append(idx, Index{Name: name, Unique: nonUnique == 0, Columns: []string{strings.ToLower(column)}})
	}
	return rows.Err()
}

// SchemaProblem says, in one sentence, that table in database lacks what
// Lacks found and what to do: migration names the migration that creates
// the table ("migration db/0002_app_runs.up.sql (relative to
// lockgen.yaml)"). The table exists, so applying that migration again
// changes nothing (CREATE TABLE IF NOT EXISTS): the table was created by
// another version of lockgen's migrations or altered since, and must be
// made to match.
func SchemaProblem(table, database string, lacks []string, migration string) string {
	return fmt.Sprintf("table %s in database %q does not match %s: it lacks %s; lockgen's statements would fail on it "+
		"(\"Unknown column\") or lose their guarantees. Make the table match the CREATE TABLE of that migration: ALTER it, "+
		"or, if it holds nothing you need, apply the migration's down and then its up", table, database, migration, strings.Join(lacks, ", "))
}
