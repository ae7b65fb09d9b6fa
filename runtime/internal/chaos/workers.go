package chaos

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
)

// proc is one worker slot: its proxy (one per member on a single-primary
// group), and the process of its current incarnation.
type proc struct {
	id    int
	proxy proxies
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

// settings are what differs between the workers: the session time zone
// and sql_mode in the DSN (one sets a strict mode of its own; the others
// keep the server's), and the process's local time zone (TZ). The
// driver's loc is UTC for all: the runtime refuses any other (a node
// whose loc differed would store other DATETIME values for the same
// instant), and a sql_mode that is not strict.
var settings = []struct{ zone, sqlMode, tz string }{
	{"'+00:00'", "", "UTC"},
	{"SYSTEM", "", "America/New_York"},
	{"'+05:30'", "", "Asia/Kolkata"},
	{"'-05:00'", "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'", "Pacific/Chatham"},
	{"'+13:00'", "", "Europe/Berlin"},
}

// proxies are a worker's proxies: a fault of its network applies to all.
type proxies []*tcpproxy.Proxy

func (ps proxies) Delay(d time.Duration) {
	for _, p := range ps {
		p.Delay(d)
	}
}

func (ps proxies) Partition() {
	for _, p := range ps {
		p.Partition()
	}
}

func (ps proxies) Cut() {
	for _, p := range ps {
		p.Cut()
	}
}

func (ps proxies) Blackhole() {
	for _, p := range ps {
		p.Blackhole()
	}
}

func (ps proxies) Restore() {
	for _, p := range ps {
		p.Restore()
	}
}

func (ps proxies) Close() {
	for _, p := range ps {
		p.Close()
	}
}

// newProc makes worker slot i: a proxy to the server, to node i mod n of
// a cluster, or, on a single-primary group, to each member (node i mod n
// first: the worker's runtime.Failover tries them in that order), and the
// worker's DSNs (comma-separated).
func (c *Controller) newProc(i int, adminCfg *mysql.Config) (*proc, error) {
	addrs := []string{adminCfg.Addr}
	if len(c.nodes) > 0 {
		addrs = []string{c.nodes[i%len(c.nodes)].cfg.Addr}
		if c.singlePrimary() {
			for k := 1; k < len(c.nodes); k++ {
				addrs = append(addrs, c.nodes[(i+k)%len(c.nodes)].cfg.Addr)
			}
		}
	}
	p := &proc{id: i}
	var dsns []string
	for _, addr := range addrs {
		proxy, err := tcpproxy.Start(addr)
		if err != nil {
			p.proxy.Close()
			return nil, err
		}
		p.proxy = append(p.proxy, proxy)
		dsns = append(dsns, c.workerDSN(i, proxy.Addr()))
	}
	p.dsn, p.tz = strings.Join(dsns, ","), settings[i%len(settings)].tz
	return p, nil
}

// workerDSN is worker slot i's DSN through the proxy at addr.
func (c *Controller) workerDSN(i int, addr string) string {
	s := settings[i%len(settings)]
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = procUser(i), appPass, "tcp", addr, database
	cfg.ParseTime, cfg.InterpolateParams = true, true
	cfg.Timeout = time.Second
	// A read timeout, as docs/strategies.md recommends: database/sql opens
	// connections for queued requests in one goroutine with no deadline, so
	// a new connection whose handshake a blackhole swallows would stop the
	// pool from opening any other, for good. Longer than any wait here.
	cfg.ReadTimeout = 10 * time.Second
	cfg.Loc = time.UTC
	cfg.Params = map[string]string{"time_zone": s.zone}
	if s.sqlMode != "" {
		cfg.Params["sql_mode"] = s.sqlMode
	}
	return cfg.FormatDSN()
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
	args := []string{"-proc", fmt.Sprint(p.id), "-inc", fmt.Sprint(p.inc), "-dsn", p.dsn, "-history", c.hist}
	if len(c.nodes) > 0 {
		args = append(args, "-cluster")
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "TZ="+p.tz)
	// The kernel kills the worker when the controller dies: a killed or
	// crashed controller would otherwise leave its workers running
	// against the server for ever.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
