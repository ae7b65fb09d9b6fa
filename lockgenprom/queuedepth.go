package lockgenprom

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/ops"
	"github.com/prometheus/client_golang/prometheus"
)

// QueueDepth is a prometheus.Collector of the queues' runs by state, read
// from the database at each scrape through the operations layer (the
// counts of GET /api/v1/queues), on one node at a time: only while
// onlyWhen returns true, typically the generated IsXLeader of a leader
// lock, so that a dashboard that sums over nodes counts each run once.
// Each count reads at most ops.Config.CountCap index entries; a queue
// whose counts hit that cap is exported with exact="false".
//
// With the default namespace it exports, from the leading node only:
//
//	lockgen_queue_runs{queue,state,exact}   gauge: due, scheduled, retrying, running, orphaned, discarded
//	lockgen_queue_paused{queue}             gauge, 1 or 0
//	lockgen_queue_depth_up                  gauge: 1 when the last read succeeded, 0 when it failed
type QueueDepth struct {
	ops      *ops.Ops
	onlyWhen func() bool
	timeout  time.Duration
	runs     *prometheus.Desc
	paused   *prometheus.Desc
	up       *prometheus.Desc
}

var _ prometheus.Collector = (*QueueDepth)(nil)

// NewQueueDepth returns the collector of o's queues, read while onlyWhen()
// (nil: always, for a deployment with one exporting node). Namespace and
// const labels are as for New; each scrape's read is bounded by 5 s.
func NewQueueDepth(o *ops.Ops, onlyWhen func() bool, opts ...Option) *QueueDepth {
	cfg := options{namespace: DefaultNamespace}
	for _, opt := range opts {
		opt(&cfg)
	}
	if onlyWhen == nil {
		onlyWhen = func() bool { return true }
	}
	name := func(n string) string { return prometheus.BuildFQName(cfg.namespace, "", n) }
	return &QueueDepth{
		ops: o, onlyWhen: onlyWhen, timeout: 5 * time.Second,
		runs: prometheus.NewDesc(name("queue_runs"),
			"Runs of a queue by state, read from the database on the leading node (exact is false when a count reached the cap).",
			[]string{"queue", "state", "exact"}, cfg.constLabels),
		paused: prometheus.NewDesc(name("queue_paused"), "1 while the queue is paused on every node, 0 otherwise.",
			[]string{"queue"}, cfg.constLabels),
		up: prometheus.NewDesc(name("queue_depth_up"), "1 when the last read of the queues succeeded, 0 when the database failed to answer.",
			nil, cfg.constLabels),
	}
}

// Describe implements prometheus.Collector.
func (q *QueueDepth) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.runs
	ch <- q.paused
	ch <- q.up
}

// Collect implements prometheus.Collector: nothing on a node that does
// not lead; otherwise the counts, or queue_depth_up 0 when the read fails.
func (q *QueueDepth) Collect(ch chan<- prometheus.Metric) {
	if !q.onlyWhen() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	queues, err := q.ops.Queues(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(q.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(q.up, prometheus.GaugeValue, 1)
	for _, qu := range queues {
		exact := "true"
		if !qu.Counts.Exact {
			exact = "false"
		}
		for _, s := range []struct {
			state string
			n     int64
		}{
			{"due", qu.Counts.Due}, {"scheduled", qu.Counts.Scheduled}, {"retrying", qu.Counts.Retrying},
			{"running", qu.Counts.Running}, {"orphaned", qu.Counts.Orphaned}, {"discarded", qu.Counts.Discarded},
		} {
			ch <- prometheus.MustNewConstMetric(q.runs, prometheus.GaugeValue, float64(s.n), qu.Name, s.state, exact)
		}
		paused := 0.0
		if qu.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(q.paused, prometheus.GaugeValue, paused, qu.Name)
	}
}
