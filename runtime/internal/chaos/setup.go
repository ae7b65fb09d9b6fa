package chaos

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// maxUserConnections bounds each chaos user's sessions: a worker's pool
// (8) and guarded pool (2), and room for sessions a partition stranded.
const maxUserConnections = 30

//go:embed worker/migrations/*.up.sql
var migrations embed.FS

// build compiles the worker.
func (c *Controller) build(ctx context.Context) error {
	c.bin = filepath.Join(c.cfg.Dir, "worker")
	args := []string{"build", "-o", c.bin}
	if c.cfg.Race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/lockgen/lockgen/runtime/internal/chaos/worker")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = c.cfg.Out, c.cfg.Out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chaos: building the worker: %w", err)
	}
	return nil
}

// setup creates the database, its tables and the least-privilege user the
// workers log in as.
func (c *Controller) setup(ctx context.Context, adminCfg *mysql.Config) error {
	cfg := adminCfg.Clone()
	cfg.DBName = ""
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.MultiStatements = true
	connector, err := c.connector(cfg)
	if err != nil {
		return err
	}
	c.admin = sql.OpenDB(connector)
	stmts := []string{
		"DROP DATABASE IF EXISTS " + database,
		"CREATE DATABASE " + database,
		"USE " + database,
	}
	files, err := fs.Glob(migrations, "worker/migrations/*.up.sql")
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := migrations.ReadFile(f)
		if err != nil {
			return err
		}
		stmts = append(stmts, string(b))
	}
	stmts = append(stmts,
		`CREATE TABLE chaos_guarded_writes (
			id    BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
			token BIGINT      NOT NULL,
			proc  INT         NOT NULL,
			at    DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))`,
		`CREATE TABLE chaos_row_writes (
			id    BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
			token BIGINT      NOT NULL,
			proc  INT         NOT NULL,
			at    DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))`,
	)
	// Each worker logs in as its own user (a rotation locks out one
	// process), which may open at most maxUserConnections sessions: the
	// sessions a partition strands count until the keep-alive stand-in
	// closes them, and the servers are shared.
	users := []string{appUser}
	for i := range c.cfg.Procs {
		users = append(users, procUser(i))
	}
	for _, user := range users {
		for _, host := range userHosts {
			stmts = append(stmts,
				fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'", user, host, appPass),
				fmt.Sprintf("ALTER USER '%s'@'%s' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS %d", user, host, appPass, maxUserConnections))
			for _, t := range []string{"chaos_locks", "chaos_runs", "chaos_queues", "chaos_guarded_writes", "chaos_row_writes"} {
				stmts = append(stmts, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %s.%s TO '%s'@'%s'", database, t, user, host))
			}
			if c.kind == clusterGroupSingle || c.kind == clusterGroupMulti {
				// runtime.Failover reads the member's state there.
				stmts = append(stmts, fmt.Sprintf("GRANT SELECT ON performance_schema.replication_group_members TO '%s'@'%s'", user, host))
			}
		}
	}
	conn, err := c.admin.Conn(ctx)
	if err != nil {
		return fmt.Errorf("chaos: connecting as admin: %w", err)
	}
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("chaos: setup: %s: %w", strings.SplitN(s, "\n", 2)[0], err)
		}
	}
	return nil
}
