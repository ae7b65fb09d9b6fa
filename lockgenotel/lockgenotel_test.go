package lockgenotel_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgen/lockgen/lockgenotel"
	"github.com/lockgen/lockgen/lockgenotel/internal/traced/app"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/lockgentest"
)

// testDB is a database of the test's own with the traced deployment's
// migrations, on LOCKGEN_TEST_DSN's server (MariaDB at 127.0.0.1:3306 by
// default; `make test` runs this package against MySQL too).
func testDB(t *testing.T) *sql.DB {
	t.Helper()
	admin := os.Getenv("LOCKGEN_TEST_DSN")
	if admin == "" {
		admin = "root@tcp(127.0.0.1:3306)/test"
	}
	db, err := sql.Open("mysql", lockgentest.NewDatabase(t, admin, "internal/traced/migrations"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// node is one node of the deployment, with spans of its own: a process
// of its own as far as tracing can tell, since nothing but the database
// joins two nodes.
type node struct {
	locks *app.Locks
	spans *tracetest.InMemoryExporter
}

func newNode(t *testing.T, db *sql.DB, opts ...lockgenotel.Option) node {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	locks, err := app.New(db, app.WithTracer(lockgenotel.New(append([]lockgenotel.Option{lockgenotel.WithTracerProvider(tp)}, opts...)...)))
	require.NoError(t, err)
	return node{locks: locks, spans: spans}
}

// named returns the ended spans called name.
func (n node) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range n.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// receipts handles send_receipt: it fails the first attempt of every run,
// and records the span each attempt's handler ran under.
type receipts struct {
	attempts atomic.Int32
	spans    chan trace.SpanContext
}

func (h *receipts) SendReceipt(ctx context.Context, run *app.Run, _ app.SendReceiptArgs) error {
	h.attempts.Add(1)
	h.spans <- trace.SpanContextFromContext(ctx)
	if run.Attempt == 1 {
		return errors.New("smtp: 451 try again later")
	}
	return nil
}

// work runs node's workers until want attempts have run, and returns the
// span contexts the handlers saw.
func work(t *testing.T, n node, want int) []trace.SpanContext {
	t.Helper()
	h := &receipts{spans: make(chan trace.SpanContext, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- n.locks.RunJobs(ctx, h, func(c *jobs.WorkerConfig) { c.PollMin, c.PollMax = 10*time.Millisecond, 50*time.Millisecond })
	}()
	var seen []trace.SpanContext
	for len(seen) < want {
		select {
		case sc := <-h.spans:
			seen = append(seen, sc)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d attempts ran", len(seen), want)
		}
	}
	// The attempts' outcomes are recorded after their spans end; wait
	// for the last to land so that the worker stops cleanly.
	require.Eventually(t, func() bool { return len(n.named("process mail")) >= want }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	return seen
}

// TestAttemptSpansLinkToTheEnqueueAcrossNodes: a producer span around an
// enqueue on one node, and on another node (its own tracer provider, so
// only the runs table joins them) a consumer span per attempt, each the
// root of its trace with a link to the producer span, the handler running
// under it; a failed attempt is in error, the retry that succeeds is not.
func TestAttemptSpansLinkToTheEnqueueAcrossNodes(t *testing.T) {
	db := testDB(t)
	producer, consumer := newNode(t, db), newNode(t, db)
	ctx := context.Background()

	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(producer.spans))
	ctx, checkout := tp.Tracer("shop").Start(ctx, "checkout")
	id, err := producer.locks.EnqueueSendReceipt(ctx, app.SendReceiptArgs{OrderID: 7})
	require.NoError(t, err)
	checkout.End()

	sends := producer.named("send mail")
	require.Len(t, sends, 1)
	send := sends[0]
	assert.Equal(t, trace.SpanKindProducer, send.SpanKind)
	assert.Equal(t, checkout.SpanContext().SpanID(), send.Parent.SpanID(), "the enqueue's span is a child of the caller's")
	assert.Equal(t, "lockgen", attr(send, lockgenotel.MessagingSystem).AsString())
	assert.Equal(t, "mail", attr(send, lockgenotel.MessagingDestination).AsString())
	assert.Equal(t, "send_receipt", attr(send, lockgenotel.Job).AsString())

	info, err := producer.locks.JobRun(ctx, id)
	require.NoError(t, err)
	assert.Contains(t, info.Headers["traceparent"], send.SpanContext.TraceID().String(), "the run's row carries the producer's trace context")
	assert.Contains(t, info.Headers["traceparent"], send.SpanContext.SpanID().String())

	seen := work(t, consumer, 2)
	processes := consumer.named("process mail")
	require.Len(t, processes, 2)
	assert.Empty(t, consumer.named("send mail"), "the consumer enqueued nothing")
	for i, p := range processes {
		assert.Equal(t, trace.SpanKindConsumer, p.SpanKind)
		assert.False(t, p.Parent.IsValid(), "attempt %d: a root span of its own", i+1)
		require.Len(t, p.Links, 1, "attempt %d", i+1)
		assert.Equal(t, send.SpanContext.TraceID(), p.Links[0].SpanContext.TraceID(), "attempt %d links to the enqueue", i+1)
		assert.Equal(t, send.SpanContext.SpanID(), p.Links[0].SpanContext.SpanID(), "attempt %d links to the enqueue", i+1)
		assert.Equal(t, p.SpanContext.SpanID(), seen[i].SpanID(), "attempt %d's handler runs under its span", i+1)
		assert.Equal(t, int64(i+1), attr(p, lockgenotel.Attempt).AsInt64())
		assert.Equal(t, "mail", attr(p, lockgenotel.MessagingDestination).AsString())
		assert.Equal(t, "send_receipt", attr(p, lockgenotel.Job).AsString())
		msgID, err := strconv.ParseInt(attr(p, lockgenotel.MessagingMessageID).AsString(), 10, 64)
		require.NoError(t, err, "attempt %d's message ID is the run ID", i+1)
		assert.Equal(t, id, msgID)
	}
	assert.Equal(t, "failed", attr(processes[0], lockgenotel.Outcome).AsString())
	assert.Equal(t, codes.Error, processes[0].Status.Code)
	require.NotEmpty(t, processes[0].Events, "the failure is recorded on the span")
	assert.Equal(t, "completed", attr(processes[1], lockgenotel.Outcome).AsString())
	assert.NotEqual(t, codes.Error, processes[1].Status.Code)
}

// TestProducerAsParent: with WithProducerAsParent, each attempt's span is
// a child of the enqueue's span, in its trace.
func TestProducerAsParent(t *testing.T) {
	db := testDB(t)
	producer, consumer := newNode(t, db), newNode(t, db, lockgenotel.WithProducerAsParent())
	_, err := producer.locks.EnqueueSendReceipt(context.Background(), app.SendReceiptArgs{OrderID: 8})
	require.NoError(t, err)
	send := producer.named("send mail")[0]
	work(t, consumer, 2)
	for _, p := range consumer.named("process mail") {
		assert.Equal(t, send.SpanContext.TraceID(), p.SpanContext.TraceID())
		assert.Equal(t, send.SpanContext.SpanID(), p.Parent.SpanID())
		assert.True(t, p.Parent.IsRemote())
		assert.Empty(t, p.Links)
	}
}

// TestEnqueueManyIsOneSpan: a batch is one producer span with its size,
// and every run of it carries that span's context.
func TestEnqueueManyIsOneSpan(t *testing.T) {
	db := testDB(t)
	producer := newNode(t, db)
	ctx := context.Background()
	require.NoError(t, producer.locks.EnqueueSendReceiptMany(ctx, []app.SendReceiptArgs{{OrderID: 1}, {OrderID: 2}, {OrderID: 3}}))
	sends := producer.named("send mail")
	require.Len(t, sends, 1)
	assert.Equal(t, int64(3), attr(sends[0], lockgenotel.MessagingBatchCount).AsInt64())
	rows, err := db.QueryContext(ctx, "SELECT JSON_UNQUOTE(JSON_EXTRACT(headers, '$.traceparent')) FROM otel_runs")
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var tp string
		require.NoError(t, rows.Scan(&tp))
		assert.True(t, strings.HasPrefix(tp, "00-"+sends[0].SpanContext.TraceID().String()+"-"+sends[0].SpanContext.SpanID().String()), tp)
		n++
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, 3, n)
}

// TestLockSpans: a wait span with its result and token and a holding span
// that the work under the lock runs in, for a lease and a session lock; a
// busy Try is a wait span that is not an error.
func TestLockSpans(t *testing.T) {
	db := testDB(t)
	a, b := newNode(t, db), newNode(t, db)
	ctx := context.Background()
	for _, c := range []struct {
		lock, strategy string
		with           func(context.Context, func(context.Context, *app.Lease) error) error
		try            func(context.Context) (*app.Lease, error)
	}{
		{"master", "lease", a.locks.WithMasterLock, b.locks.TryMasterLock},
		{"report", "session", a.locks.WithReportLock, b.locks.TryReportLock},
	} {
		t.Run(c.lock, func(t *testing.T) {
			var inside trace.SpanContext
			var token int64
			err := c.with(ctx, func(ctx context.Context, lease *app.Lease) error {
				inside, token = trace.SpanContextFromContext(ctx), lease.Token()
				_, err := c.try(ctx)
				assert.ErrorIs(t, err, runtime.ErrNotAcquired, "the other node finds it busy")
				return nil
			})
			require.NoError(t, err)

			acquires := a.named("lockgen.acquire " + c.lock)
			require.Len(t, acquires, 1)
			assert.Equal(t, "acquired", attr(acquires[0], lockgenotel.Result).AsString())
			assert.Equal(t, token, attr(acquires[0], lockgenotel.Token).AsInt64())
			assert.Equal(t, c.strategy, attr(acquires[0], lockgenotel.Strategy).AsString())
			holds := a.named("lockgen.hold " + c.lock)
			require.Len(t, holds, 1)
			assert.Equal(t, token, attr(holds[0], lockgenotel.Token).AsInt64())
			assert.Equal(t, holds[0].SpanContext.SpanID(), inside.SpanID(), "the work under the lock runs in the holding's span")
			assert.NotEqual(t, codes.Error, holds[0].Status.Code)
			assert.False(t, holds[0].EndTime.Before(acquires[0].EndTime))

			busy := b.named("lockgen.acquire " + c.lock)
			require.Len(t, busy, 1)
			assert.Equal(t, "busy", attr(busy[0], lockgenotel.Result).AsString())
			assert.NotEqual(t, codes.Error, busy[0].Status.Code, "a busy lock is no error")
			assert.Equal(t, inside.SpanID(), busy[0].Parent.SpanID(), "the Try inside fn is a child of the holding")
			assert.Empty(t, b.named("lockgen.hold "+c.lock))
		})
	}
}
