package jobs_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// The busy worker child: see TestJobsWorkersUnderLoadDoNotDeadlock.
const busyChildEnv = "LOCKGEN_TEST_BUSY_CHILD"

// busyLease is the busy workers' lease: short, so heartbeats are frequent.
const busyLease = 2 * time.Second

// runBusyChild runs one worker of job "busy" and writes every log record
// (Debug and up) to standard output as JSON, one a line, and one line
// {"ran":<id>,"attempt":<n>} per attempt it starts. A tenth of the attempts
// fail once, so failures are recorded too.
func runBusyChild() int {
	cfg, err := mysql.ParseDSN(os.Getenv(busyChildEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var out sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	log := slog.New(slog.NewJSONHandler(lockedWriter{&out, w}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() {
		for range time.Tick(50 * time.Millisecond) {
			out.Lock()
			_ = w.Flush()
			out.Unlock()
		}
	}()
	store := &countingStore{Store: lockgendb.NewStore(sql.OpenDB(c)), counts: map[string]int{}}
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			store.mu.Lock()
			line, _ := json.Marshal(map[string]any{"deadlocks": store.counts})
			store.mu.Unlock()
			out.Lock()
			_, _ = w.Write(append(line, '\n'))
			out.Unlock()
		}
	}()
	client, err := runtime.NewClient(store, runtime.WithOwner(os.Getenv(busyChildEnv+"_NAME")), runtime.WithLogger(log))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	j, err := jobs.NewClient(client, store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	wk, err := j.NewWorker(jobs.WorkerConfig{Lease: busyLease, RescueEvery: 20 * time.Millisecond, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Concurrency: 16, CompleteBatch: 20, CompleteEvery: 5 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"busy": {BackoffInitial: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Handle: func(ctx context.Context, run *jobs.Run) error {
			line, _ := json.Marshal(map[string]int64{"ran": run.ID, "attempt": int64(run.Attempt)})
			out.Lock()
			_, _ = w.Write(append(line, '\n'))
			out.Unlock()
			time.Sleep(time.Duration(rand.N(20)) * time.Millisecond)
			if run.Attempt == 1 && run.ID%10 == 0 {
				return fmt.Errorf("run %d fails its first attempt", run.ID)
			}
			return nil
		}}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_ = wk.Run(context.Background())
	return 0
}

// countingStore counts the deadlocks (1213) of each job statement.
type countingStore struct {
	lockgendb.Store
	mu     sync.Mutex
	counts map[string]int
}

func (s *countingStore) note(name string, err error) {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1213 {
		s.mu.Lock()
		s.counts[name]++
		s.mu.Unlock()
	}
}

func (s *countingStore) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration, after *driver.RunCursor) ([]jobs.Run, error) {
	runs, err := s.Store.RunsClaim(ctx, queue, worker, limit, lease, after)
	s.note("claim", err)
	return runs, err
}

func (s *countingStore) RunsHeartbeat(ctx context.Context, claims []driver.Claim, lease time.Duration) (driver.Heartbeat, error) {
	hb, err := s.Store.RunsHeartbeat(ctx, claims, lease)
	s.note("heartbeat", err)
	return hb, err
}

func (s *countingStore) RunsComplete(ctx context.Context, claims []driver.Claim) (driver.Completion, error) {
	done, err := s.Store.RunsComplete(ctx, claims)
	s.note("complete", err)
	return done, err
}

func (s *countingStore) RunFail(ctx context.Context, c driver.Claim, errText string, backoff time.Duration) (bool, error) {
	ok, err := s.Store.RunFail(ctx, c, errText, backoff)
	s.note("fail", err)
	return ok, err
}

func (s *countingStore) RunsRescue(ctx context.Context, limit int) (int64, error) {
	n, err := s.Store.RunsRescue(ctx, limit)
	s.note("rescue", err)
	return n, err
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bufio.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// busyRecord is one line of a busy child's output.
type busyRecord struct {
	Level   string `json:"level"`
	Msg     string `json:"msg"`
	Error   string `json:"error"`
	Ran     int64  `json:"ran"`
	Attempt int    `json:"attempt"`
	// Deadlocks is the child's count of deadlocks by statement so far.
	Deadlocks map[string]int `json:"deadlocks"`
}

// TestJobsWorkersUnderLoadDoNotDeadlock: three worker processes with short
// leases that rescue every 20 ms work 3,000 runs (a tenth fail once) while
// 300 runs claimed by a worker that died expire over 1.5 s and are rescued:
// every run completes, each attempt runs once, and no statement of any
// worker hits a deadlock (1213) or logs a warning, other than for a
// statement that ran past its own deadline on a starved machine (a claim
// that did so after it committed leaves its runs to the rescue: those
// attempts may not run, and only then). Rescue
// used to lock the state index and then the runs, completions and failures
// the runs and then their state index entries: 1–9 deadlocks per run of
// this test, on MariaDB and MySQL.
func TestJobsWorkersUnderLoadDoNotDeadlock(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	j := jobsNode(t, db, "parent")
	const total, ghosts, workers = 3000, 300, 3

	// The dead worker's runs: claimed (attempt 1), their deadlines passing
	// one batch every 15 ms.
	runs := make([]jobs.NewRun, ghosts)
	for i := range runs {
		runs[i] = jobs.NewRun{Job: "busy", MaxAttempts: 3, Timeout: 10 * time.Second, Delay: time.Hour}
	}
	require.NoError(t, j.EnqueueMany(ctx, nil, runs))
	_, err := db.ExecContext(ctx, `UPDATE lockgen_runs SET state = 'running', attempt = 1, claim = 1, claim_ref = CONCAT(id, ':1'), worker = 'ghost',
		deadline = UTC_TIMESTAMP(6) + INTERVAL (id % 100) * 15000 MICROSECOND`)
	require.NoError(t, err)
	ghost := func(id int64) bool { return id <= ghosts }

	var mu sync.Mutex
	attempts := map[[2]int64]int{}
	childDeadlocks := make([]map[string]int, workers)
	logged := map[string]int{}
	timeouts := map[string]int{}
	timedOut := map[string]bool{} // the workers that logged a statement past its deadline
	var warnings []string
	for i := 0; i < workers; i++ {
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), busyChildEnv+"="+tdb.Config.FormatDSN(), busyChildEnv+"_NAME=worker-"+strconv.Itoa(i))
		stdout, err := child.StdoutPipe()
		require.NoError(t, err)
		child.Stderr = os.Stderr
		require.NoError(t, child.Start())
		t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var r busyRecord
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					continue
				}
				mu.Lock()
				switch {
				case r.Ran != 0:
					attempts[[2]int64{r.Ran, int64(r.Attempt)}]++
				case r.Deadlocks != nil:
					childDeadlocks[i] = r.Deadlocks
				case strings.Contains(r.Error, "Error 1213"):
					logged[r.Msg]++
				}
				switch {
				case (r.Level == "WARN" || r.Level == "ERROR") && strings.Contains(r.Error, context.DeadlineExceeded.Error()):
					// A statement that ran past its own deadline: the
					// machine was starved (two cores, three workers and
					// the server), not locked. Counted, not failed on.
					timeouts[r.Msg]++
					timedOut["worker-"+strconv.Itoa(i)] = true
				case r.Level == "WARN" || r.Level == "ERROR":
					warnings = append(warnings, r.Level+" "+r.Msg+": "+r.Error)
				}
				mu.Unlock()
			}
		}()
	}
	runs = make([]jobs.NewRun, total)
	for i := range runs {
		runs[i] = jobs.NewRun{Job: "busy", MaxAttempts: 3, Timeout: 10 * time.Second, Delay: time.Duration(i%100) * 10 * time.Millisecond}
	}
	start := time.Now()
	require.NoError(t, j.EnqueueMany(ctx, nil, runs))
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockgen_runs WHERE state <> 'completed'").Scan(&left))
		return left == 0
	}, 45*time.Second, 50*time.Millisecond, "every run completes")
	elapsed := time.Since(start)
	time.Sleep(300 * time.Millisecond) // the children's last counts
	mu.Lock()
	defer mu.Unlock()
	deadlocks := map[string]int{}
	for _, m := range childDeadlocks {
		for k, v := range m {
			deadlocks[k] += v
		}
	}
	t.Logf("%d runs (%d rescued) in %v; deadlocks by statement: %v; logged: %v; statements past their deadline: %v", total+ghosts, ghosts, elapsed.Round(time.Millisecond), deadlocks, logged, timeouts)
	if len(deadlocks) > 0 {
		var typ, name, status string
		if err := tdb.Admin(t).QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err == nil {
			if i := strings.Index(status, "LATEST DETECTED DEADLOCK"); i >= 0 {
				if e := strings.Index(status[i:], "\nTRANSACTIONS\n"); e > 0 {
					var keep []string
					for _, l := range strings.Split(status[i:i+e], "\n") {
						if l == "" || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "Record lock") {
							continue
						}
						keep = append(keep, l)
					}
					t.Logf("%s", strings.Join(keep, "\n"))
				}
			}
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT id, attempt, last_error, history FROM lockgen_runs")
	require.NoError(t, err)
	defer rows.Close()
	seen, want, rescuedLive := 0, 0, 0
	for rows.Next() {
		var id, attempt int64
		var lastError sql.NullString
		var historyJSON []byte
		require.NoError(t, rows.Scan(&id, &attempt, &lastError, &historyJSON))
		seen++
		var history []struct {
			Event   string
			Attempt int64
			Worker  string
		}
		require.NoError(t, json.Unmarshal(historyJSON, &history), "run %d", id)
		// Attempts rescued from a live worker: on a starved machine a
		// claim can run past its deadline after it committed, so the
		// worker never starts the runs it claimed (or a heartbeat can, so
		// the worker's claim lapses); they are rescued once their lease
		// expires. Allowed only from a worker that logged a statement past
		// its deadline; such an attempt ran at most once, the others
		// exactly once.
		rescued := map[int64]bool{}
		fromGhost := false
		for _, e := range history {
			switch {
			case e.Event == "rescued" && e.Worker == "ghost":
				fromGhost = true
			case e.Event == "rescued":
				rescued[e.Attempt] = true
				assert.True(t, timedOut[e.Worker], "run %d attempt %d was rescued from %s, which logged no statement past its deadline", id, e.Attempt, e.Worker)
			}
		}
		if len(rescued) > 0 {
			rescuedLive++
		}
		first, last := int64(1), int64(1+len(rescued))
		switch {
		case ghost(id):
			first, last = 2, last+1
			assert.True(t, fromGhost, "run %d was rescued from the dead worker: %s", id, historyJSON)
		case id%10 == 0 && !rescued[1]:
			last++ // its first attempt ran and failed
		}
		assert.Equal(t, last, attempt, "run %d: %s", id, historyJSON)
		for a := first; a <= attempt; a++ {
			n := attempts[[2]int64{id, a}]
			want += n
			if rescued[a] {
				assert.LessOrEqual(t, n, 1, "run %d attempt %d ran at most once", id, a)
				continue
			}
			assert.Equal(t, 1, n, "run %d attempt %d ran once", id, a)
		}
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, total+ghosts, seen)
	assert.Len(t, attempts, want, "no other attempts ran")
	if rescuedLive > 0 {
		t.Logf("%d runs rescued from a live worker after its statements ran past their deadline", rescuedLive)
	}
	assert.Empty(t, deadlocks, "deadlocks (1213) by statement")
	assert.Empty(t, warnings, "warnings and errors")
}

// deadlockingStore fails the first completions and every rescue with a
// deadlock (1213).
type deadlockingStore struct {
	lockgendb.Store
	completes atomic.Int32
}

var errDeadlockForTest = &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}

func (s *deadlockingStore) RunsComplete(ctx context.Context, claims []driver.Claim) (driver.Completion, error) {
	if s.completes.Add(1) <= 2 {
		return driver.Completion{}, errDeadlockForTest
	}
	return s.Store.RunsComplete(ctx, claims)
}

func (s *deadlockingStore) RunsRescue(context.Context, int) (int64, error) {
	return 0, errDeadlockForTest
}

// jobsLoggingAtDebug is jobsOn with a text log at Debug level, returned.
func jobsLoggingAtDebug(t *testing.T, store driver.JobStore, owner string) (*jobs.Client, *lineWriter) {
	t.Helper()
	out := &lineWriter{}
	client, err := runtime.NewClient(store, runtime.WithOwner(owner),
		runtime.WithLogger(slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	j, err := jobs.NewClient(client, store)
	require.NoError(t, err)
	return j, out
}

// lineWriter collects log lines.
type lineWriter struct {
	mu    sync.Mutex
	lines []string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *lineWriter) matching(parts ...string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, l := range w.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// TestJobsRetriedDeadlocksLogAtDebug: a completion that deadlocks twice and
// then succeeds is logged at Debug only; a rescue that deadlocks every time
// is logged at Debug until the transientTries-th (5th) in a row, then at Warn.
func TestJobsRetriedDeadlocksLogAtDebug(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	store := &deadlockingStore{Store: lockgendb.NewStore(tdb.Open(t))}
	j, out := jobsLoggingAtDebug(t, store, "node")
	startWorker(t, j, jobs.WorkerConfig{RescueEvery: 10 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"noop": {Handle: func(context.Context, *jobs.Run) error { return nil }}}})
	id, err := j.Enqueue(ctx, nil, newRun("noop"))
	require.NoError(t, err)
	waitState(t, j, id, jobs.RunCompleted)
	require.Eventually(t, func() bool { return len(out.matching("level=WARN", "rescuing runs failed")) > 0 }, 10*time.Second, 10*time.Millisecond)

	assert.NotEmpty(t, out.matching("level=DEBUG", "recording outcomes failed", "Error 1213"), "the retried completion")
	assert.Empty(t, out.matching("level=WARN", "recording outcomes failed"), "a completion retried until it succeeded")
	assert.Len(t, out.matching("level=DEBUG", "rescuing runs failed", "Error 1213"), 4, "the first four rescues")
	warned := out.matching("level=WARN", "rescuing runs failed")
	assert.Contains(t, warned[0], "failures_in_a_row=5")
}
