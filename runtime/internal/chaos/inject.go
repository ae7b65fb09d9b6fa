package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, sp)
	return sp, err
}

// apply applies f, waits its duration and heals it.
func (c *Controller) apply(ctx context.Context, f Fault, adminCfg *mysql.Config, sp *Span) error {
	c.count(f.Kind)
	switch f.Kind {
	case FaultRestart:
		return c.restart(ctx, f.Dur, adminCfg)
	case FaultCrash:
		return c.crash(ctx, f.Dur, adminCfg)
	case FaultLockRows:
		return c.lockRows(ctx, f, sp)
	case FaultNodeKill, FaultNodePause, FaultNodeIsolate:
		return c.nodeFault(ctx, f, sp)
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
	pid, err := listenerPID(port)
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
// is synced with the others again.
func (c *Controller) nodeFault(ctx context.Context, f Fault, sp *Span) error {
	// One node at a time, healed and synced before the next: two nodes
	// of three down would leave the last without a majority, which no
	// fault here means to test (a node that rejoins takes longer than
	// the plan's gap, so the next one waits; its span begins when it
	// does).
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	sp.From = Mono()
	n := c.nodes[f.Node]
	if f.Kind == FaultNodeIsolate {
		if _, err := n.admin.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'"); err != nil {
			return fmt.Errorf("isolate node%d: %w", f.Node, err)
		}
		time.Sleep(f.Dur)
		var err error
		for try := 0; try < 40; try++ {
			if _, err = n.admin.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'"); err == nil {
				return c.waitSynced(ctx, f.Node)
			}
			time.Sleep(500 * time.Millisecond)
		}
		return fmt.Errorf("end the isolation of node%d: %w", f.Node, err)
	}
	_, port, err := net.SplitHostPort(n.cfg.Addr)
	if err != nil {
		return err
	}
	pid, err := listenerPID(port)
	if err != nil {
		return fmt.Errorf("%s: find node%d: %w", f.Kind, f.Node, err)
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
	return c.waitSynced(ctx, f.Node)
}

// waitSynced waits, up to two minutes, until node i answers, says it is
// synced (Galera's wsrep_local_state_comment) and sees every node in the
// cluster (wsrep_cluster_size).
func (c *Controller) waitSynced(ctx context.Context, i int) error {
	var state string
	var size int
	var err error
	for try := 0; try < 240; try++ {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = c.nodes[i].admin.QueryRowContext(qctx, `SELECT
			(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'),
			(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_SIZE')`).Scan(&state, &size)
		cancel()
		if err == nil && state == "Synced" && size == len(c.nodes) {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("node%d not synced with %d nodes after two minutes (state %q, cluster size %d): %v", i, len(c.nodes), state, size, err)
}
