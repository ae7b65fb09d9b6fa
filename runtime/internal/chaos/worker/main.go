// Command worker is one process of the chaos harness (see package
// chaos): it works every lock and job of chaosgen at once, through the
// DSN it is given, and records what it sees to a history file. The
// controller starts, pauses, kills and restarts it; it obeys commands on
// stdin ("clock <duration>" steps its wall clock, "pool <n>" resizes its
// pool) and stops cleanly on SIGTERM.
package main

//go:generate go run github.com/lockgen/lockgen/cmd/lockgen generate

import (
	"bufio"
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/chaos"
	"github.com/lockgen/lockgen/runtime/internal/chaos/worker/chaosgen"
)

func main() {
	proc := flag.Int("proc", 0, "the worker's slot")
	inc := flag.Int("inc", 0, "the worker's incarnation")
	dsn := flag.String("dsn", "", "the database, through the controller's proxy")
	dir := flag.String("history", "", "the directory of history files")
	pool := flag.Int("pool", 8, "the pool's most open connections")
	lease := flag.Duration("lease", 2*time.Second, "the job worker's run lease")
	cluster := flag.Bool("cluster", false, "the server is a node of a cluster, where the session and row strategies and Guard are refused: leave them out")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *proc, *inc, *dsn, *dir, *pool, *lease, *cluster); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// worker is one process's state.
type worker struct {
	rec   *chaos.Recorder
	locks *chaosgen.Locks
	db    *sql.DB
	// guardDB runs the guarded writes' transactions (see openGuardDB).
	guardDB *sql.DB
	proc    int
	rng     *rand.Rand
	rngMu   sync.Mutex
	// quiet stops the enqueuing, for the controller's quiet phase.
	quiet atomic.Bool
	seq   int64
}

func run(ctx context.Context, proc, inc int, dsn, dir string, pool int, lease time.Duration, cluster bool) error {
	rec, err := chaos.NewRecorder(dir, proc, inc)
	if err != nil {
		return err
	}
	// Each connection's handshake bounded (runtime.ConnectTimeout, as the
	// README recommends): a handshake a fault swallowed held the pool's
	// one opener goroutine for readTimeout, and every statement of the
	// process waited for a connection meanwhile. Several DSNs are the
	// members of a single-primary group: runtime.Failover finds the one
	// that takes writes, as docs/OPERATING.md recommends.
	var cfg *mysql.Config
	var members []sqldriver.Connector
	for _, one := range strings.Split(dsn, ",") {
		mcfg, err := mysql.ParseDSN(one)
		if err != nil {
			return err
		}
		connector, err := mysql.NewConnector(mcfg)
		if err != nil {
			return err
		}
		if cfg == nil {
			cfg = mcfg
		}
		members = append(members, runtime.ConnectTimeout(connector, 2*time.Second))
	}
	connector := members[0]
	if len(members) > 1 {
		connector = runtime.Failover(members...)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	// Idle connections close after 10 s: the controller's keep-alive
	// stand-in takes a session idle for minutes for one a partition
	// stranded.
	db.SetConnMaxIdleTime(10 * time.Second)
	guardDB, err := openGuardDB(cfg)
	if err != nil {
		return err
	}
	defer guardDB.Close()
	clock := &chaos.SteppedClock{}
	log := slog.New(diagnosis{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})})
	locks, err := chaosgen.New(db, runtime.WithClock(clock), runtime.WithLogger(log),
		runtime.WithOwner(fmt.Sprintf("p%d.%d", proc, inc)))
	if err != nil {
		return err
	}
	w := &worker{rec: rec, locks: locks, db: db, guardDB: guardDB, proc: proc, rng: rand.New(rand.NewPCG(uint64(proc), uint64(inc)))}
	go w.commands(clock)
	go logPool(ctx, db, filepath.Join(dir, fmt.Sprintf("pool-p%d-i%d.log", proc, inc)))

	var wg sync.WaitGroup
	loop := func(f func(ctx context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				f(ctx)
			}
		}()
	}
	loop(w.leader)
	loop(func(ctx context.Context) { w.section(ctx, chaosgen.PollLockName, "", locks.WithPollLock) })
	loop(func(ctx context.Context) { w.section(ctx, chaosgen.ServerLockName, "", locks.WithServerLock) })
	for range 4 {
		loop(func(ctx context.Context) {
			n := int64(w.intn(100))
			w.section(ctx, chaosgen.KeyedLockName, strconv.FormatInt(n, 10), func(ctx context.Context, fn func(context.Context, *runtime.Lease) error) error {
				return locks.WithKeyedLock(ctx, n, fn)
			})
		})
	}
	if !cluster {
		loop(func(ctx context.Context) { w.section(ctx, chaosgen.SessionLockName, "", locks.WithSessionLock) })
		loop(func(ctx context.Context) { w.section(ctx, chaosgen.SessionLockName, "", w.trySession) })
		loop(w.row)
		loop(w.guarded)
	}
	loop(w.enqueue)
	pruner, err := newPruner(db, clock, log, proc, inc)
	if pruner != nil {
		pruner.w = w
	}
	if err != nil {
		return err
	}
	loop(pruner.prune)
	cons, err := newConsumer(w, db, fmt.Sprintf("p%d.%d-http", proc, inc))
	if err != nil {
		return err
	}
	loop(cons.consume)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			err := locks.RunJobs(ctx, handlers{w}, func(c *chaosgen.WorkerConfig) {
				c.Lease = lease
				c.ShutdownGrace = time.Second
				c.PollMax = 200 * time.Millisecond
			})
			if err != nil && ctx.Err() == nil {
				w.fail("run jobs", err)
				w.sleep(ctx, 100*time.Millisecond)
			}
		}
	}()
	wg.Wait()
	return nil
}

// commands obeys the controller's lines on stdin.
func (w *worker) commands(clock *chaos.SteppedClock) {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "clock":
			if d, err := time.ParseDuration(f[1]); err == nil {
				clock.Step(d)
			}
		case "quiet":
			w.quiet.Store(f[1] == "on")
		case "pool":
			if n, err := strconv.Atoi(f[1]); err == nil {
				w.db.SetMaxOpenConns(n)
				w.db.SetMaxIdleConns(n)
			}
		}
	}
}

func (w *worker) intn(n int) int {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return w.rng.IntN(n)
}

// between returns a random duration in [lo, hi).
func (w *worker) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.intn(int(hi-lo)))
}

func (w *worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// fail records a failed call, by what failed and the error's class.
func (w *worker) fail(what string, err error) {
	class := "other"
	switch {
	case errors.Is(err, runtime.ErrNotAcquired):
		class = "not acquired"
	case errors.Is(err, runtime.ErrLeaseLost):
		class = "lease lost"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		class = "cancelled"
	case runtime.IsTransient(err):
		class = "transient"
	}
	w.rec.Record(chaos.Event{Kind: chaos.KindError, What: what + ": " + class, Err: err.Error(), T1: chaos.Mono()})
}

// hold runs the body of a critical section: it checks, at random
// intervals for a random time (sometimes longer than the TTL, so the
// lease must be renewed), that it still holds the lock, and records every
// check. It stops at the first check that says the holding is over.
func (w *worker) hold(ctx context.Context, sec int, lease *runtime.Lease, length time.Duration) error {
	end := time.Now().Add(length)
	for {
		var err error
		what := "ctx"
		t0 := chaos.Mono()
		if lease != nil && w.intn(2) == 0 {
			what = "lease"
			err = lease.Err()
		} else {
			err = ctx.Err()
		}
		t1 := chaos.Mono()
		e := chaos.Event{Kind: chaos.KindCheck, Sec: sec, What: what, T0: t0, T1: t1, OK: err == nil, Err: errText(err)}
		if err != nil && what == "ctx" {
			e.Err = errText(context.Cause(ctx))
		}
		w.rec.Record(e)
		if err != nil || time.Now().After(end) {
			return err
		}
		w.sleep(ctx, w.between(10*time.Millisecond, 80*time.Millisecond))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// section takes a lock with with and holds it for a while.
func (w *worker) section(ctx context.Context, name, key string, with func(context.Context, func(context.Context, *runtime.Lease) error) error) {
	sec := w.rec.Section()
	t0 := chaos.Mono()
	err := with(ctx, func(ctx context.Context, lease *runtime.Lease) error {
		w.rec.Record(chaos.Event{Kind: chaos.KindHold, Sec: sec, Obj: name, Key: key, Token: lease.Token(), T0: t0, T1: chaos.Mono()})
		err := w.hold(ctx, sec, lease, w.between(0, 1800*time.Millisecond))
		w.rec.Record(chaos.Event{Kind: chaos.KindEnd, Sec: sec, T1: chaos.Mono(), Err: errText(err)})
		return err
	})
	if err != nil && ctx.Err() == nil {
		w.fail(name, err)
	}
	w.sleep(ctx, w.between(0, 100*time.Millisecond))
}

// trySession is WithSessionLock by TrySessionLock, which does not wait:
// a try whose last holding here took a reserved token takes the lock and
// its token in one statement on a connection kept from that holding (the
// runtime's keptSessions), a way the waiting loop never takes.
func (w *worker) trySession(ctx context.Context, fn func(context.Context, *runtime.Lease) error) error {
	lease, err := w.locks.TrySessionLock(ctx)
	if err != nil {
		return err
	}
	err = fn(lease.Context(), lease)
	return errors.Join(err, lease.Release(context.WithoutCancel(ctx)))
}

// leader campaigns, and holds each term for a random time.
func (w *worker) leader(ctx context.Context) {
	err := w.locks.RunAsLeader(ctx, func(ctx context.Context, lease *runtime.Lease) error {
		sec := w.rec.Section()
		now := chaos.Mono()
		// T0 0: when the campaign's winning attempt began is unknown.
		w.rec.Record(chaos.Event{Kind: chaos.KindHold, Sec: sec, Obj: chaosgen.LeaderLockName, Token: lease.Token(), T1: now})
		err := w.hold(ctx, sec, lease, w.between(200*time.Millisecond, 3*time.Second))
		w.rec.Record(chaos.Event{Kind: chaos.KindEnd, Sec: sec, T1: chaos.Mono(), Err: errText(err)})
		if err != nil {
			return err
		}
		return errStepDown
	})
	if err != nil && ctx.Err() == nil && !errors.Is(err, errStepDown) {
		w.fail("leader", err)
	}
}

// errStepDown ends a leader term on purpose.
var errStepDown = errors.New("step down")

// row holds the row lock and writes, in the holding's transaction, one
// row that records the holding's token: it commits with the release, or
// not at all when the holding was lost.
func (w *worker) row(ctx context.Context) {
	w.section(ctx, chaosgen.RowLockName, "", func(ctx context.Context, fn func(context.Context, *runtime.Lease) error) error {
		return w.locks.WithRowLockTx(ctx, func(ctx context.Context, tx *sql.Tx, lease *runtime.Lease) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO chaos_row_writes (token, proc) VALUES (?, ?)", lease.Token(), w.proc); err != nil {
				return err
			}
			return fn(ctx, lease)
		})
	})
}

// guarded writes, under the guarded lock, one row that records the
// holding's token, in a transaction that Guard protects.
func (w *worker) guarded(ctx context.Context) {
	w.section(ctx, chaosgen.GuardedLockName, "", func(ctx context.Context, fn func(context.Context, *runtime.Lease) error) error {
		return w.locks.WithGuardedLock(ctx, func(ctx context.Context, lease *runtime.Lease) error {
			if err := fn(ctx, lease); err != nil {
				return err
			}
			tx, err := w.guardDB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			if err := lease.Guard(ctx, tx); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO chaos_guarded_writes (token, proc) VALUES (?, ?)", lease.Token(), w.proc); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			w.rec.Record(chaos.Event{Kind: chaos.KindGuarded, Obj: chaosgen.GuardedLockName, Token: lease.Token(), T1: chaos.Mono()})
			return nil
		})
	})
}

// logPool writes one line a second to path: the pool's connections (open,
// in use, idle), the callers that waited for one since the last line and
// how long they waited in all, and how late the line's timer fired. When a
// process's statements all time out at once, a late timer says its CPU was
// starved (the machine was loaded), waits for connections say its pool ran
// dry, and neither says the server or the network held it up.
func logPool(ctx context.Context, db *sql.DB, path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	const every = time.Second
	t := time.NewTicker(every)
	defer t.Stop()
	prev, last := db.Stats(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st, now := db.Stats(), time.Now()
			s := fmt.Sprintf("%s open=%d inuse=%d idle=%d waits=%d waited=%s late=%s\n", now.UTC().Format(time.RFC3339Nano),
				st.OpenConnections, st.InUse, st.Idle, st.WaitCount-prev.WaitCount,
				(st.WaitDuration - prev.WaitDuration).Round(time.Millisecond), (now.Sub(last) - every).Round(time.Millisecond))
			prev, last = st, now
			if _, err := f.WriteString(s); err != nil {
				return
			}
		}
	}
}

// diagnosis passes on the records at WARN and above, and those at any
// level about heartbeats and rescues: a heartbeat that skipped busy rows
// or failed with a transient error (a deadlock, a lock wait timeout) is
// logged at DEBUG, and those are what tell why a healthy handler's lease
// ran out.
type diagnosis struct{ slog.Handler }

func (d diagnosis) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn || strings.Contains(r.Message, "heartbeat") || strings.Contains(r.Message, "rescu") {
		stalled(r)
		return d.Handler.Handle(ctx, r)
	}
	return nil
}

// stallDump is the run of failed heartbeats in a row after which the
// worker writes every goroutine's stack to stderr (its log), once per run
// of failures: about 6.7 s of failing at the harness's heartbeat period,
// longer than most faults, so that a pool still starved after a fault
// healed (RELIABILITY.md, Open) shows what holds its connections.
const stallDump = 20

// stalled writes the goroutine dump when r is the stallDump-th failed
// heartbeat in a row.
func stalled(r slog.Record) {
	if r.Message != "lockgen: run heartbeat failed" {
		return
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "failures_in_a_row" && a.Value.Kind() == slog.KindInt64 && a.Value.Int64() == stallDump {
			fmt.Fprintf(os.Stderr, "chaos-worker: %d heartbeats failed in a row; goroutines:\n", stallDump)
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			return false
		}
		return true
	})
}

func (d diagnosis) WithAttrs(attrs []slog.Attr) slog.Handler {
	return diagnosis{d.Handler.WithAttrs(attrs)}
}

func (d diagnosis) WithGroup(name string) slog.Handler { return diagnosis{d.Handler.WithGroup(name)} }
