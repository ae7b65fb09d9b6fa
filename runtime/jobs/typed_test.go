package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

type smsArgs struct {
	OrderID int64  `json:"order_id"`
	Phone   string `json:"phone"`
}

// TestRunNodeTypedJobs: typed arguments round-trip through EnqueueArgs and
// EnqueueArgsMany to HandleArgs handlers, on a node working two queues;
// options apply; RunNode refuses a job in an unconfigured queue.
func TestRunNodeTypedJobs(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	j := jobsNode(t, tdb.Open(t), "node")
	var mu sync.Mutex
	got := map[int64]smsArgs{}
	var mails int
	handlers := map[string]jobs.QueuedHandler{
		"send_sms": {Queue: "default", JobHandler: jobs.JobHandler{Handle: jobs.HandleArgs(func(ctx context.Context, run *jobs.Run, a smsArgs) error {
			mu.Lock()
			defer mu.Unlock()
			got[a.OrderID] = a
			return nil
		})}},
		"mail": {Queue: "mail", JobHandler: jobs.JobHandler{Handle: func(context.Context, *jobs.Run) error {
			mu.Lock()
			defer mu.Unlock()
			mails++
			return nil
		}}},
	}
	base := jobs.NewRun{Job: "send_sms", MaxAttempts: 3, Timeout: time.Minute}
	id, err := jobs.EnqueueArgs(ctx, j, nil, base, smsArgs{OrderID: 1, Phone: "+100"}, jobs.WithPriority(5), jobs.RunAt(time.Now().Add(-time.Hour)))
	require.NoError(t, err)
	info, err := j.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 5, info.Priority)
	assert.JSONEq(t, `{"order_id": 1, "phone": "+100"}`, string(info.Args))
	require.NoError(t, jobs.EnqueueArgsMany(ctx, j, nil, base, []smsArgs{{2, "+200"}, {3, "+300"}}))
	_, err = j.Enqueue(ctx, nil, jobs.NewRun{Job: "mail", Queue: "mail", MaxAttempts: 1, Timeout: time.Minute})
	require.NoError(t, err)

	nctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- j.RunNode(nctx, jobs.NodeConfig{
			Queues:    []jobs.QueueConfig{{Name: "default", Concurrency: 4}, {Name: "mail", Concurrency: 1}},
			Handlers:  handlers,
			Retention: []jobs.Retention{{Job: "send_sms", Keep: time.Hour}},
			Worker:    jobs.WorkerConfig{PollMin: 10 * time.Millisecond},
		})
	}()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 && mails == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, smsArgs{3, "+300"}, got[3])

	err = j.RunNode(ctx, jobs.NodeConfig{Queues: []jobs.QueueConfig{{Name: "default"}}, Handlers: handlers})
	assert.ErrorIs(t, err, runtime.ErrInvalid, "mail's queue is not configured")
}
