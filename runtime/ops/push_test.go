package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/genstore"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/ops"
)

// typed declares a job with an argument of every type lockgen.yaml has.
var typed = ops.Job{Name: "typed", Queue: "default", MaxAttempts: 4, Timeout: 30 * time.Second, Priority: 3, Args: []ops.Arg{
	{Name: "id", Type: "int64"}, {Name: "small", Type: "int32"}, {Name: "name", Type: "string"}, {Name: "urgent", Type: "bool"},
	{Name: "score", Type: "float64"}, {Name: "due", Type: "time"}, {Name: "wait", Type: "duration"},
	{Name: "tags", Type: "[]string"}, {Name: "raw", Type: "json"},
}}

type typedArgs struct {
	ID     int64           `json:"id"`
	Small  int32           `json:"small"`
	Name   string          `json:"name"`
	Urgent bool            `json:"urgent"`
	Score  float64         `json:"score"`
	Due    time.Time       `json:"due"`
	Wait   time.Duration   `json:"wait"`
	Tags   []string        `json:"tags"`
	Raw    json.RawMessage `json:"raw"`
}

// TestPushedRunsAreWorkedByGoWorkers: a run pushed with JSON arguments (a
// duration as a string) is enqueued with the job's declared queue,
// attempts, timeout and priority, and a Go worker's handler decodes its
// arguments into the job's Go type.
func TestPushedRunsAreWorkedByGoWorkers(t *testing.T) {
	cfg := deployment
	cfg.Jobs = append([]ops.Job{typed}, cfg.Jobs...)
	f := newFixture(t, cfg)
	ctx := context.Background()
	pushed, err := f.ops.Push(ctx, "typed", ops.Push{Args: json.RawMessage(`{"id": 9007199254740993, "small": -5, "name": "ünï", "urgent": true,
		"score": 2.5, "due": "2026-11-27T10:00:00.5Z", "wait": "1m30s", "tags": ["a", "b"], "raw": {"any": [1, null]}}`)})
	require.NoError(t, err)
	assert.False(t, pushed.Existing)
	r, err := f.ops.Run(ctx, pushed.ID)
	require.NoError(t, err)
	assert.Equal(t, "default", r.Queue)
	assert.Equal(t, 4, r.MaxAttempts)
	assert.Equal(t, 3, r.Priority)
	assert.Equal(t, int64(30_000), r.TimeoutMS)

	var mu sync.Mutex
	var got typedArgs
	done := make(chan struct{})
	w, err := f.jobs.NewWorker(jobs.WorkerConfig{Queue: "default", PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"typed": {Handle: func(ctx context.Context, run *jobs.Run) error {
			mu.Lock()
			defer mu.Unlock()
			defer close(done)
			return json.Unmarshal(run.Args, &got)
		}}}})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no worker handled the pushed run")
	}
	require.Eventually(t, func() bool {
		r, err := f.ops.Run(ctx, pushed.ID)
		return err == nil && r.State == "completed"
	}, 10*time.Second, 20*time.Millisecond, "the handler's success is recorded")
	stop()
	require.NoError(t, <-stopped)
	mu.Lock()
	defer mu.Unlock()
	assert.JSONEq(t, `{"any": [1, null]}`, string(got.Raw))
	got.Raw = nil
	assert.Equal(t, typedArgs{ID: 9007199254740993, Small: -5, Name: "ünï", Urgent: true, Score: 2.5,
		Due: time.Date(2026, 11, 27, 10, 0, 0, 5e8, time.UTC), Wait: 90 * time.Second, Tags: []string{"a", "b"}}, got)
}

// TestPushUniqueKeyDelayAndOverrides: a unique key returns the unfinished
// run that has it; delay and run_at make a run due later by the database
// clock; priority and max attempts override the job's.
func TestPushUniqueKeyDelayAndOverrides(t *testing.T) {
	f := newFixture(t, deployment)
	ctx := context.Background()
	first, err := f.ops.Push(ctx, "test", ops.Push{Args: json.RawMessage(`{}`), UniqueKey: "order-7"})
	require.NoError(t, err)
	again, err := f.ops.Push(ctx, "test", ops.Push{UniqueKey: "order-7", Delay: "1h"})
	require.NoError(t, err)
	assert.Equal(t, ops.Pushed{ID: first.ID, Existing: true}, again)

	prio, attempts := -7, 1
	later, err := f.ops.Push(ctx, "test", ops.Push{Delay: "1h", Priority: &prio, MaxAttempts: &attempts})
	require.NoError(t, err)
	r, err := f.ops.Run(ctx, later.ID)
	require.NoError(t, err)
	assert.Equal(t, -7, r.Priority)
	assert.Equal(t, 1, r.MaxAttempts)
	assert.WithinDuration(t, time.Now().Add(time.Hour), r.RunAt, time.Minute)

	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	dated, err := f.ops.Push(ctx, "test", ops.Push{RunAt: &at})
	require.NoError(t, err)
	r, err = f.ops.Run(ctx, dated.ID)
	require.NoError(t, err)
	assert.True(t, at.Equal(r.RunAt), "run_at %v, want %v", r.RunAt, at)
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	early, err := f.ops.Push(ctx, "test", ops.Push{RunAt: &past})
	require.NoError(t, err)
	r, err = f.ops.Run(ctx, early.ID)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), r.RunAt, time.Minute, "a past run_at is due now")

	qs, err := f.ops.Queues(ctx)
	require.NoError(t, err)
	assert.Equal(t, ops.Counts{Due: 2, Scheduled: 2, Exact: true}, qs[0].Counts)
}

// TestPushRefusesBadInputNamingTheField: each bad push names its field
// (args.<name> for an argument) and writes nothing.
func TestPushRefusesBadInputNamingTheField(t *testing.T) {
	cfg := deployment
	cfg.Jobs = append([]ops.Job{typed}, cfg.Jobs...)
	f := newFixture(t, cfg)
	ctx := context.Background()
	two, zero := 200, 0
	at := time.Now()
	farAhead := time.Now().Add(11 * 365 * 24 * time.Hour)
	for _, c := range []struct {
		job   string
		push  ops.Push
		field string
	}{
		{"nope", ops.Push{}, "job"},
		{"typed", ops.Push{Args: json.RawMessage(`[1, 2]`)}, "args"},
		{"typed", ops.Push{Args: json.RawMessage(`{"id": 1`)}, "args"},
		{"typed", ops.Push{Args: json.RawMessage(`"id"`)}, "args"},
		{"typed", ops.Push{Args: json.RawMessage(`{"idd": 1}`)}, "args.idd"},
		{"typed", ops.Push{Args: json.RawMessage(`{"id": "1"}`)}, "args.id"},
		{"typed", ops.Push{Args: json.RawMessage(`{"id": 1.5}`)}, "args.id"},
		{"typed", ops.Push{Args: json.RawMessage(`{"id": 9223372036854775808}`)}, "args.id"},
		{"typed", ops.Push{Args: json.RawMessage(`{"small": 2147483648}`)}, "args.small"},
		{"typed", ops.Push{Args: json.RawMessage(`{"name": 5}`)}, "args.name"},
		{"typed", ops.Push{Args: json.RawMessage(`{"urgent": "yes"}`)}, "args.urgent"},
		{"typed", ops.Push{Args: json.RawMessage(`{"score": "x"}`)}, "args.score"},
		{"typed", ops.Push{Args: json.RawMessage(`{"due": "tomorrow"}`)}, "args.due"},
		{"typed", ops.Push{Args: json.RawMessage(`{"wait": "soon"}`)}, "args.wait"},
		{"typed", ops.Push{Args: json.RawMessage(`{"wait": 1.5}`)}, "args.wait"},
		{"typed", ops.Push{Args: json.RawMessage(`{"tags": ["a", 1]}`)}, "args.tags"},
		{"typed", ops.Push{Args: json.RawMessage(`{"name": "'); DROP TABLE lockgen_runs; --"}`), Delay: "-1s"}, "delay"},
		{"typed", ops.Push{Delay: "100000h"}, "delay"},
		{"typed", ops.Push{Delay: "soon"}, "delay"},
		{"typed", ops.Push{Delay: "1s", RunAt: &at}, "delay"},
		{"typed", ops.Push{RunAt: &farAhead}, "run_at"},
		{"typed", ops.Push{Priority: &two}, "priority"},
		{"typed", ops.Push{MaxAttempts: &zero}, "max_attempts"},
		{"typed", ops.Push{UniqueKey: "k "}, "unique_key"},
		{"typed", ops.Push{UniqueKey: strings.Repeat("k", 192)}, "unique_key"},
		{"typed", ops.Push{Headers: map[string]string{"": "x"}}, "headers"},
		{"typed", ops.Push{Headers: map[string]string{"traceparent": "\xff"}}, "headers"},
		{"typed", ops.Push{Headers: map[string]string{"big": strings.Repeat("x", 4097)}}, "headers"},
		{"typed", ops.Push{Headers: manyHeaders(17)}, "headers"},
	} {
		_, err := f.ops.Push(ctx, c.job, c.push)
		requireCode(t, err, ops.CodeInvalid, c.field)
	}
	page, err := f.ops.Runs(ctx, ops.RunsFilter{})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "a refused push wrote a run")
	// An SQL-looking string is only a string.
	ok, err := f.ops.Push(ctx, "typed", ops.Push{Args: json.RawMessage(`{"name": "'); DROP TABLE lockgen_runs; --"}`)})
	require.NoError(t, err)
	r, err := f.ops.Run(ctx, ok.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name": "'); DROP TABLE lockgen_runs; --"}`, string(r.Args))
}

// TestGeneratedOpsConfigDescribesThePackage: the OpsConfig that lockgen
// generates carries what Push and Status need: the job's queue, arguments
// and defaults, and the locks.
func TestGeneratedOpsConfigDescribesThePackage(t *testing.T) {
	f := newFixture(t, genstore.OpsConfig())
	ctx := context.Background()
	pushed, err := f.ops.Push(ctx, "test", ops.Push{Args: json.RawMessage(`{"n": 3}`)})
	require.NoError(t, err)
	r, err := f.ops.Run(ctx, pushed.ID)
	require.NoError(t, err)
	assert.Equal(t, "default", r.Queue)
	assert.Equal(t, 25, r.MaxAttempts)
	assert.Equal(t, int64(10*60*1000), r.TimeoutMS)
	_, err = f.ops.Push(ctx, "test", ops.Push{Args: json.RawMessage(`{"n": "three"}`)})
	requireCode(t, err, ops.CodeInvalid, "args.n")
	st, err := f.ops.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Locks, 1)
	assert.Equal(t, "test", st.Locks[0].Name)
}

// TestPushManyIsAllOrNone: a batch push enqueues every run in the order
// given, a unique key repeated within the batch or held by an unfinished
// run answers that run; a batch with one bad run is refused naming it
// (runs[i].field) and writes nothing; an empty or oversized batch is
// refused.
func TestPushManyIsAllOrNone(t *testing.T) {
	cfg := deployment
	cfg.Jobs = append(slices.Clone(cfg.Jobs), typed)
	f := newFixture(t, cfg)
	ctx := context.Background()
	held, err := f.ops.Push(ctx, "typed", ops.Push{UniqueKey: "held"})
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, f.db.QueryRow("SELECT COUNT(*) FROM lockgen_runs").Scan(&n))
		return n
	}
	before := count()
	pushed, err := f.ops.PushMany(ctx, "typed", []ops.Push{
		{Args: json.RawMessage(`{"id": 1}`)}, {Args: json.RawMessage(`{"id": 2}`), UniqueKey: "k"},
		{Args: json.RawMessage(`{"id": 3}`), UniqueKey: "k"}, {UniqueKey: "held"},
	})
	require.NoError(t, err)
	require.Len(t, pushed, 4)
	assert.False(t, pushed[0].Existing)
	assert.False(t, pushed[1].Existing)
	assert.Equal(t, ops.Pushed{ID: pushed[1].ID, Existing: true}, pushed[2], "the same key earlier in the batch")
	assert.Equal(t, ops.Pushed{ID: held.ID, Existing: true}, pushed[3], "the key of an unfinished run")
	assert.Less(t, pushed[0].ID, pushed[1].ID, "in the order given")
	assert.Equal(t, before+2, count())
	r, err := f.ops.Run(ctx, pushed[1].ID)
	require.NoError(t, err)
	assert.Contains(t, string(r.Args), `"id":2`)

	before = count()
	_, err = f.ops.PushMany(ctx, "typed", []ops.Push{{Args: json.RawMessage(`{"id": 4}`)}, {Args: json.RawMessage(`{"id": "five"}`)}})
	requireCode(t, err, ops.CodeInvalid, "runs[1].args.id")
	assert.Equal(t, before, count(), "nothing written")
	_, err = f.ops.PushMany(ctx, "typed", nil)
	requireCode(t, err, ops.CodeInvalid, "runs")
	_, err = f.ops.PushMany(ctx, "typed", make([]ops.Push, ops.MaxPushBatch+1))
	requireCode(t, err, ops.CodeInvalid, "runs")
	_, err = f.ops.PushMany(ctx, "nope", []ops.Push{{}})
	requireCode(t, err, ops.CodeInvalid, "job")
	assert.Equal(t, before, count())
}

// manyHeaders returns n headers.
func manyHeaders(n int) map[string]string {
	h := map[string]string{}
	for i := range n {
		h[fmt.Sprintf("h%d", i)] = "v"
	}
	return h
}
