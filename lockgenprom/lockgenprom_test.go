package lockgenprom_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/lockgenprom"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const lease = runtime.StrategyLease

// value returns the value of the counter or gauge name{labels} gathered from
// g, failing the test when there is no such series.
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(t, g, name, labels)
	require.NotNil(t, m, "no series %s%v", name, labels)
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	return 0
}

// find returns the series name{labels} gathered from g, nil if there is none.
func find(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

func registry(t *testing.T, obs *lockgenprom.Observer) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(obs))
	return reg
}

func TestImplementsRuntimeObserver(t *testing.T) {
	var obs runtime.Observer = lockgenprom.New()
	assert.NotNil(t, obs)
	var opt runtime.Option = runtime.WithObserver(lockgenprom.New())
	assert.NotNil(t, opt)
}

func TestAcquired(t *testing.T) {
	obs := lockgenprom.New(lockgenprom.WithAcquireBuckets(0.01, 0.1, 1))
	obs.Acquired("order", lease, runtime.AcquireAcquired, 5*time.Millisecond)
	obs.Acquired("order", lease, runtime.AcquireAcquired, 50*time.Millisecond)
	obs.Acquired("order", lease, runtime.AcquireBusy, 2*time.Second)
	obs.Acquired("order", lease, runtime.AcquireError, 500*time.Millisecond)
	obs.Acquired("master", lease, runtime.AcquireBusy, time.Millisecond)

	want := `
# HELP lockgen_acquisitions_total Lock acquisitions (Try, Acquire or With) that ended, by result: acquired, busy or error.
# TYPE lockgen_acquisitions_total counter
lockgen_acquisitions_total{lock="master",result="busy",strategy="lease"} 1
lockgen_acquisitions_total{lock="order",result="acquired",strategy="lease"} 2
lockgen_acquisitions_total{lock="order",result="busy",strategy="lease"} 1
lockgen_acquisitions_total{lock="order",result="error",strategy="lease"} 1
# HELP lockgen_acquire_duration_seconds Time lock acquisitions took, waiting included, whatever their result.
# TYPE lockgen_acquire_duration_seconds histogram
lockgen_acquire_duration_seconds_bucket{lock="master",strategy="lease",le="0.01"} 1
lockgen_acquire_duration_seconds_bucket{lock="master",strategy="lease",le="0.1"} 1
lockgen_acquire_duration_seconds_bucket{lock="master",strategy="lease",le="1"} 1
lockgen_acquire_duration_seconds_bucket{lock="master",strategy="lease",le="+Inf"} 1
lockgen_acquire_duration_seconds_sum{lock="master",strategy="lease"} 0.001
lockgen_acquire_duration_seconds_count{lock="master",strategy="lease"} 1
lockgen_acquire_duration_seconds_bucket{lock="order",strategy="lease",le="0.01"} 1
lockgen_acquire_duration_seconds_bucket{lock="order",strategy="lease",le="0.1"} 2
lockgen_acquire_duration_seconds_bucket{lock="order",strategy="lease",le="1"} 3
lockgen_acquire_duration_seconds_bucket{lock="order",strategy="lease",le="+Inf"} 4
lockgen_acquire_duration_seconds_sum{lock="order",strategy="lease"} 2.555
lockgen_acquire_duration_seconds_count{lock="order",strategy="lease"} 4
# HELP lockgen_held_leases Leases acquired and not released yet; a lost lease counts until it is released.
# TYPE lockgen_held_leases gauge
lockgen_held_leases{lock="order",strategy="lease"} 2
`
	require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want),
		"lockgen_acquisitions_total", "lockgen_acquire_duration_seconds", "lockgen_held_leases"))
}

func TestReleased(t *testing.T) {
	obs := lockgenprom.New(lockgenprom.WithHoldBuckets(1, 60))
	for range 3 {
		obs.Acquired("order", lease, runtime.AcquireAcquired, time.Millisecond)
	}
	obs.Released("order", lease, 500*time.Millisecond)
	obs.Released("order", lease, 30*time.Second)

	want := `
# HELP lockgen_hold_duration_seconds Time leases were held, from acquisition to Release.
# TYPE lockgen_hold_duration_seconds histogram
lockgen_hold_duration_seconds_bucket{lock="order",strategy="lease",le="1"} 1
lockgen_hold_duration_seconds_bucket{lock="order",strategy="lease",le="60"} 2
lockgen_hold_duration_seconds_bucket{lock="order",strategy="lease",le="+Inf"} 2
lockgen_hold_duration_seconds_sum{lock="order",strategy="lease"} 30.5
lockgen_hold_duration_seconds_count{lock="order",strategy="lease"} 2
# HELP lockgen_held_leases Leases acquired and not released yet; a lost lease counts until it is released.
# TYPE lockgen_held_leases gauge
lockgen_held_leases{lock="order",strategy="lease"} 1
`
	require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want),
		"lockgen_hold_duration_seconds", "lockgen_held_leases"))
}

func TestHeldLeasesGoUpAndDown(t *testing.T) {
	obs := lockgenprom.New()
	reg := registry(t, obs)
	held := func(lock string) float64 {
		t.Helper()
		return value(t, reg, "lockgen_held_leases", map[string]string{"lock": lock, "strategy": string(lease)})
	}

	obs.Acquired("order", lease, runtime.AcquireAcquired, time.Millisecond)
	assert.Equal(t, 1.0, held("order"))
	obs.Acquired("order", lease, runtime.AcquireAcquired, time.Millisecond)
	obs.Acquired("invoice", lease, runtime.AcquireAcquired, time.Millisecond)
	assert.Equal(t, 2.0, held("order"))
	assert.Equal(t, 1.0, held("invoice"))

	// Failed acquisitions hold nothing.
	obs.Acquired("order", lease, runtime.AcquireBusy, time.Millisecond)
	obs.Acquired("order", lease, runtime.AcquireError, time.Millisecond)
	assert.Equal(t, 2.0, held("order"))

	obs.Released("order", lease, time.Second)
	assert.Equal(t, 1.0, held("order"))
	assert.Equal(t, 1.0, held("invoice"))

	// A lost lease stays counted until its holder releases it.
	obs.LeaseLost("order", lease)
	assert.Equal(t, 1.0, held("order"))
	obs.Released("order", lease, time.Second)
	assert.Equal(t, 0.0, held("order"))

	obs.Released("invoice", lease, time.Second)
	assert.Equal(t, 0.0, held("invoice"))
}

func TestRenewFailuresAndLeasesLost(t *testing.T) {
	obs := lockgenprom.New()
	obs.RenewFailed("order", lease)
	obs.RenewFailed("order", lease)
	obs.RenewFailed("master", lease)
	obs.LeaseLost("order", lease)

	want := `
# HELP lockgen_renew_failures_total Lease renewals that failed without proving the lease lost (network or server errors).
# TYPE lockgen_renew_failures_total counter
lockgen_renew_failures_total{lock="master",strategy="lease"} 1
lockgen_renew_failures_total{lock="order",strategy="lease"} 2
# HELP lockgen_leases_lost_total Leases that ended before their holder released them.
# TYPE lockgen_leases_lost_total counter
lockgen_leases_lost_total{lock="order",strategy="lease"} 1
`
	require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want),
		"lockgen_renew_failures_total", "lockgen_leases_lost_total"))
}

func TestLeaderGaugeFlips(t *testing.T) {
	obs := lockgenprom.New()
	reg := registry(t, obs)
	leader := func(lock string) float64 {
		t.Helper()
		return value(t, reg, "lockgen_leader", map[string]string{"lock": lock})
	}

	assert.Nil(t, find(t, reg, "lockgen_leader", nil), "no series before any event")
	obs.LeaderChanged("master", true)
	assert.Equal(t, 1.0, leader("master"))
	obs.LeaderChanged("scheduler", true)
	obs.LeaderChanged("master", false)
	assert.Equal(t, 0.0, leader("master"))
	assert.Equal(t, 1.0, leader("scheduler"))
	obs.LeaderChanged("master", true)
	assert.Equal(t, 1.0, leader("master"))
	obs.LeaderChanged("master", true) // repeated: still 1, not 2
	assert.Equal(t, 1.0, leader("master"))
}

func TestDefaults(t *testing.T) {
	obs := lockgenprom.New()
	reg := registry(t, obs)
	obs.Acquired("order", lease, runtime.AcquireAcquired, time.Millisecond)
	obs.Released("order", lease, time.Minute)

	assert.Equal(t, "lockgen", lockgenprom.DefaultNamespace)
	buckets := lockgenprom.DefaultBuckets()
	assert.Equal(t, 0.001, buckets[0])
	assert.Equal(t, 60.0, buckets[len(buckets)-1])
	assert.IsIncreasing(t, buckets)

	for _, name := range []string{"lockgen_acquire_duration_seconds", "lockgen_hold_duration_seconds"} {
		m := find(t, reg, name, map[string]string{"lock": "order", "strategy": string(lease)})
		require.NotNil(t, m, name)
		var bounds []float64
		for _, b := range m.GetHistogram().GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		assert.Equal(t, buckets, bounds, name)
	}
	// 1ms lands in the first bucket, one minute in the last.
	acq := find(t, reg, "lockgen_acquire_duration_seconds", nil).GetHistogram()
	assert.Equal(t, uint64(1), acq.GetBucket()[0].GetCumulativeCount())
	hold := find(t, reg, "lockgen_hold_duration_seconds", nil).GetHistogram()
	assert.Equal(t, uint64(0), hold.GetBucket()[len(buckets)-2].GetCumulativeCount())
	assert.Equal(t, uint64(1), hold.GetBucket()[len(buckets)-1].GetCumulativeCount())

	// DefaultBuckets hands out copies.
	buckets[0] = 42
	assert.Equal(t, 0.001, lockgenprom.DefaultBuckets()[0])
}

func TestCustomNamespaceAndConstLabelsOnFreshRegistry(t *testing.T) {
	labels := prometheus.Labels{"db": "primary"}
	obs := lockgenprom.New(
		lockgenprom.WithNamespace("myapp"),
		lockgenprom.WithConstLabels(labels),
		lockgenprom.WithConstLabels(prometheus.Labels{"region": "eu"}),
	)
	labels["db"] = "changed after New" // options copy the map
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)

	obs.Acquired("order", lease, runtime.AcquireAcquired, time.Millisecond)
	obs.Released("order", lease, time.Second)
	obs.RenewFailed("order", lease)
	obs.LeaseLost("order", lease)
	obs.LeaderChanged("master", true)

	families, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range families {
		names = append(names, mf.GetName())
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			assert.Equal(t, "primary", got["db"], mf.GetName())
			assert.Equal(t, "eu", got["region"], mf.GetName())
		}
	}
	assert.Equal(t, []string{
		"myapp_acquire_duration_seconds",
		"myapp_acquisitions_total",
		"myapp_held_leases",
		"myapp_hold_duration_seconds",
		"myapp_leader",
		"myapp_leases_lost_total",
		"myapp_renew_failures_total",
	}, names)

	want := `
# HELP myapp_acquisitions_total Lock acquisitions (Try, Acquire or With) that ended, by result: acquired, busy or error.
# TYPE myapp_acquisitions_total counter
myapp_acquisitions_total{db="primary",lock="order",region="eu",result="acquired",strategy="lease"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "myapp_acquisitions_total"))
}

func TestEmptyNamespace(t *testing.T) {
	obs := lockgenprom.New(lockgenprom.WithNamespace(""))
	reg := registry(t, obs)
	obs.LeaseLost("order", lease)
	assert.Equal(t, 1.0, value(t, reg, "leases_lost_total", map[string]string{"lock": "order"}))
}

func TestSeveralObserversOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(lockgenprom.New()))

	// The same metrics again collide ...
	err := reg.Register(lockgenprom.New())
	var already prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &already)

	// ... unless const labels tell them apart.
	a := lockgenprom.New(lockgenprom.WithConstLabels(prometheus.Labels{"client": "a"}))
	b := lockgenprom.New(lockgenprom.WithConstLabels(prometheus.Labels{"client": "b"}))
	reg = prometheus.NewRegistry()
	require.NoError(t, reg.Register(a))
	require.NoError(t, reg.Register(b))
	a.LeaderChanged("master", true)
	b.LeaderChanged("master", false)
	assert.Equal(t, 1.0, value(t, reg, "lockgen_leader", map[string]string{"client": "a"}))
	assert.Equal(t, 0.0, value(t, reg, "lockgen_leader", map[string]string{"client": "b"}))
}

func TestRegisterFailsOnBadNames(t *testing.T) {
	for name, obs := range map[string]*lockgenprom.Observer{
		"const label named like a variable one": lockgenprom.New(lockgenprom.WithConstLabels(prometheus.Labels{"lock": "x"})),
		"reserved const label name":             lockgenprom.New(lockgenprom.WithConstLabels(prometheus.Labels{"__db": "x"})),
		"namespace not UTF-8":                   lockgenprom.New(lockgenprom.WithNamespace("\xff")),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, prometheus.NewRegistry().Register(obs))
		})
	}
}

func TestBucketsMustIncrease(t *testing.T) {
	assert.PanicsWithValue(t,
		"lockgenprom: WithAcquireBuckets: buckets must be in strictly increasing order, got [1 0.5]",
		func() { lockgenprom.New(lockgenprom.WithAcquireBuckets(1, 0.5)) })
	assert.Panics(t, func() { lockgenprom.New(lockgenprom.WithHoldBuckets(1, 1)) })

	// No buckets means the default ones; the caller's slice is copied.
	custom := []float64{1, 2}
	obs := lockgenprom.New(lockgenprom.WithAcquireBuckets(), lockgenprom.WithHoldBuckets(custom...))
	custom[0] = 3
	reg := registry(t, obs)
	obs.Acquired("order", lease, runtime.AcquireBusy, time.Millisecond)
	obs.Released("order", lease, time.Second)
	assert.Len(t, find(t, reg, "lockgen_acquire_duration_seconds", nil).GetHistogram().GetBucket(), len(lockgenprom.DefaultBuckets()))
	hold := find(t, reg, "lockgen_hold_duration_seconds", nil).GetHistogram().GetBucket()
	require.Len(t, hold, 2)
	assert.Equal(t, 1.0, hold[0].GetUpperBound())
}

func TestLint(t *testing.T) {
	obs := lockgenprom.New()
	obs.Acquired("order", lease, runtime.AcquireAcquired, time.Millisecond)
	obs.Released("order", lease, time.Second)
	obs.RenewFailed("order", lease)
	obs.LeaseLost("order", lease)
	obs.LeaderChanged("master", true)
	problems, err := testutil.CollectAndLint(obs)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Equal(t, 7, testutil.CollectAndCount(obs))
}

func TestConcurrentUse(t *testing.T) {
	obs := lockgenprom.New()
	reg := registry(t, obs)
	const goroutines, rounds = 32, 200
	locks := []string{"order", "invoice", "master"}

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock := locks[g%len(locks)]
			for i := range rounds {
				obs.Acquired(lock, lease, runtime.AcquireAcquired, time.Duration(i)*time.Millisecond)
				obs.Acquired(lock, lease, runtime.AcquireBusy, time.Millisecond)
				obs.RenewFailed(lock, lease)
				obs.LeaseLost(lock, lease)
				obs.LeaderChanged(lock, i%2 == 0)
				obs.Released(lock, lease, time.Second)
			}
		}()
	}
	// Scrapes run alongside the events.
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				scraped <- nil
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				scraped <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	require.NoError(t, <-scraped)

	perLock := map[string]float64{}
	for g := range goroutines {
		perLock[locks[g%len(locks)]] += rounds
	}
	for _, lock := range locks {
		ls := map[string]string{"lock": lock, "strategy": string(lease)}
		n := perLock[lock]
		assert.Equal(t, n, value(t, reg, "lockgen_acquisitions_total", map[string]string{"lock": lock, "result": "acquired"}), lock)
		assert.Equal(t, n, value(t, reg, "lockgen_acquisitions_total", map[string]string{"lock": lock, "result": "busy"}), lock)
		assert.Equal(t, n, value(t, reg, "lockgen_renew_failures_total", ls), lock)
		assert.Equal(t, n, value(t, reg, "lockgen_leases_lost_total", ls), lock)
		assert.Equal(t, 0.0, value(t, reg, "lockgen_held_leases", ls), lock)
		assert.Equal(t, uint64(2*n), find(t, reg, "lockgen_acquire_duration_seconds", ls).GetHistogram().GetSampleCount(), lock)
		assert.Equal(t, uint64(n), find(t, reg, "lockgen_hold_duration_seconds", ls).GetHistogram().GetSampleCount(), lock)
		assert.Contains(t, []float64{0, 1}, value(t, reg, "lockgen_leader", map[string]string{"lock": lock}), lock)
	}
}

func TestStrategiesAreSeparateSeries(t *testing.T) {
	obs := lockgenprom.New()
	obs.Acquired("order", runtime.StrategyLease, runtime.AcquireAcquired, time.Millisecond)
	obs.Acquired("order", runtime.StrategySession, runtime.AcquireAcquired, time.Millisecond)
	obs.Acquired("order", runtime.StrategySession, runtime.AcquireAcquired, time.Millisecond)
	obs.Released("order", runtime.StrategySession, time.Second)

	want := `
# HELP lockgen_held_leases Leases acquired and not released yet; a lost lease counts until it is released.
# TYPE lockgen_held_leases gauge
lockgen_held_leases{lock="order",strategy="lease"} 1
lockgen_held_leases{lock="order",strategy="session"} 1
`
	require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "lockgen_held_leases"))
	assert.Equal(t, 2, testutil.CollectAndCount(obs, "lockgen_acquire_duration_seconds"))
	assert.Equal(t, 1, testutil.CollectAndCount(obs, "lockgen_hold_duration_seconds"))
}

func BenchmarkObserver(b *testing.B) {
	obs := lockgenprom.New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			obs.Acquired("order", lease, runtime.AcquireAcquired, time.Millisecond)
			obs.Released("order", lease, time.Second)
			obs.RenewFailed("order", lease)
			obs.LeaseLost("order", lease)
			obs.LeaderChanged("master", true)
		}
	})
}

// TestJobMetrics: the jobs' events count by job, queue and outcome, and
// the durations and lateness land in their histograms.
func TestJobMetrics(t *testing.T) {
	obs := lockgenprom.New()
	reg := registry(t, obs)
	var jo jobs.Observer = obs
	jo.Enqueued("send", "mail", 3)
	jo.Enqueued("send", "mail", 2)
	jo.Claimed("mail", 4)
	jo.Started("send", "mail", 1, 250*time.Millisecond)
	jo.Started("send", "mail", 1, -time.Second) // clocks apart: counted as 0
	jo.Finished("send", "mail", 1, jobs.OutcomeCompleted, 40*time.Millisecond)
	jo.Finished("send", "mail", 2, jobs.OutcomeDiscarded, 2*time.Second)
	jo.Rescued(7)

	assert.Equal(t, 5.0, value(t, reg, "lockgen_jobs_enqueued_total", map[string]string{"job": "send", "queue": "mail"}))
	assert.Equal(t, 4.0, value(t, reg, "lockgen_jobs_claimed_total", map[string]string{"queue": "mail"}))
	assert.Equal(t, 1.0, value(t, reg, "lockgen_job_attempts_total", map[string]string{"job": "send", "outcome": "completed"}))
	assert.Equal(t, 1.0, value(t, reg, "lockgen_job_attempts_total", map[string]string{"job": "send", "outcome": "discarded"}))
	assert.Equal(t, 7.0, value(t, reg, "lockgen_jobs_rescued_total", nil))
	d := find(t, reg, "lockgen_job_duration_seconds", map[string]string{"outcome": "discarded"}).GetHistogram()
	assert.Equal(t, uint64(1), d.GetSampleCount())
	assert.InDelta(t, 2.0, d.GetSampleSum(), 1e-9)
	l := find(t, reg, "lockgen_job_lateness_seconds", map[string]string{"job": "send"}).GetHistogram()
	assert.Equal(t, uint64(2), l.GetSampleCount())
	assert.InDelta(t, 0.25, l.GetSampleSum(), 1e-9)
}
