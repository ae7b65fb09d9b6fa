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
	sp := Span{Kind: f.Kind, Proc: f.Proc, From: Mono()}
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
	return c.startAgain(ctx, down, adminCfg)
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
	return c.startAgain(ctx, down, adminCfg)
}

// startAgain waits for the server's port to close, then down, then runs
// the restart command.
func (c *Controller) startAgain(ctx context.Context, down time.Duration, adminCfg *mysql.Config) error {
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
