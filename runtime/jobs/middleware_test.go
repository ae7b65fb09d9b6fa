package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// tagging is a Middleware that records what it wraps, in order, and tags
// every run it enqueues with its name; as a runtime.Tracer too, the job
// client finds it on the lock client.
type tagging struct {
	runtime.NopTracer
	name  string
	mu    *sync.Mutex
	calls *[]string
	// bad, when set, is a header value the middleware sets that no run may
	// carry.
	bad string
}

func (m tagging) record(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*m.calls = append(*m.calls, s)
}

func (m tagging) Enqueue(ctx context.Context, runs []jobs.NewRun, insert func(context.Context) error) error {
	m.record(m.name + " enqueue")
	for i := range runs {
		if runs[i].Headers == nil {
			runs[i].Headers = map[string]string{}
		}
		runs[i].Headers[m.name] = "1" + m.bad
	}
	err := insert(ctx)
	m.record(m.name + " enqueued")
	return err
}

func (m tagging) Work(ctx context.Context, run *jobs.Run, work func(context.Context) error) error {
	m.record(m.name + " work " + run.Job)
	err := work(ctx)
	m.record(m.name + " worked " + string(jobs.OutcomeOf(ctx, run, err)))
	return err
}

// TestMiddlewareWrapsEnqueuesAndAttempts: the lock client's Tracer, when
// it is a Middleware, wraps every enqueue and attempt, outside the
// middleware of WithMiddleware, outermost first; the headers it sets
// travel with the run to the attempt, and headers no run may carry fail
// the enqueue with ErrInvalid before anything is written.
func TestMiddlewareWrapsEnqueuesAndAttempts(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t).Open(t)
	store := lockgendb.NewStore(db)
	var mu sync.Mutex
	var calls []string
	outer, inner := tagging{name: "outer", mu: &mu, calls: &calls}, tagging{name: "inner", mu: &mu, calls: &calls}
	c, err := runtime.NewClient(store, runtime.WithOwner("node"), runtime.WithTracer(outer))
	require.NoError(t, err)
	j, err := jobs.NewClient(c, store, jobs.WithMiddleware(inner))
	require.NoError(t, err)

	mine := newRun("ok")
	mine.Headers = map[string]string{"x-tenant": "7"}
	id, err := j.Enqueue(ctx, nil, mine)
	require.NoError(t, err)
	assert.Equal(t, driver.Headers{"x-tenant": "7"}, mine.Headers, "the caller's map is not changed")
	require.NoError(t, j.EnqueueMany(ctx, nil, []jobs.NewRun{newRun("fail")}))
	mu.Lock()
	assert.Equal(t, []string{"outer enqueue", "inner enqueue", "inner enqueued", "outer enqueued",
		"outer enqueue", "inner enqueue", "inner enqueued", "outer enqueued"}, calls)
	calls = nil
	mu.Unlock()

	headers := make(chan map[string]string, 4)
	startWorker(t, j, jobs.WorkerConfig{PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{
			"ok":   {Handle: func(_ context.Context, r *jobs.Run) error { headers <- r.Headers; return nil }},
			"fail": {Handle: func(context.Context, *jobs.Run) error { return jobs.Permanent(errors.New("no")) }},
		}})
	select {
	case h := <-headers:
		assert.Equal(t, map[string]string{"x-tenant": "7", "outer": "1", "inner": "1"}, h)
	case <-time.After(20 * time.Second):
		t.Fatal("run not worked")
	}
	waitState(t, j, id, jobs.RunCompleted)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == 8
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	byJob := map[string][]string{}
	for _, c := range calls {
		job := "ok"
		if strings.HasSuffix(c, "fail") || strings.HasSuffix(c, "discarded") {
			job = "fail"
		}
		byJob[job] = append(byJob[job], c)
	}
	mu.Unlock()
	assert.Equal(t, []string{"outer work ok", "inner work ok", "inner worked completed", "outer worked completed"}, byJob["ok"])
	assert.Equal(t, []string{"outer work fail", "inner work fail", "inner worked discarded", "outer worked discarded"}, byJob["fail"])

	bad := tagging{name: "bad", mu: &mu, calls: &calls, bad: "\xff"}
	jb, err := jobs.NewClient(c, store, jobs.WithMiddleware(bad))
	require.NoError(t, err)
	_, err = jb.Enqueue(ctx, nil, newRun("ok"))
	require.ErrorIs(t, err, runtime.ErrInvalid)
	require.ErrorIs(t, jb.EnqueueMany(ctx, nil, []jobs.NewRun{newRun("ok"), newRun("ok")}), runtime.ErrInvalid)
	tooMany := newRun("ok")
	tooMany.Headers = map[string]string{}
	for i := range 17 {
		tooMany.Headers[string(rune('a'+i))] = "v"
	}
	_, err = j.Enqueue(ctx, nil, tooMany)
	require.ErrorIs(t, err, runtime.ErrInvalid)
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs").Scan(&n))
	assert.Equal(t, 2, n, "no refused run was written")
}
