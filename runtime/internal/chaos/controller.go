package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/chaos/worker/chaosgen"
	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
)

//go:embed worker/migrations/*.up.sql
var migrations embed.FS

// Config is one chaos run.
type Config struct {
	// AdminDSN reaches the server as a user that may create a database
	// and a user, and (for FaultRestart) shut the server down.
	AdminDSN string
	// Procs is the number of worker processes; default 5.
	Procs int
	// Duration is how long faults are injected; the run takes about 30 s
	// more (start, quiet phase, checks).
	Duration time.Duration
	// Seed draws the fault plan.
	Seed uint64
	// RestartCmd, when set, is a shell command that starts the server
	// again after the controller shut it down (it must wait until the
	// server answers); the plan then restarts the server once.
	RestartCmd string
	// Race builds the worker with the race detector.
	Race bool
	// Dir keeps the worker binary, the histories and the logs.
	Dir string
	// Out receives the progress and the report.
	Out io.Writer
}

// Database and app user of a chaos run.
const (
	database = "lockgen_chaos"
	appUser  = "lockgen_chaos"
	appPass  = "chaos-app-password"
)

// proc is one worker slot: its proxy, and the process of its current
// incarnation.
type proc struct {
	id    int
	proxy *tcpproxy.Proxy
	dsn   string
	tz    string
	mu    sync.Mutex
	inc   int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// exited is closed when the current incarnation's process exits.
	exited chan struct{}
	// killed says the controller killed the current incarnation.
	killed bool
}

// Controller runs the workers and the faults.
type Controller struct {
	cfg    Config
	admin  *sql.DB
	bin    string
	hist   string
	procs  []*proc
	start  int64
	faults map[string]int
	mu     sync.Mutex
	// crashes are worker exits the controller did not cause.
	crashes []string
}

// Run performs a chaos run and returns its report. The error is about the
// harness itself (a build or setup failure), not about violations.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Procs == 0 {
		cfg.Procs = 5
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	c := &Controller{cfg: cfg, faults: map[string]int{}, hist: filepath.Join(cfg.Dir, "history")}
	if err := os.MkdirAll(c.hist, 0o755); err != nil {
		return Report{}, err
	}
	if err := c.build(ctx); err != nil {
		return Report{}, err
	}
	adminCfg, err := mysql.ParseDSN(cfg.AdminDSN)
	if err != nil {
		return Report{}, fmt.Errorf("chaos: admin DSN: %w", err)
	}
	if err := c.setup(ctx, adminCfg); err != nil {
		return Report{}, err
	}
	defer c.admin.Close()
	for i := range cfg.Procs {
		p, err := c.newProc(i, adminCfg)
		if err != nil {
			return Report{}, err
		}
		defer p.proxy.Close()
		c.procs = append(c.procs, p)
	}
	c.start = Mono()
	for _, p := range c.procs {
		if err := c.spawn(p); err != nil {
			return Report{}, err
		}
	}
	defer c.killAll()
	time.Sleep(3 * time.Second)
	var facts Facts
	facts.TickFrom = c.dbNow(ctx)

	plan := Plan(cfg.Seed, cfg.Procs, cfg.Duration, cfg.RestartCmd != "")
	fmt.Fprintf(cfg.Out, "chaos: seed %d, %d workers, %s of faults, %d faults planned\n", cfg.Seed, cfg.Procs, cfg.Duration, len(plan))
	began := time.Now()
	var wg sync.WaitGroup
	for _, f := range plan {
		if d := time.Until(began.Add(f.At)); d > 0 {
			time.Sleep(d)
		}
		fmt.Fprintf(cfg.Out, "chaos: %s\n", f)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.inject(ctx, f, adminCfg); err != nil {
				fmt.Fprintf(cfg.Out, "chaos: %s: %v\n", f.Kind, err)
				c.count("failed " + f.Kind)
			}
		}()
	}
	time.Sleep(time.Until(began.Add(cfg.Duration)))
	wg.Wait()
	for _, p := range c.procs {
		p.proxy.Restore()
		c.command(p, "quiet on")
	}
	facts.TickTo = c.dbNow(ctx)
	fmt.Fprintf(cfg.Out, "chaos: faults over after %s; waiting for the jobs\n", time.Since(began).Round(time.Second))
	c.quiet(ctx, facts.TickFrom, facts.TickTo)
	c.killAll()
	facts.Stuck = c.liveness(ctx, adminCfg)

	events, err := ReadHistory(c.hist)
	if err != nil {
		return Report{}, err
	}
	if err := c.readFacts(ctx, &facts); err != nil {
		return Report{}, err
	}
	facts.TickJob, facts.TickEvery, facts.Singletons = "tick", time.Second, []string{"single"}
	// The session lock's holder checks its connection every 333 ms, and
	// its local deadline is its TTL (1 s) after the last good check.
	facts.Windows = map[string]time.Duration{"session": time.Second, "row": -1}
	facts.Crashes = append(c.crashes, c.scanLogs()...)
	r := Check(events, facts, c.start)
	for k, n := range c.faults {
		r.Counts["fault "+k] = n
	}
	return r, nil
}

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
	connector, err := mysql.NewConnector(cfg)
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
	// The user is created for localhost too: a server with anonymous
	// users (''@'localhost') would match a local connection to those
	// before a '%' account.
	for _, host := range []string{"%", "localhost", "127.0.0.1"} {
		stmts = append(stmts,
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'", appUser, host, appPass),
			fmt.Sprintf("ALTER USER '%s'@'%s' IDENTIFIED BY '%s'", appUser, host, appPass))
		for _, t := range []string{"chaos_locks", "chaos_runs", "chaos_guarded_writes", "chaos_row_writes"} {
			stmts = append(stmts, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %s.%s TO '%s'@'%s'", database, t, appUser, host))
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

// settings are what differs between the workers: the session time zone
// and sql_mode in the DSN, and the process's local time zone (TZ). The
// driver's loc is UTC for all: the runtime refuses any other (a node
// whose loc differed would store other DATETIME values for the same
// instant).
var settings = []struct{ zone, sqlMode, tz string }{
	{"'+00:00'", "", "UTC"},
	{"SYSTEM", "", "America/New_York"},
	{"'+05:30'", "", "Asia/Kolkata"},
	{"'-05:00'", "'NO_ENGINE_SUBSTITUTION'", "Pacific/Chatham"},
	{"'+13:00'", "", "Europe/Berlin"},
}

func (c *Controller) newProc(i int, adminCfg *mysql.Config) (*proc, error) {
	proxy, err := tcpproxy.Start(adminCfg.Addr)
	if err != nil {
		return nil, err
	}
	s := settings[i%len(settings)]
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = appUser, appPass, "tcp", proxy.Addr(), database
	cfg.ParseTime, cfg.InterpolateParams = true, true
	cfg.Timeout = time.Second
	cfg.Loc = time.UTC
	cfg.Params = map[string]string{"time_zone": s.zone}
	if s.sqlMode != "" {
		cfg.Params["sql_mode"] = s.sqlMode
	}
	return &proc{id: i, proxy: proxy, dsn: cfg.FormatDSN(), tz: s.tz}, nil
}

// spawn starts p's next incarnation.
func (c *Controller) spawn(p *proc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inc++
	log, err := os.Create(filepath.Join(c.cfg.Dir, fmt.Sprintf("p%d-i%d.log", p.id, p.inc)))
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "-proc", fmt.Sprint(p.id), "-inc", fmt.Sprint(p.inc), "-dsn", p.dsn, "-history", c.hist)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "TZ="+p.tz)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: starting worker %d: %w", p.id, err)
	}
	p.cmd, p.stdin, p.killed = cmd, stdin, false
	exited := make(chan struct{})
	p.exited = exited
	inc := p.inc
	go func() {
		err := cmd.Wait()
		_ = log.Close()
		p.mu.Lock()
		killed := p.killed
		p.mu.Unlock()
		if !killed {
			c.mu.Lock()
			c.crashes = append(c.crashes, fmt.Sprintf("p%d.%d exited by itself: %v", p.id, inc, err))
			c.mu.Unlock()
		}
		close(exited)
	}()
	return nil
}

// kill SIGKILLs p's current incarnation and waits for it to exit.
func (c *Controller) kill(p *proc) {
	p.mu.Lock()
	p.killed = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-exited
}

func (c *Controller) killAll() {
	for _, p := range c.procs {
		c.kill(p)
	}
}

func (c *Controller) signal(p *proc, sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.cmd.Process.Signal(sig)
}

func (c *Controller) command(p *proc, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.stdin, line+"\n")
}

func (c *Controller) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[kind]++
}

// inject applies f, waits its duration and heals it.
func (c *Controller) inject(ctx context.Context, f Fault, adminCfg *mysql.Config) error {
	c.count(f.Kind)
	if f.Kind == FaultRestart {
		return c.restart(ctx, f.Dur, adminCfg)
	}
	p := c.procs[f.Proc]
	switch f.Kind {
	case FaultKill:
		c.kill(p)
		time.Sleep(f.Dur)
		return c.spawn(p)
	case FaultPause:
		c.signal(p, syscall.SIGSTOP)
		time.Sleep(f.Dur)
		c.signal(p, syscall.SIGCONT)
	case FaultCut:
		p.proxy.Cut()
		time.Sleep(f.Dur)
		p.proxy.Restore()
	case FaultBlackhole:
		p.proxy.Blackhole()
		time.Sleep(f.Dur)
		p.proxy.Restore()
	case FaultDelay:
		p.proxy.Delay(f.Arg)
		time.Sleep(f.Dur)
		p.proxy.Restore()
	case FaultClock:
		c.command(p, fmt.Sprintf("clock %s", f.Arg))
		time.Sleep(f.Dur)
		c.command(p, fmt.Sprintf("clock %s", -f.Arg))
	case FaultPool:
		c.command(p, fmt.Sprintf("pool %d", f.Arg))
		time.Sleep(f.Dur)
		c.command(p, "pool 8")
	}
	return nil
}

// restart shuts the server down, waits down for a while and starts it
// with the restart command.
func (c *Controller) restart(ctx context.Context, down time.Duration, adminCfg *mysql.Config) error {
	if _, err := c.admin.ExecContext(ctx, "SHUTDOWN"); err != nil {
		return fmt.Errorf("SHUTDOWN: %w", err)
	}
	for i := 0; i < 600; i++ {
		conn, err := net.DialTimeout("tcp", adminCfg.Addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		_ = conn.Close()
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(down)
	// The server closes its port before its process has exited; a start
	// in between finds it "already running". Try again a few times.
	var err error
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(2 * time.Second)
		}
		cmd := exec.CommandContext(ctx, "bash", "-c", c.cfg.RestartCmd)
		cmd.Stdout, cmd.Stderr = c.cfg.Out, c.cfg.Out
		// The repository's ensure scripts leave a server named by these alone.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LOCKGEN_TEST_DSN=") && !strings.HasPrefix(kv, "LOCKGEN_TEST_MYSQL_DSN=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		if err = cmd.Run(); err == nil {
			return nil
		}
	}
	return fmt.Errorf("restart command %q: %w", c.cfg.RestartCmd, err)
}

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

// quiet waits, with every fault healed, until every run but the ticks
// after the window has finished and every tick of the window has
// completed, for at most a minute.
func (c *Controller) quiet(ctx context.Context, from, to time.Time) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var open, ticks int
		err := c.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+database+".chaos_runs WHERE job <> 'tick' AND state <> 'completed'").Scan(&open)
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

// liveness checks, once every worker is dead, that every lock (and each
// of the keyed lock's keys) can be taken within its TTL plus a margin.
func (c *Controller) liveness(ctx context.Context, adminCfg *mysql.Config) []string {
	dead := time.Now()
	cfg := adminCfg.Clone()
	cfg.User, cfg.Passwd, cfg.DBName = appUser, appPass, database
	cfg.ParseTime, cfg.InterpolateParams, cfg.Loc = true, true, time.UTC
	connector, err := mysql.NewConnector(cfg)
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
		{"session", time.Second, locks.TrySessionLock},
		{"row", time.Second, locks.TryRowLock},
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
			stuck = append(stuck, fmt.Sprintf("%s could not be taken within %s of every worker's death: %v", p.name, p.ttl+margin, last))
		}()
	}
	wg.Wait()
	sort.Strings(stuck)
	return stuck
}
