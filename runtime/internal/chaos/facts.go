package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/chaos/worker/chaosgen"
)

// dbNow reads the database clock (UTC).
func (c *Controller) dbNow(ctx context.Context) time.Time {
	var t time.Time
	for i := 0; i < 100; i++ {
		if err := c.admin.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&t); err == nil {
			return t
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Now().UTC()
}

// lateOutcomeGrace is how long quiet waits after a run was orphaned for
// the late outcome of its last attempt: a worker whose connections a
// fault left hanging (a blackhole near the end of the window) gets its
// pool back after the driver's readTimeout (10 s here) and records the
// outcome then; the runtime promises that it is recorded, not when.
const lateOutcomeGrace = 25 * time.Second

// quiet waits, with every fault healed, until no run but the ticks after
// the window is available or running, no run was orphaned within
// lateOutcomeGrace, and every tick of the window has completed, for at
// most a minute.
func (c *Controller) quiet(ctx context.Context, from, to time.Time) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var open, ticks int
		err := c.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+database+".chaos_runs WHERE job NOT IN ('tick', 'retained') AND "+
			"(state IN ('available', 'running') OR (state = 'orphaned' AND finished_at > UTC_TIMESTAMP(6) - INTERVAL ? SECOND))",
			int(lateOutcomeGrace/time.Second)).Scan(&open)
		if err == nil {
			err = c.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+database+".chaos_runs WHERE job = 'tick' AND state = 'completed' AND scheduled_at > ? AND scheduled_at < ?", from, to).Scan(&ticks)
		}
		if err == nil && open == 0 && ticks >= int(to.Truncate(time.Second).Sub(from.Truncate(time.Second))/time.Second)-1 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readFacts reads the guarded writes and the runs.
func (c *Controller) readFacts(ctx context.Context, f *Facts) error {
	var err error
	if f.Guarded, err = c.tokens(ctx, "chaos_guarded_writes"); err != nil {
		return err
	}
	if f.RowWrites, err = c.tokens(ctx, "chaos_row_writes"); err != nil {
		return err
	}
	rows, err := c.admin.QueryContext(ctx, "SELECT id, job, state, scheduled_at FROM "+database+".chaos_runs ORDER BY id")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r RunRow
		var tick sql.NullTime
		if err := rows.Scan(&r.ID, &r.Job, &r.State, &tick); err != nil {
			return err
		}
		r.Tick = tick.Time
		f.Runs = append(f.Runs, r)
	}
	return rows.Err()
}

// tokens reads the tokens of a table of writes, in the order of its ids.
func (c *Controller) tokens(ctx context.Context, table string) ([]int64, error) {
	rows, err := c.admin.QueryContext(ctx, "SELECT token FROM "+database+"."+table+" ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var tokens []int64
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			return nil, err
		}
		tokens = append(tokens, tok)
	}
	return tokens, rows.Err()
}

// scanLogs finds panics, fatal errors and data races in the workers' logs.
func (c *Controller) scanLogs() []string {
	logs, _ := filepath.Glob(filepath.Join(c.cfg.Dir, "p*-i*.log"))
	var found []string
	for _, name := range logs {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.Contains(line, "WARNING: DATA RACE") {
				found = append(found, fmt.Sprintf("%s: %s", filepath.Base(name), line))
				break
			}
		}
		_ = f.Close()
	}
	return found
}

// locked returns the unfinished runs that an open transaction holds
// locked: read once every worker is dead, these are held by sessions whose
// clients are gone.
func (c *Controller) locked(ctx context.Context) map[int64]bool {
	tx, err := c.admin.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil
	}
	defer func() { _ = tx.Rollback() }()
	ids := func(q string) map[int64]bool {
		m := map[int64]bool{}
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return m
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if rows.Scan(&id) == nil {
				m[id] = true
			}
		}
		return m
	}
	const unfinished = "SELECT id FROM " + database + ".chaos_runs WHERE state IN ('available', 'running')"
	all := ids(unfinished)
	for id := range ids(unfinished + " FOR UPDATE SKIP LOCKED") {
		delete(all, id)
	}
	return all
}

// liveness checks, once every worker is dead, that every lock (and each
// of the keyed lock's keys) can be taken within its TTL plus a margin, or
// within StrandBound plus the margin of the last partition's end: a
// session whose client a partition cut off may hold a lock that long.
func (c *Controller) liveness(ctx context.Context, adminCfg *mysql.Config) []string {
	dead := time.Now()
	c.mu.Lock()
	var stranded time.Time
	if c.lastPartition != 0 {
		stranded = dead.Add(time.Duration(c.lastPartition - Mono())).Add(c.cfg.StrandBound)
	}
	c.mu.Unlock()
	cfg := adminCfg.Clone()
	cfg.User, cfg.Passwd, cfg.DBName = appUser, appPass, database
	cfg.ParseTime, cfg.InterpolateParams, cfg.Loc = true, true, time.UTC
	connector, err := c.connector(cfg)
	if err != nil {
		return []string{err.Error()}
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	locks, err := chaosgen.New(db, runtime.WithOwner("chaos-liveness"))
	if err != nil {
		return []string{err.Error()}
	}
	type probe struct {
		name string
		ttl  time.Duration
		try  func(context.Context) (*runtime.Lease, error)
	}
	probes := []probe{
		{"leader", 1500 * time.Millisecond, locks.TryLeaderLock},
		{"poll", time.Second, locks.TryPollLock},
		{"server", time.Second, locks.TryServerLock},
		{"guarded", time.Second, locks.TryGuardedLock},
	}
	if len(c.nodes) == 0 { // a cluster refuses them: the workers left them out
		probes = append(probes, probe{"session", time.Second, locks.TrySessionLock}, probe{"row", time.Second, locks.TryRowLock})
	}
	for n := range int64(100) {
		probes = append(probes, probe{fmt.Sprintf("keyed[%d]", n), time.Second, func(ctx context.Context) (*runtime.Lease, error) {
			return locks.TryKeyedLock(ctx, n)
		}})
	}
	const margin = 2 * time.Second
	var mu sync.Mutex
	var stuck []string
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := dead.Add(p.ttl + margin)
			if stranded.Add(margin).After(deadline) {
				deadline = stranded.Add(margin)
			}
			var last error
			for time.Now().Before(deadline) {
				lease, err := p.try(ctx)
				if err == nil {
					_ = lease.Release(ctx)
					return
				}
				last = err
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			stuck = append(stuck, fmt.Sprintf("%s could not be taken within %s of every worker's death (nor %s after the last partition): %v", p.name, p.ttl+margin, c.cfg.StrandBound+margin, last))
		}()
	}
	wg.Wait()
	sort.Strings(stuck)
	return stuck
}
