package jobs_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/tcpproxy"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// logWatch is a slog.Handler that hands the messages containing want to
// seen.
type logWatch struct {
	want string
	seen chan string
}

func (l *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (l *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logWatch) WithGroup(string) slog.Handler            { return l }
func (l *logWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, l.want) {
		select {
		case l.seen <- r.Message:
		default:
		}
	}
	return nil
}

// orphanSetup is a run on its last attempt (max attempts 1, timeout 2 s)
// whose handler, on node "cut" (a pool through proxy, lease 1 s), succeeds
// after cutting the node off with fault: its success cannot be recorded,
// and node "rescuer" (direct pool, rescuing every 50 ms, the same
// handler) rescues the run once its deadline and its timeout have passed.
type orphanSetup struct {
	proxy   *tcpproxy.Proxy
	rescuer *jobs.Client
	id      int64
	ran     atomic.Int32 // the handler's calls, both nodes together
	workers map[string]*atomic.Int32
	stopCut func()
}

func newOrphanSetup(t *testing.T, fault string, log slog.Handler) *orphanSetup {
	t.Helper()
	s := &orphanSetup{workers: map[string]*atomic.Int32{"cut": {}, "rescuer": {}}}
	tdb := testdb.New(t)
	proxy, pdb := testkit.OpenViaProxy(t, tdb)
	s.proxy = proxy
	opts := []runtime.Option{runtime.WithOwner("cut")}
	if log != nil {
		opts = append(opts, runtime.WithLogger(slog.New(log)))
	}
	store := lockgendb.NewStore(pdb)
	c, err := runtime.NewClient(store, opts...)
	require.NoError(t, err)
	cut, err := jobs.NewClient(c, store)
	require.NoError(t, err)
	s.rescuer = jobsNode(t, tdb.Open(t), "rescuer")

	s.id, err = s.rescuer.Enqueue(context.Background(), nil, jobs.NewRun{Job: "once", MaxAttempts: 1, Timeout: 2 * time.Second})
	require.NoError(t, err)
	succeeded := make(chan struct{})
	var once sync.Once
	handler := func(node string) jobs.JobHandler {
		return jobs.JobHandler{Handle: func(ctx context.Context, run *jobs.Run) error {
			s.ran.Add(1)
			s.workers[node].Add(1)
			if node == "cut" {
				// The handler has done its work; the node is cut off
				// before its success can be recorded.
				if fault == "cut" {
					proxy.Cut()
				} else {
					proxy.Blackhole()
				}
				once.Do(func() { close(succeeded) })
			}
			return nil
		}}
	}
	s.stopCut = startWorker(t, cut, jobs.WorkerConfig{Lease: time.Second, RescueEvery: -1, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"once": handler("cut")}})
	select {
	case <-succeeded:
	case <-time.After(20 * time.Second):
		t.Fatal("the cut node never ran the run")
	}
	startWorker(t, s.rescuer, jobs.WorkerConfig{Lease: time.Second, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"once": handler("rescuer")}})
	return s
}

// waitRescued waits until the rescuer has moved the run out of running
// and returns it.
func (s *orphanSetup) waitRescued(t *testing.T) jobs.RunInfo {
	t.Helper()
	var info jobs.RunInfo
	require.Eventually(t, func() bool {
		got, err := s.rescuer.Get(context.Background(), s.id)
		require.NoError(t, err)
		info = got
		return got.State != jobs.RunRunning
	}, 30*time.Second, 20*time.Millisecond, "the run of the cut-off node was never rescued")
	return info
}

// TestJobsLateSuccessOfALastAttemptIsRecorded: a run on its last attempt
// whose handler succeeded just before its node was cut off (or
// blackholed) for longer than lease + timeout is orphaned by another
// node's rescue, not discarded, and not claimed again; once the network
// is back, the cut node's retried completion records the success. The
// handler ran exactly once.
func TestJobsLateSuccessOfALastAttemptIsRecorded(t *testing.T) {
	for _, fault := range []string{"cut", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			s := newOrphanSetup(t, fault, nil)
			info := s.waitRescued(t)
			assert.Equal(t, jobs.RunOrphaned, info.State, "the rescue of a last attempt whose outcome is unknown: %q", info.LastError)
			assert.Contains(t, info.LastError, "worker cut stopped heartbeating during its last attempt")

			s.proxy.Restore()
			info = waitState(t, s.rescuer, s.id, jobs.RunCompleted)
			assert.Equal(t, "cut", info.Worker)
			assert.Equal(t, 1, info.Attempt)
			assert.Equal(t, int32(1), s.ran.Load(), "the handler ran exactly once")
			assert.Zero(t, s.workers["rescuer"].Load(), "the orphaned run was not claimed again")
			stopWithin(t, s.stopCut, 15*time.Second)
		})
	}
}

// TestJobsRetryOfAnOrphanedRun: an operator's Retry of an orphaned run
// makes it due again and a worker runs it, as a new first attempt; the
// late success of the orphaned attempt, arriving after the retry, then
// matches nothing (the documented window: the operator retried before the
// outcome arrived, so the run ran twice), and the cut node says what
// happened instead of claiming that a new attempt goes on.
func TestJobsRetryOfAnOrphanedRun(t *testing.T) {
	log := &logWatch{want: "matched no running or orphaned run", seen: make(chan string, 1)}
	s := newOrphanSetup(t, "cut", log)
	info := s.waitRescued(t)
	require.Equal(t, jobs.RunOrphaned, info.State, "the rescue of a last attempt whose outcome is unknown: %q", info.LastError)

	ok, err := s.rescuer.Retry(context.Background(), s.id)
	require.NoError(t, err)
	require.True(t, ok, "an orphaned run is retried")
	info = waitState(t, s.rescuer, s.id, jobs.RunCompleted)
	assert.Equal(t, "rescuer", info.Worker, "the retried run ran again")
	assert.Equal(t, 1, info.Attempt, "as a new first attempt")
	assert.Equal(t, int32(1), s.workers["rescuer"].Load())

	s.proxy.Restore()
	select {
	case msg := <-log.seen:
		assert.Contains(t, msg, "retried or cancelled by an operator")
	case <-time.After(30 * time.Second):
		t.Fatal("the cut node never reported that its late completion matched nothing")
	}
	info, err = s.rescuer.Get(context.Background(), s.id)
	require.NoError(t, err)
	assert.Equal(t, "rescuer", info.Worker, "the late completion did not touch the retried run")
	assert.Equal(t, int32(2), s.ran.Load(), "once before the orphaning, once after the retry")
	stopWithin(t, s.stopCut, 15*time.Second)
}
