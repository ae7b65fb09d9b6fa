// Package lockgenotel traces lockgen with OpenTelemetry: a span for each
// lock wait and each holding, a producer span for each enqueue and a
// consumer span for each attempt of a job, linked to the span that
// enqueued its run across processes (and languages): the producer's trace
// context travels in the run's headers (the runs table's headers column).
// Spans follow OpenTelemetry's messaging semantic conventions
// (messaging.system "lockgen", the queue as messaging.destination.name,
// the run's ID as messaging.message.id).
//
// It is a module of its own, so that an application that does not trace
// does not link OpenTelemetry. Give one Tracer to the generated package's
// New (or runtime.NewClient):
//
//	locks, err := app.New(db, app.WithTracer(lockgenotel.New()))
//
// It traces locks as a runtime.Tracer and, as a jobs.Middleware that the
// jobs Client finds on the lock client, enqueues and attempts.
package lockgenotel

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/lockgen/lockgen/lockgenotel"

// Attribute keys: the messaging conventions' and lockgen's own.
const (
	MessagingSystem        = attribute.Key("messaging.system")
	MessagingOperationType = attribute.Key("messaging.operation.type")
	MessagingOperationName = attribute.Key("messaging.operation.name")
	MessagingDestination   = attribute.Key("messaging.destination.name")
	MessagingMessageID     = attribute.Key("messaging.message.id")
	MessagingBatchCount    = attribute.Key("messaging.batch.message_count")

	// Job is the job's name; Attempt the attempt's number (1 for the
	// first), MaxAttempts the run's; Outcome how the attempt ended
	// (jobs.Outcome).
	Job         = attribute.Key("lockgen.job")
	Attempt     = attribute.Key("lockgen.run.attempt")
	MaxAttempts = attribute.Key("lockgen.run.max_attempts")
	Outcome     = attribute.Key("lockgen.run.outcome")
	// Lock, Key, Strategy and Token describe a lock wait or holding;
	// Result is how a wait ended (runtime.AcquireResult).
	Lock     = attribute.Key("lockgen.lock")
	Key      = attribute.Key("lockgen.key")
	Strategy = attribute.Key("lockgen.strategy")
	Token    = attribute.Key("lockgen.token")
	Result   = attribute.Key("lockgen.acquire.result")
)

// system is messaging.system's value.
var system = MessagingSystem.String("lockgen")

// Tracer traces lockgen's locks (runtime.Tracer) and jobs
// (jobs.Middleware). It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	parent bool
}

var (
	_ runtime.Tracer  = (*Tracer)(nil)
	_ jobs.Middleware = (*Tracer)(nil)
)

// Option configures New.
type Option func(*Tracer)

// WithTracerProvider sets where the spans go. Default: OpenTelemetry's
// global provider (otel.GetTracerProvider) at New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(t *Tracer) {
		if tp != nil {
			t.tracer = tp.Tracer(ScopeName)
		}
	}
}

// WithPropagator sets how the trace context is written into a run's
// headers and read back. Default: W3C Trace Context and Baggage, whatever
// the global propagator is (the headers must be read by consumers in other
// processes and languages, so they use the standard).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(t *Tracer) {
		if p != nil {
			t.prop = p
		}
	}
}

// WithProducerAsParent makes each attempt's span a child of the span that
// enqueued its run, in the producer's trace, instead of the root of a
// trace of its own with a link to it (the default, as the messaging
// conventions advise: a run may wait long and be attempted many times).
func WithProducerAsParent() Option {
	return func(t *Tracer) { t.parent = true }
}

// New returns a Tracer.
func New(opts ...Option) *Tracer {
	t := &Tracer{
		tracer: otel.GetTracerProvider().Tracer(ScopeName),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	for _, opt := range opts {
		opt(t)
	}
	return t
}

// Enqueue implements jobs.Middleware: a producer span "send <queue>" around
// the insert, whose context it writes into every run's headers.
func (t *Tracer) Enqueue(ctx context.Context, runs []jobs.NewRun, insert func(context.Context) error) error {
	queue, job := "", ""
	if len(runs) > 0 {
		queue, job = runs[0].Queue, runs[0].Job
	}
	for _, r := range runs[1:] {
		if r.Queue != queue {
			queue = ""
		}
		if r.Job != job {
			job = ""
		}
	}
	attrs := []attribute.KeyValue{system, MessagingOperationType.String("send"), MessagingOperationName.String("send")}
	if queue != "" {
		attrs = append(attrs, MessagingDestination.String(queue))
	}
	if job != "" {
		attrs = append(attrs, Job.String(job))
	}
	if len(runs) != 1 {
		attrs = append(attrs, MessagingBatchCount.Int(len(runs)))
	}
	ctx, span := t.tracer.Start(ctx, spanName("send", queue), trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	defer span.End()
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) > 0 {
		for i := range runs {
			if runs[i].Headers == nil {
				runs[i].Headers = make(map[string]string, len(carrier))
			}
			for k, v := range carrier {
				runs[i].Headers[k] = v
			}
		}
	}
	err := insert(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// Work implements jobs.Middleware: a consumer span "process <queue>"
// around the attempt, linked to (or, WithProducerAsParent, a child of) the
// span whose context the run's headers carry. An attempt that failed, was
// discarded, cancelled or whose lease may be lost has an error status; a
// snooze does not.
func (t *Tracer) Work(ctx context.Context, run *jobs.Run, work func(context.Context) error) error {
	producer := t.prop.Extract(context.Background(), propagation.MapCarrier(run.Headers))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(system, MessagingOperationType.String("process"), MessagingOperationName.String("process"),
			MessagingDestination.String(run.Queue), MessagingMessageID.String(strconv.FormatInt(run.ID, 10)),
			Job.String(run.Job), Attempt.Int(run.Attempt), MaxAttempts.Int(run.MaxAttempts)),
	}
	spanCtx := ctx
	if link := trace.SpanContextFromContext(producer); link.IsValid() {
		if t.parent {
			spanCtx = trace.ContextWithRemoteSpanContext(ctx, link)
		} else {
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: link}))
		}
	}
	spanCtx, span := t.tracer.Start(spanCtx, spanName("process", run.Queue), opts...)
	defer span.End()
	err := work(spanCtx)
	outcome := jobs.OutcomeOf(ctx, run, err)
	span.SetAttributes(Outcome.String(string(outcome)))
	switch outcome {
	case jobs.OutcomeCompleted, jobs.OutcomeSnoozed:
	default:
		if err != nil {
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, string(outcome))
	}
	return err
}

// Acquiring implements runtime.Tracer: a span "lockgen.acquire <lock>"
// for the wait, with its result and the token it got.
func (t *Tracer) Acquiring(ctx context.Context, lock, key string, strategy runtime.Strategy) func(int64, error) {
	_, span := t.tracer.Start(ctx, "lockgen.acquire "+lock, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(Lock.String(lock), Key.String(key), Strategy.String(string(strategy))))
	return func(token int64, err error) {
		switch {
		case err == nil:
			span.SetAttributes(Result.String(string(runtime.AcquireAcquired)), Token.Int64(token))
		case errors.Is(err, runtime.ErrNotAcquired):
			span.SetAttributes(Result.String(string(runtime.AcquireBusy)))
		default:
			span.SetAttributes(Result.String(string(runtime.AcquireError)))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Holding implements runtime.Tracer: a span "lockgen.hold <lock>" from
// the acquisition to the release, in error when the lease was lost first;
// the context it returns carries it, so that the work done under the lock
// (With's fn) is its child.
func (t *Tracer) Holding(ctx context.Context, lock, key string, strategy runtime.Strategy, token int64) (context.Context, func(error)) {
	ctx, span := t.tracer.Start(ctx, "lockgen.hold "+lock, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(Lock.String(lock), Key.String(key), Strategy.String(string(strategy)), Token.Int64(token)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// spanName is "<operation> <queue>", or the operation alone when the runs
// go to several queues.
func spanName(operation, queue string) string {
	if queue == "" {
		return operation
	}
	return operation + " " + queue
}
