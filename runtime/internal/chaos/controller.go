package chaos

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime"
)

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
	// KeepAlive stands in for the server's TCP keep-alive: the workers'
	// sessions idle for this long are killed (their clients are gone: a
	// partition stranded them). Default DefaultKeepAlive.
	KeepAlive time.Duration
	// StrandBound is the longest a worker's transaction may stay open
	// (a claim or a row holding whose client a partition cut off) before
	// the run fails; the runtime's own bound on such sessions must be
	// below it. Default DefaultStrandBound.
	StrandBound time.Duration
	// Nodes, when set, are the admin DSNs of the nodes of a cluster
	// (AdminDSN is one of them): worker i connects to node i mod
	// len(Nodes), so writes are spread across the cluster; the workers
	// leave out what clusters refuse (the session and row strategies,
	// Guard), and the plan faults the nodes (PlanCluster) instead of
	// restarting the server.
	Nodes []string
	// NodeStartCmd is a shell command that starts the cluster's stopped
	// nodes again and waits until they are synced (FaultNodeKill).
	NodeStartCmd string
	// Out receives the progress and the report.
	Out io.Writer
}

// Defaults of Config.
const (
	DefaultKeepAlive   = 2 * time.Minute
	DefaultStrandBound = 30 * time.Second
)

// runLease is the workers' run lease (the worker's -lease default).
const runLease = 2 * time.Second

// Database and app user of a chaos run (the workers log in as
// procUser(slot); appUser is the liveness probe's).
const (
	database = "lockgen_chaos"
	appUser  = "lockgen_chaos"
	appPass  = "chaos-app-password"
)

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
	// spans are the faults applied so far; lastPartition is when the
	// latest partition healed (CLOCK_MONOTONIC).
	spans         []Span
	lastPartition int64
	// strands are the stranded transactions watchStrands saw.
	strands []string
	// nodes are the cluster's nodes (Config.Nodes), each with an admin
	// pool; none for one server. nodeMu runs node faults one at a time.
	nodes  []node
	nodeMu sync.Mutex
	// nodeFailed is set, under nodeMu, once a node fault failed: no
	// other is applied (see nodeFault).
	nodeFailed bool
	// kind is the cluster's kind (clusterGalera, clusterGroupSingle,
	// clusterGroupMulti); "" for one server.
	kind string
}

// The kinds of cluster the harness runs on.
const (
	clusterGalera      = "galera"
	clusterGroupSingle = "group-single"
	clusterGroupMulti  = "group-multi"
)

// singlePrimary says the cluster takes writes on one member only, which
// moves when it fails: clients find it through runtime.Failover.
func (c *Controller) singlePrimary() bool { return c.kind == clusterGroupSingle }

// connector returns a connector for cfg: on a single-primary group, one
// that opens each connection on the member that takes writes
// (runtime.Failover over every node, at cfg's user and database).
func (c *Controller) connector(cfg *mysql.Config) (driver.Connector, error) {
	if !c.singlePrimary() {
		return mysql.NewConnector(cfg)
	}
	var members []driver.Connector
	for _, n := range c.nodes {
		m := cfg.Clone()
		m.Addr = n.cfg.Addr
		mc, err := mysql.NewConnector(m)
		if err != nil {
			return nil, err
		}
		members = append(members, runtime.ConnectTimeout(mc, 2*time.Second))
	}
	return runtime.Failover(members...), nil
}

// clusterKind asks node 0 what cluster it belongs to.
func clusterKind(ctx context.Context, admin *sql.DB) (string, error) {
	var version string
	if err := admin.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", err
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return clusterGalera, nil
	}
	var single int
	if err := admin.QueryRowContext(ctx, "SELECT @@global.group_replication_single_primary_mode").Scan(&single); err != nil {
		return "", fmt.Errorf("chaos: a MySQL node without Group Replication: %w", err)
	}
	if single == 1 {
		return clusterGroupSingle, nil
	}
	return clusterGroupMulti, nil
}

// node is one node of a cluster.
type node struct {
	cfg   *mysql.Config
	admin *sql.DB
	// gcsPort is a Group Replication member's group communication port.
	gcsPort string
}

// admins are the admin pools of every server the workers reach: the
// cluster's nodes, or the one server.
func (c *Controller) admins() []*sql.DB {
	if len(c.nodes) == 0 {
		return []*sql.DB{c.admin}
	}
	dbs := make([]*sql.DB, len(c.nodes))
	for i, n := range c.nodes {
		dbs[i] = n.admin
	}
	return dbs
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
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.StrandBound == 0 {
		cfg.StrandBound = DefaultStrandBound
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
	for _, dsn := range cfg.Nodes {
		ncfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return Report{}, fmt.Errorf("chaos: node DSN: %w", err)
		}
		ncfg.DBName = ""
		connector, err := mysql.NewConnector(ncfg)
		if err != nil {
			return Report{}, err
		}
		db := sql.OpenDB(connector)
		defer db.Close()
		c.nodes = append(c.nodes, node{cfg: ncfg, admin: db})
	}
	if len(c.nodes) > 0 {
		if c.kind, err = clusterKind(ctx, c.nodes[0].admin); err != nil {
			return Report{}, err
		}
		fmt.Fprintf(cfg.Out, "chaos: a %s cluster of %d nodes\n", c.kind, len(c.nodes))
		if c.kind != clusterGalera {
			for i := range c.nodes {
				var local string
				if err := c.nodes[i].admin.QueryRowContext(ctx, "SELECT @@global.group_replication_local_address").Scan(&local); err != nil {
					return Report{}, fmt.Errorf("chaos: node%d: %w", i, err)
				}
				if _, c.nodes[i].gcsPort, err = net.SplitHostPort(local); err != nil {
					return Report{}, fmt.Errorf("chaos: node%d's group_replication_local_address %q: %w", i, local, err)
				}
			}
			// No isolation left over from a run that was killed.
			_ = nft(ctx, "delete table inet "+nftTable)
			defer func() { _ = nft(context.Background(), "delete table inet "+nftTable) }()
		}
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
	watchCtx, stopWatching := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	for _, w := range []func(context.Context){c.keepAlive, c.watchStrands} {
		watchers.Add(1)
		go func() { defer watchers.Done(); w(watchCtx) }()
	}
	defer stopWatching()
	time.Sleep(3 * time.Second)
	var facts Facts
	facts.TickFrom = c.dbNow(ctx)

	plan := PlanCluster(cfg.Seed, cfg.Procs, len(c.nodes), cfg.Duration, cfg.RestartCmd != "")
	fmt.Fprintf(cfg.Out, "chaos: seed %d, %d workers, %s of faults, %d faults planned\n", cfg.Seed, cfg.Procs, cfg.Duration, len(plan))
	began := time.Now()
	// Times in the report count from here, as the plan's do.
	c.start = Mono()
	// The transaction and node logs' times too: they get the start as a
	// value, read here, not c.start from their goroutines.
	for _, w := range []func(context.Context, int64){c.watchTransactions, c.watchNodes} {
		watchers.Add(1)
		go func(start int64) { defer watchers.Done(); w(watchCtx, start) }(c.start)
	}
	var wg sync.WaitGroup
	for _, f := range plan {
		if d := time.Until(began.Add(f.At)); d > 0 {
			time.Sleep(d)
		}
		fmt.Fprintf(cfg.Out, "chaos: %s\n", f)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sp, err := c.inject(ctx, f, adminCfg)
			if err != nil {
				fmt.Fprintf(cfg.Out, "chaos: %s: %v\n", f.Kind, err)
				c.count("failed " + f.Kind)
			}
			if !sp.Skipped {
				fmt.Fprintf(cfg.Out, "chaos: %s\n", sp.describe(c.start))
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
	stopWatching()
	watchers.Wait()
	facts.Strands, facts.StrandBound = c.strands, cfg.StrandBound
	facts.Spans, facts.Lease, facts.Began = c.spans, runLease, c.start
	facts.Locked = c.locked(ctx)

	events, err := ReadHistory(c.hist)
	if err != nil {
		return Report{}, err
	}
	if err := c.readFacts(ctx, &facts); err != nil {
		return Report{}, err
	}
	facts.TickJob, facts.TickEvery, facts.Singletons = "tick", time.Second, []string{"single"}
	facts.PrunedTickJob, facts.OneAttempt = "retained", []string{"once"}
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
