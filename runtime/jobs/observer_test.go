package jobs_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// jobEvents records a jobs.Observer's events; as a runtime.Observer too,
// it is found by the job client on the lock client.
type jobEvents struct {
	runtime.NopObserver
	mu       sync.Mutex
	enqueued map[string]int
	claimed  int
	started  map[int64]time.Duration
	outcomes map[string][]jobs.Outcome
	rescued  int
}

func newJobEvents() *jobEvents {
	return &jobEvents{enqueued: map[string]int{}, started: map[int64]time.Duration{}, outcomes: map[string][]jobs.Outcome{}}
}

func (e *jobEvents) Enqueued(job, queue string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.enqueued[job+"@"+queue] += n
}

func (e *jobEvents) Claimed(_ string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.claimed += n
}

func (e *jobEvents) Started(job, _ string, attempt int, lateness time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started[int64(len(e.started))] = lateness
}

func (e *jobEvents) Finished(job, _ string, _ int, outcome jobs.Outcome, _ time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.outcomes[job] = append(e.outcomes[job], outcome)
}

func (e *jobEvents) Rescued(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rescued += n
}

func (e *jobEvents) outcomesOf(job string) []jobs.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]jobs.Outcome(nil), e.outcomes[job]...)
}

// TestObserverSeesEveryStepOfARun: the observer of the lock client hears
// the job client's enqueues, claims, attempts with their outcomes and
// rescues, from real workers; a handler that returns after its timeout is
// logged at WARN with its overrun.
func TestObserverSeesEveryStepOfARun(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t).Open(t)
	store := lockgendb.NewStore(db)
	events := newJobEvents()
	warnings := make(chan slog.Record, 64)
	c, err := runtime.NewClient(store, runtime.WithOwner("node"), runtime.WithObserver(events), runtime.WithLogger(slog.New(recordHandler{warnings})))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store)
	require.NoError(t, err)

	// A run claimed by a worker that stopped: the rescuer's.
	stale, err := j.Enqueue(ctx, nil, newRun("stale"))
	require.NoError(t, err)
	gone, err := store.RunsClaim(ctx, jobs.DefaultQueue, "gone", 1, 50*time.Millisecond, nil)
	require.NoError(t, err)
	require.Len(t, gone, 1)
	_, err = j.Enqueue(ctx, nil, newRun("ok"))
	require.NoError(t, err)
	require.NoError(t, j.EnqueueMany(ctx, nil, []jobs.NewRun{newRun("ok"), newRun("bad"), newRun("snooze")}))
	slow := newRun("slow")
	slow.Timeout, slow.MaxAttempts = 100*time.Millisecond, 1
	_, err = j.Enqueue(ctx, nil, slow)
	require.NoError(t, err)

	snoozed := false
	startWorker(t, j, jobs.WorkerConfig{PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond, Lease: 2 * time.Second,
		Handlers: map[string]jobs.JobHandler{
			"ok":  {Handle: func(context.Context, *jobs.Run) error { return nil }},
			"bad": {Handle: func(context.Context, *jobs.Run) error { return jobs.Permanent(assert.AnError) }},
			"snooze": {Handle: func(context.Context, *jobs.Run) error {
				if !snoozed {
					snoozed = true
					return jobs.Snooze(10 * time.Millisecond)
				}
				return nil
			}},
			"slow":  {Handle: func(context.Context, *jobs.Run) error { time.Sleep(300 * time.Millisecond); return nil }},
			"stale": {Handle: func(context.Context, *jobs.Run) error { return nil }},
		}})
	waitState(t, j, stale, jobs.RunCompleted)
	require.Eventually(t, func() bool {
		return len(events.outcomesOf("snooze")) == 2 && len(events.outcomesOf("slow")) == 1 && len(events.outcomesOf("ok")) == 2
	}, 20*time.Second, 10*time.Millisecond)

	events.mu.Lock()
	assert.Equal(t, map[string]int{"ok@default": 2, "bad@default": 1, "snooze@default": 1, "slow@default": 1, "stale@default": 1}, events.enqueued)
	assert.GreaterOrEqual(t, events.claimed, 6, "every run's attempts were claimed")
	assert.Equal(t, 1, events.rescued, "the stopped worker's run")
	for _, lateness := range events.started {
		assert.Less(t, lateness, 20*time.Second)
	}
	events.mu.Unlock()
	assert.Equal(t, []jobs.Outcome{jobs.OutcomeCompleted, jobs.OutcomeCompleted}, events.outcomesOf("ok"))
	assert.Equal(t, []jobs.Outcome{jobs.OutcomeDiscarded}, events.outcomesOf("bad"))
	assert.Equal(t, []jobs.Outcome{jobs.OutcomeSnoozed, jobs.OutcomeCompleted}, events.outcomesOf("snooze"))
	assert.Equal(t, []jobs.Outcome{jobs.OutcomeCompleted}, events.outcomesOf("slow"), "returned nil, late")

	for {
		select {
		case rec := <-warnings:
			attrs := map[string]string{}
			rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			if attrs["job"] == "slow" && rec.Level == slog.LevelWarn {
				assert.Contains(t, rec.Message, "returned after its timeout")
				overrun, err := time.ParseDuration(attrs["overrun"])
				require.NoError(t, err)
				assert.Greater(t, overrun, 100*time.Millisecond)
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no WARN of the handler that overran its timeout")
		}
	}
}
