package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime/internal/listener"
)

func (c *Controller) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[kind]++
}

// inject applies f, waits its duration and heals it, and records and
// returns when it was in force (see Span).
func (c *Controller) inject(ctx context.Context, f Fault, adminCfg *mysql.Config) (Span, error) {
	sp := Span{Kind: f.Kind, Proc: f.Proc, Node: f.Node, From: Mono()}
	err := c.apply(ctx, f, adminCfg, &sp)
	sp.To = Mono()
	if sp.Skipped {
		return sp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, sp)
	return sp, err
}

// apply applies f, waits its duration and heals it.
func (c *Controller) apply(ctx context.Context, f Fault, adminCfg *mysql.Config, sp *Span) error {
	if f.nodeFault() {
		return c.nodeFault(ctx, f, sp) // counts itself
	}
	c.count(f.Kind)
	switch f.Kind {
	case FaultRestart:
		return c.restart(ctx, f.Dur, adminCfg)
	case FaultCrash:
		return c.crash(ctx, f.Dur, adminCfg)
	case FaultLockRows:
		return c.lockRows(ctx, f, sp)
	}
	p := c.procs[f.Proc]
	switch f.Kind {
	case FaultKill:
		c.kill(p)
		sp.Killed = true
		time.Sleep(f.Dur)
		return c.spawn(p)
	case FaultPartition:
		p.proxy.Delay(f.Arg)
		time.Sleep(f.Lead)
		p.proxy.Partition()
		time.Sleep(f.Dur)
		p.proxy.Restore()
		c.mu.Lock()
		c.lastPartition = Mono()
		c.mu.Unlock()
	case FaultOutage:
		p.proxy.Cut()
		time.Sleep(f.Dur)
		p.proxy.Restore()
	case FaultRotate:
		return c.rotate(ctx, p, f.Dur)
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
	return c.startAgain(ctx, down, adminCfg.Addr, c.cfg.RestartCmd)
}

// crash SIGKILLs the server (the process listening on its port, on this
// machine): no shutdown, so its next start recovers from the redo log, as
// after a power cut of the server alone. Then it starts it again as
// restart does.
func (c *Controller) crash(ctx context.Context, down time.Duration, adminCfg *mysql.Config) error {
	_, port, err := net.SplitHostPort(adminCfg.Addr)
	if err != nil {
		return err
	}
	pid, err := listener.PID(port)
	if err != nil {
		return fmt.Errorf("crash: find the server: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("crash: SIGKILL server pid %d: %w", pid, err)
	}
	return c.startAgain(ctx, down, adminCfg.Addr, c.cfg.RestartCmd)
}

// startAgain waits for the server's port (addr) to close, then down,
// then runs the shell command start.
func (c *Controller) startAgain(ctx context.Context, down time.Duration, addr, start string) error {
	for i := 0; i < 600; i++ {
		conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
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
		cmd := exec.CommandContext(ctx, "bash", "-c", start)
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
	return fmt.Errorf("restart command %q: %w", start, err)
}

// nodeFault applies a fault of one node of the cluster (see
// FaultNodeKill), waits its duration, heals it and waits until the node
// is synced with the others again. Once one node fault has failed (the
// cluster did not come back whole, or a node did not start), no other is
// applied: the cluster is not in the state the next one assumes, and
// piling faults on a cluster that has not recovered loses it (a group
// did, with a member still recovering). They are counted as skipped and
// recorded as no span.
func (c *Controller) nodeFault(ctx context.Context, f Fault, sp *Span) error {
	// One node at a time, healed and synced before the next: two nodes
	// of three down would leave the last without a majority, which no
	// fault here means to test (a node that rejoins takes longer than
	// the plan's gap, so the next one waits; its span begins when it
	// does).
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	sp.From = Mono()
	if c.nodeFailed {
		c.count("skipped " + f.Kind + " (after a failed node fault)")
		sp.Skipped = true
		return nil
	}
	c.count(f.Kind)
	err := c.nodeFaultOnce(ctx, f, sp)
	if err != nil {
		c.nodeFailed = true
		fmt.Fprintf(c.cfg.Out, "chaos: %s of node%d failed; no more node faults in this run: %v\n", f.Kind, sp.Node, err)
	}
	return err
}

// nodeFaultOnce is nodeFault's fault, under nodeMu.
func (c *Controller) nodeFaultOnce(ctx context.Context, f Fault, sp *Span) error {
	// The view before the fault: one that lasts long enough to be
	// noticed must end in another (see waitSynced).
	before, _, _ := c.clusterView(ctx)
	noticed := f.Kind == FaultNodeKill || f.Dur >= noticedAfter
	if f.Kind == FaultNodeKill && f.Node == 0 && c.singlePrimary() {
		// On a single-primary group a kill planned for node 0 kills
		// whichever member is the primary: the failover case.
		if i, err := c.primary(ctx); err == nil {
			sp.Node, sp.Primary = i, true
			c.count("nodekill of the primary")
		}
	}
	n := c.nodes[sp.Node]
	if f.Kind == FaultNodeIsolate {
		if err := c.isolate(ctx, sp.Node, true); err != nil {
			return fmt.Errorf("isolate node%d: %w", sp.Node, err)
		}
		time.Sleep(f.Dur)
		var err error
		for try := 0; try < 40; try++ {
			if err = c.isolate(ctx, sp.Node, false); err == nil {
				return c.waitSynced(ctx, sp.Node, before, noticed)
			}
			time.Sleep(500 * time.Millisecond)
		}
		return fmt.Errorf("end the isolation of node%d: %w", sp.Node, err)
	}
	_, port, err := net.SplitHostPort(n.cfg.Addr)
	if err != nil {
		return err
	}
	pid, err := listener.PID(port)
	if err != nil {
		return fmt.Errorf("%s: find node%d: %w", f.Kind, sp.Node, err)
	}
	switch f.Kind {
	case FaultNodePause:
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return err
		}
		time.Sleep(f.Dur)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return err
		}
	case FaultNodeKill:
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return err
		}
		if err := c.startAgain(ctx, f.Dur, n.cfg.Addr, c.cfg.NodeStartCmd); err != nil {
			return err
		}
	}
	return c.waitSynced(ctx, sp.Node, before, noticed)
}

// settle is how long waitSynced wants the cluster whole, in one view,
// before the next node fault: a member that comes back from a pause or an
// isolation may be seen ONLINE by every member while its expulsion, decided
// as it went silent, is still on its way (a group expelled one 0.7 s after
// it answered again); a fault of another node then would leave one member
// of three, without a majority, and the group lost.
const settle = 3 * time.Second

// noticedAfter is how long a node may be silent before its peers suspect
// it (Galera's evs.suspect_timeout, Group Replication's detection: 5 s
// each); expelWithin bounds how long after that the expulsion may land
// (Group Replication processes expired suspicions on a 15 s timer).
const (
	noticedAfter = 5 * time.Second
	expelWithin  = 20 * time.Second
)

// syncedWithin bounds waitSynced, by the clock (each look at the cluster
// may take up to 2 s a node); rejoinAfter is how long a group member may
// stay out before the node start command makes it rejoin.
const (
	syncedWithin = 2 * time.Minute
	rejoinAfter  = 30 * time.Second
)

// waitSynced waits, up to syncedWithin, until node i answers and is a
// full member again, and the cluster has stayed whole in one view for
// settle: on Galera every node synced (wsrep_local_state_comment: the
// donor of a state transfer too), seeing every node in the cluster
// (wsrep_cluster_size), in the same configuration (wsrep_cluster_conf_id);
// on Group Replication every member seeing every member ONLINE in the same
// view (VIEW_ID). After a fault its peers may have noticed (noticed), the
// view must also differ from the one before the fault (before), or have
// lasted expelWithin: an expulsion may still be on its way. A group member
// that a pause or an isolation got expelled does not come back by itself
// soon (its auto-rejoin waits minutes between attempts): after rejoinAfter
// the node start command makes it rejoin.
func (c *Controller) waitSynced(ctx context.Context, i int, before string, noticed bool) error {
	var why, stable string
	var since time.Time
	start := time.Now()
	rejoined := false
	for time.Since(start) < syncedWithin {
		view, whole, w := c.clusterView(ctx)
		why = w
		switch {
		case !whole:
			stable = ""
		case view != stable:
			stable, since = view, time.Now()
		case time.Since(since) >= settle && (!noticed || view != before || time.Since(since) >= expelWithin):
			return nil
		}
		if !whole && !rejoined && time.Since(start) >= rejoinAfter && c.kind != clusterGalera && c.cfg.NodeStartCmd != "" {
			rejoined = true
			cmd := exec.CommandContext(ctx, "bash", "-c", c.cfg.NodeStartCmd)
			cmd.Stdout, cmd.Stderr = c.cfg.Out, c.cfg.Out
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(c.cfg.Out, "chaos: node start command: %v\n", err)
			}
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("node%d: the cluster was not whole for %s within %s: %s", i, settle, syncedWithin, why)
}

// maxBacklog is how many replicated transactions (write sets) a node may
// have waiting to be applied and still count as a full member for the
// next node fault: under the workers' load a few are normal; many mean
// the node is catching up (a donor whose applier wedged on one
// transaction kept 59,530 queued while the group went on, and faults piled
// on it lost the group).
const maxBacklog = 100

// clusterView returns the cluster's view (one string for one view), and
// whether every node is a full member of it, with no more than maxBacklog
// transactions waiting to be applied and (Group Replication) no recovery
// under way; when not, why.
func (c *Controller) clusterView(ctx context.Context) (view string, whole bool, why string) {
	var views []string
	for k, n := range c.nodes {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var id string
		var err error
		if c.kind == clusterGalera {
			var state string
			var size int
			var backlog int
			err = n.admin.QueryRowContext(qctx, `SELECT
				(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'),
				(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_SIZE'),
				(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_CONF_ID'),
				(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_RECV_QUEUE')`).Scan(&state, &size, &id, &backlog)
			switch {
			case err != nil:
			case state != "Synced" || size != len(c.nodes):
				err = fmt.Errorf("%s in a cluster of %d", state, size)
			case backlog > maxBacklog:
				err = fmt.Errorf("%d write sets in its receive queue", backlog)
			}
		} else {
			var online, backlog, recovering int
			err = n.admin.QueryRowContext(qctx, `SELECT
				(SELECT COUNT(*) FROM performance_schema.replication_group_members WHERE MEMBER_STATE = 'ONLINE'),
				(SELECT IFNULL(MAX(VIEW_ID), '') FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@server_uuid),
				(SELECT IFNULL(MAX(COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE), 0) FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@server_uuid),
				(SELECT COUNT(*) FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = 'group_replication_recovery' AND SERVICE_STATE = 'ON')`).Scan(&online, &id, &backlog, &recovering)
			switch {
			case err != nil:
			case online != len(c.nodes):
				err = fmt.Errorf("sees %d members online", online)
			case recovering > 0:
				err = errors.New("its recovery channel is running")
			case backlog > maxBacklog:
				err = fmt.Errorf("%d transactions in its applier queue", backlog)
			}
		}
		cancel()
		if err == nil && id == "" {
			err = errors.New("no view")
		}
		if err != nil {
			return "", false, fmt.Sprintf("node%d: %v", k, err)
		}
		views = append(views, id)
	}
	for _, v := range views[1:] {
		if v != views[0] {
			return "", false, fmt.Sprintf("the nodes are in different views %q", views)
		}
	}
	return views[0], true, ""
}

// primary returns the index of the single-primary group's primary.
func (c *Controller) primary(ctx context.Context) (int, error) {
	var err error
	for _, n := range c.nodes {
		var port string
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = n.admin.QueryRowContext(qctx, "SELECT MEMBER_PORT FROM performance_schema.replication_group_members WHERE MEMBER_ROLE = 'PRIMARY' AND MEMBER_STATE = 'ONLINE'").Scan(&port)
		cancel()
		if err != nil {
			continue
		}
		for i, m := range c.nodes {
			if _, p, _ := net.SplitHostPort(m.cfg.Addr); p == port {
				return i, nil
			}
		}
		err = fmt.Errorf("the primary's port %s is no node's", port)
	}
	return 0, fmt.Errorf("find the primary: %w", err)
}

// nftTable is the nftables table that isolates a group member.
const nftTable = "lockgen_chaos"

// isolate cuts node i off from its peers (on) or ends that (off), while
// its clients still reach it: on Galera with gmcast.isolate; on Group
// Replication with nftables rules that drop the member's group
// communication (packets to and from its port, and those its system user
// sends to its peers' ports; .ci/ensure-group-replication runs each
// member as a user of its own).
func (c *Controller) isolate(ctx context.Context, i int, on bool) error {
	if c.kind == clusterGalera {
		v := "0"
		if on {
			v = "1"
		}
		_, err := c.nodes[i].admin.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate="+v+"'")
		return err
	}
	if !on {
		return nft(ctx, "delete table inet "+nftTable)
	}
	_, port, err := net.SplitHostPort(c.nodes[i].cfg.Addr)
	if err != nil {
		return err
	}
	pid, err := listener.PID(port)
	if err != nil {
		return err
	}
	uid, err := processUID(pid)
	if err != nil {
		return err
	}
	if uid == 0 {
		return fmt.Errorf("node%d runs as root: its group communication cannot be told from its peers'", i)
	}
	var others []string
	for k, n := range c.nodes {
		if k != i {
			others = append(others, n.gcsPort)
		}
	}
	own := c.nodes[i].gcsPort
	return nft(ctx, fmt.Sprintf(`add table inet %[1]s
add chain inet %[1]s out { type filter hook output priority 0; }
add rule inet %[1]s out tcp dport %[2]s drop
add rule inet %[1]s out tcp sport %[2]s drop
add rule inet %[1]s out meta skuid %[3]d tcp dport { %[4]s } drop`, nftTable, own, uid, strings.Join(others, ", ")))
}

// nft runs an nftables script.
func nft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, out)
	}
	return nil
}

// processUID returns the real uid of process pid.
func processUID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				return strconv.Atoi(fields[0])
			}
		}
	}
	return 0, fmt.Errorf("no Uid in /proc/%d/status", pid)
}
