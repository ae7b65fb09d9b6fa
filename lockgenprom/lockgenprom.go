// Package lockgenprom exports the lockgen runtime's metrics to Prometheus.
//
// It lives in a Go module of its own, github.com/lockgen/lockgen/lockgenprom,
// so that applications which do not use Prometheus never pull
// github.com/prometheus/client_golang into their module graph: the runtime
// only defines the small [runtime.Observer] interface, and this package
// implements it.
//
// An [Observer] is both a [runtime.Observer] and a [prometheus.Collector].
// Register it on a registry and hand it to the runtime with the
// WithObserver option of the generated package (runtime.WithObserver, which
// it forwards to):
//
//	obs := lockgenprom.New()
//	prometheus.MustRegister(obs)
//	l, err := locks.New(db, locks.WithObserver(obs))
//
// One Observer can serve several clients: their events add up, unless each
// gets its own Observer with distinguishing const labels (WithConstLabels).
//
// With the default namespace "lockgen" it exports:
//
//	lockgen_acquisitions_total{lock,strategy,result}   counter
//	lockgen_acquire_duration_seconds{lock,strategy}    histogram
//	lockgen_hold_duration_seconds{lock,strategy}       histogram
//	lockgen_renew_failures_total{lock,strategy}        counter
//	lockgen_leases_lost_total{lock,strategy}           counter
//	lockgen_leader{lock}                               gauge, 1 or 0
//	lockgen_held_leases{lock,strategy}                 gauge
//
// and for the jobs (it is a [jobs.Observer] too, which the job client
// finds on the lock client's observer):
//
//	lockgen_jobs_enqueued_total{job,queue}             counter
//	lockgen_jobs_claimed_total{queue}                  counter
//	lockgen_job_attempts_total{job,queue,outcome}      counter
//	lockgen_job_duration_seconds{job,queue,outcome}    histogram
//	lockgen_job_lateness_seconds{job,queue}            histogram, start − due
//	lockgen_jobs_rescued_total                         counter
//
// The queues' depth by state is a collector of its own, [QueueDepth], read
// from the database on the leading node only ([NewQueueDepth]).
//
// Label values are bounded: lock names as declared in the spec, strategies
// ([runtime.StrategyLease], [runtime.StrategySession]), the fixed
// [runtime.AcquireResult] values, job and queue names as declared and the
// fixed [jobs.Outcome] values. Keys and owners are never labels, so the
// number of series does not grow with traffic.
//
// lockgen_held_leases goes up by one when an acquisition succeeds and down
// by one when its lease is released. A lease that is lost (see
// lockgen_leases_lost_total) still counts as held until its holder calls
// Release, which it must do anyway; a lost lease that is never released
// stays counted.
package lockgenprom

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultNamespace is the namespace, the first part of every metric's name,
// that New uses unless WithNamespace says otherwise.
const DefaultNamespace = "lockgen"

// defaultBuckets spans lock latencies from 1ms to 60s.
var defaultBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60,
}

// DefaultBuckets returns the histogram buckets, in seconds, that New uses
// for both acquire and hold durations unless told otherwise: from 1ms to
// 60s (0.001, 0.0025, 0.005, … 10, 30, 60). Each call returns a new slice.
func DefaultBuckets() []float64 { return slices.Clone(defaultBuckets) }

// Option configures an Observer made by New.
type Option func(*options)

type options struct {
	namespace      string
	constLabels    prometheus.Labels
	acquireBuckets []float64
	holdBuckets    []float64
}

// WithNamespace sets the namespace that prefixes every metric's name,
// "lockgen" by default. An empty namespace leaves metric names unprefixed
// (acquisitions_total, …).
func WithNamespace(namespace string) Option {
	return func(o *options) { o.namespace = namespace }
}

// WithConstLabels adds labels with fixed values to every metric, for
// instance to tell apart several clients of one process. Their names must
// not be lock, strategy or result; registration fails otherwise. Calling it
// again adds to the labels given before.
func WithConstLabels(labels prometheus.Labels) Option {
	return func(o *options) {
		if o.constLabels == nil {
			o.constLabels = prometheus.Labels{}
		}
		maps.Copy(o.constLabels, labels)
	}
}

// WithAcquireBuckets sets the upper bounds, in seconds and in increasing
// order, of the acquire_duration_seconds histogram's buckets. None means
// DefaultBuckets.
func WithAcquireBuckets(buckets ...float64) Option {
	return func(o *options) { o.acquireBuckets = slices.Clone(buckets) }
}

// WithHoldBuckets sets the upper bounds, in seconds and in increasing order,
// of the hold_duration_seconds histogram's buckets. None means
// DefaultBuckets. Locks held for long, such as leader leases held for hours,
// call for wider buckets than the default's 60s top.
func WithHoldBuckets(buckets ...float64) Option {
	return func(o *options) { o.holdBuckets = slices.Clone(buckets) }
}

// Observer is a runtime.Observer that records the runtime's events as
// Prometheus metrics, and the prometheus.Collector that exports them. Make
// one with New. Its methods are safe for concurrent use.
type Observer struct {
	acquisitions    *prometheus.CounterVec
	acquireDuration *prometheus.HistogramVec
	holdDuration    *prometheus.HistogramVec
	renewFailures   *prometheus.CounterVec
	leasesLost      *prometheus.CounterVec
	leader          *prometheus.GaugeVec
	heldLeases      *prometheus.GaugeVec

	enqueued    *prometheus.CounterVec
	claimed     *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	jobDuration *prometheus.HistogramVec
	lateness    *prometheus.HistogramVec
	rescued     *prometheus.CounterVec // no labels: appears at the first rescue, like every series
}

var (
	_ runtime.Observer     = (*Observer)(nil)
	_ jobs.Observer        = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// New returns an Observer configured by opts. It panics if a histogram's
// buckets are not in strictly increasing order, as prometheus's own
// constructors do; invalid names (of the namespace or const labels) make
// registering the Observer fail instead.
func New(opts ...Option) *Observer {
	o := options{namespace: DefaultNamespace}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.acquireBuckets) == 0 {
		o.acquireBuckets = DefaultBuckets()
	}
	if len(o.holdBuckets) == 0 {
		o.holdBuckets = DefaultBuckets()
	}
	mustIncrease("WithAcquireBuckets", o.acquireBuckets)
	mustIncrease("WithHoldBuckets", o.holdBuckets)

	lockStrategy := []string{"lock", "strategy"}
	return &Observer{
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "acquisitions_total",
			Help:        "Lock acquisitions (Try, Acquire or With) that ended, by result: acquired, busy or error.",
			ConstLabels: o.constLabels,
		}, []string{"lock", "strategy", "result"}),
		acquireDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace:   o.namespace,
			Name:        "acquire_duration_seconds",
			Help:        "Time lock acquisitions took, waiting included, whatever their result.",
			ConstLabels: o.constLabels,
			Buckets:     o.acquireBuckets,
		}, lockStrategy),
		holdDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace:   o.namespace,
			Name:        "hold_duration_seconds",
			Help:        "Time leases were held, from acquisition to Release.",
			ConstLabels: o.constLabels,
			Buckets:     o.holdBuckets,
		}, lockStrategy),
		renewFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "renew_failures_total",
			Help:        "Lease renewals that failed without proving the lease lost (network or server errors).",
			ConstLabels: o.constLabels,
		}, lockStrategy),
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "leases_lost_total",
			Help:        "Leases that ended before their holder released them.",
			ConstLabels: o.constLabels,
		}, lockStrategy),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace:   o.namespace,
			Name:        "leader",
			Help:        "1 while this client is the leader of the lock, 0 otherwise.",
			ConstLabels: o.constLabels,
		}, []string{"lock"}),
		heldLeases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace:   o.namespace,
			Name:        "held_leases",
			Help:        "Leases acquired and not released yet; a lost lease counts until it is released.",
			ConstLabels: o.constLabels,
		}, lockStrategy),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "jobs_enqueued_total",
			Help:        "Runs enqueued through this client (an existing run answered for its unique key counts too).",
			ConstLabels: o.constLabels,
		}, []string{"job", "queue"}),
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "jobs_claimed_total",
			Help:        "Runs claimed by this client's workers.",
			ConstLabels: o.constLabels,
		}, []string{"queue"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "job_attempts_total",
			Help:        "Handler attempts that ended, by outcome: completed, failed, discarded, snoozed, cancelled or lost.",
			ConstLabels: o.constLabels,
		}, []string{"job", "queue", "outcome"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace:   o.namespace,
			Name:        "job_duration_seconds",
			Help:        "Time handler attempts ran, by outcome.",
			ConstLabels: o.constLabels,
			Buckets:     o.holdBuckets,
		}, []string{"job", "queue", "outcome"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace:   o.namespace,
			Name:        "job_lateness_seconds",
			Help:        "Time from a run being due to its attempt starting (this node's clock against the database's due time).",
			ConstLabels: o.constLabels,
			Buckets:     o.acquireBuckets,
		}, []string{"job", "queue"}),
		rescued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "jobs_rescued_total",
			Help:        "Runs of stopped workers made due again or orphaned by this client's rescuers.",
			ConstLabels: o.constLabels,
		}, nil),
	}
}

func mustIncrease(option string, buckets []float64) {
	for i := 1; i < len(buckets); i++ {
		if !(buckets[i-1] < buckets[i]) {
			panic(fmt.Sprintf("lockgenprom: %s: buckets must be in strictly increasing order, got %v", option, buckets))
		}
	}
}

// collectors lists the Observer's metric vectors, in a fixed order.
func (o *Observer) collectors() [13]prometheus.Collector {
	return [...]prometheus.Collector{
		o.acquisitions, o.acquireDuration, o.holdDuration,
		o.renewFailures, o.leasesLost, o.leader, o.heldLeases,
		o.enqueued, o.claimed, o.attempts, o.jobDuration, o.lateness, o.rescued,
	}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}

// Acquired implements runtime.Observer: it counts the acquisition by
// result, observes took in acquire_duration_seconds and, when the result is
// acquired, adds one to held_leases.
func (o *Observer) Acquired(lock string, strategy runtime.Strategy, result runtime.AcquireResult, took time.Duration) {
	o.acquisitions.WithLabelValues(lock, string(strategy), string(result)).Inc()
	o.acquireDuration.WithLabelValues(lock, string(strategy)).Observe(took.Seconds())
	if result == runtime.AcquireAcquired {
		o.heldLeases.WithLabelValues(lock, string(strategy)).Inc()
	}
}

// Released implements runtime.Observer: it observes held in
// hold_duration_seconds and takes one from held_leases.
func (o *Observer) Released(lock string, strategy runtime.Strategy, held time.Duration) {
	o.holdDuration.WithLabelValues(lock, string(strategy)).Observe(held.Seconds())
	o.heldLeases.WithLabelValues(lock, string(strategy)).Dec()
}

// RenewFailed implements runtime.Observer: it counts a renew failure.
func (o *Observer) RenewFailed(lock string, strategy runtime.Strategy) {
	o.renewFailures.WithLabelValues(lock, string(strategy)).Inc()
}

// LeaseLost implements runtime.Observer: it counts a lost lease. The lease
// still counts in held_leases until it is released.
func (o *Observer) LeaseLost(lock string, strategy runtime.Strategy) {
	o.leasesLost.WithLabelValues(lock, string(strategy)).Inc()
}

// LeaderChanged implements runtime.Observer: it sets the leader gauge of
// lock to 1 when this client became its leader, to 0 when it stopped being
// it.
func (o *Observer) LeaderChanged(lock string, leader bool) {
	v := 0.0
	if leader {
		v = 1
	}
	o.leader.WithLabelValues(lock).Set(v)
}

// Enqueued implements jobs.Observer: it counts n enqueued runs.
func (o *Observer) Enqueued(job, queue string, n int) {
	o.enqueued.WithLabelValues(job, queue).Add(float64(n))
}

// Claimed implements jobs.Observer: it counts n claimed runs.
func (o *Observer) Claimed(queue string, n int) {
	o.claimed.WithLabelValues(queue).Add(float64(n))
}

// Started implements jobs.Observer: it observes lateness (a negative one,
// from clocks apart, as zero).
func (o *Observer) Started(job, queue string, _ int, lateness time.Duration) {
	o.lateness.WithLabelValues(job, queue).Observe(max(lateness, 0).Seconds())
}

// Finished implements jobs.Observer: it counts the attempt by outcome and
// observes how long it ran.
func (o *Observer) Finished(job, queue string, _ int, outcome jobs.Outcome, took time.Duration) {
	o.attempts.WithLabelValues(job, queue, string(outcome)).Inc()
	o.jobDuration.WithLabelValues(job, queue, string(outcome)).Observe(took.Seconds())
}

// Rescued implements jobs.Observer: it counts n rescued runs.
func (o *Observer) Rescued(n int) { o.rescued.WithLabelValues().Add(float64(n)) }
