package lockgenprom_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/lockgenprom"
	"github.com/lockgen/lockgen/runtime"
)

func TestCountersGaugesAndHistograms(t *testing.T) {
	obs := lockgenprom.New()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(obs))

	obs.Acquired("order", runtime.StrategyLease, runtime.AcquireAcquired, 3*time.Millisecond)
	obs.Acquired("order", runtime.StrategyLease, runtime.AcquireAcquired, 30*time.Millisecond)
	obs.Acquired("order", runtime.StrategyLease, runtime.AcquireBusy, 2*time.Second)
	obs.Acquired("master", runtime.StrategySession, runtime.AcquireError, time.Millisecond)
	obs.Released("order", runtime.StrategyLease, 1500*time.Millisecond)
	obs.RenewFailed("order", runtime.StrategyLease)
	obs.LeaseLost("order", runtime.StrategyLease)
	obs.LeaderChanged("master", true)

	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lockgen_acquisitions_total Lock acquisitions (Try, Acquire or With) that ended, by result: acquired, busy or error.
# TYPE lockgen_acquisitions_total counter
lockgen_acquisitions_total{lock="master",result="error",strategy="session"} 1
lockgen_acquisitions_total{lock="order",result="acquired",strategy="lease"} 2
lockgen_acquisitions_total{lock="order",result="busy",strategy="lease"} 1
# HELP lockgen_held_leases Leases acquired and not released yet; a lost lease counts until it is released.
# TYPE lockgen_held_leases gauge
lockgen_held_leases{lock="order",strategy="lease"} 1
# HELP lockgen_leader 1 while this client is the leader of the lock, 0 otherwise.
# TYPE lockgen_leader gauge
lockgen_leader{lock="master"} 1
# HELP lockgen_leases_lost_total Leases that ended before their holder released them.
# TYPE lockgen_leases_lost_total counter
lockgen_leases_lost_total{lock="order",strategy="lease"} 1
# HELP lockgen_renew_failures_total Lease renewals that failed without proving the lease lost (network or server errors).
# TYPE lockgen_renew_failures_total counter
lockgen_renew_failures_total{lock="order",strategy="lease"} 1
`), "lockgen_acquisitions_total", "lockgen_held_leases", "lockgen_leader", "lockgen_leases_lost_total", "lockgen_renew_failures_total")
	require.NoError(t, err)

	assert.Equal(t, 2, testutil.CollectAndCount(obs, "lockgen_acquire_duration_seconds"), "one series per lock and strategy: order/lease and master/session")
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		switch mf.GetName() {
		case "lockgen_hold_duration_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			assert.Equal(t, uint64(1), h.GetSampleCount())
			assert.InDelta(t, 1.5, h.GetSampleSum(), 1e-9)
		case "lockgen_acquire_duration_seconds":
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "order" {
					assert.Equal(t, uint64(3), m.GetHistogram().GetSampleCount())
					assert.InDelta(t, 2.033, m.GetHistogram().GetSampleSum(), 1e-9)
				}
			}
		}
	}

	obs.Released("order", runtime.StrategyLease, time.Second)
	obs.LeaderChanged("master", false)
	assert.Equal(t, 0.0, testutil.ToFloat64(gauge(t, reg, "lockgen_held_leases")))
	assert.Equal(t, 0.0, testutil.ToFloat64(gauge(t, reg, "lockgen_leader")))
}

// gauge returns the single series of the named gauge family as a collector.
func gauge(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
			g.Set(mf.GetMetric()[0].GetGauge().GetValue())
			return g
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

func TestNamespaceConstLabelsAndBuckets(t *testing.T) {
	obs := lockgenprom.New(
		lockgenprom.WithNamespace("app"),
		lockgenprom.WithConstLabels(prometheus.Labels{"db": "primary"}),
		lockgenprom.WithAcquireBuckets(0.01, 1),
	)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(obs))
	obs.Acquired("x", runtime.StrategyLease, runtime.AcquireAcquired, 5*time.Millisecond)
	families, err := reg.Gather()
	require.NoError(t, err)
	var found bool
	for _, mf := range families {
		if mf.GetName() != "app_acquire_duration_seconds" {
			continue
		}
		found = true
		m := mf.GetMetric()[0]
		assert.Equal(t, "db", m.GetLabel()[0].GetName())
		buckets := m.GetHistogram().GetBucket()
		require.Len(t, buckets, 2)
		assert.Equal(t, uint64(1), buckets[0].GetCumulativeCount(), "5ms falls in the 10ms bucket")
	}
	assert.True(t, found)

	assert.Panics(t, func() { lockgenprom.New(lockgenprom.WithHoldBuckets(1, 1)) }, "buckets must increase")
	bad := lockgenprom.New(lockgenprom.WithConstLabels(prometheus.Labels{"lock": "x"}))
	assert.Error(t, prometheus.NewRegistry().Register(bad), "a const label may not shadow a variable label")
}

func TestConcurrentUse(t *testing.T) {
	obs := lockgenprom.New()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(obs))
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				obs.Acquired("l", runtime.StrategyLease, runtime.AcquireAcquired, time.Millisecond)
				obs.RenewFailed("l", runtime.StrategyLease)
				obs.LeaderChanged("l", i%2 == 0)
				obs.Released("l", runtime.StrategyLease, time.Millisecond)
				if i%100 == 0 {
					_, err := reg.Gather()
					assert.NoError(t, err)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lockgen_acquisitions_total Lock acquisitions (Try, Acquire or With) that ended, by result: acquired, busy or error.
# TYPE lockgen_acquisitions_total counter
lockgen_acquisitions_total{lock="l",result="acquired",strategy="lease"} 8000
# HELP lockgen_held_leases Leases acquired and not released yet; a lost lease counts until it is released.
# TYPE lockgen_held_leases gauge
lockgen_held_leases{lock="l",strategy="lease"} 0
`), "lockgen_acquisitions_total", "lockgen_held_leases"))
}
