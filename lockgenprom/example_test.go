package lockgenprom_test

import (
	"fmt"
	"time"

	"github.com/lockgen/lockgen/lockgenprom"
	"github.com/lockgen/lockgen/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// Register an Observer and hand it to the runtime. The events below are the
// ones the runtime reports; an application never calls them itself.
func Example() {
	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer
	obs := lockgenprom.New()
	reg.MustRegister(obs)

	// With generated code: l, err := locks.New(db, locks.WithObserver(obs))
	_ = runtime.WithObserver(obs)

	obs.Acquired("order", runtime.StrategyLease, runtime.AcquireAcquired, 4*time.Millisecond)
	obs.RenewFailed("order", runtime.StrategyLease)
	obs.LeaseLost("order", runtime.StrategyLease)
	obs.Released("order", runtime.StrategyLease, 2*time.Second)
	obs.LeaderChanged("master", true)

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range families {
		fmt.Println(mf.GetName(), mf.GetType())
	}
	// Output:
	// lockgen_acquire_duration_seconds HISTOGRAM
	// lockgen_acquisitions_total COUNTER
	// lockgen_held_leases GAUGE
	// lockgen_hold_duration_seconds HISTOGRAM
	// lockgen_leader GAUGE
	// lockgen_leases_lost_total COUNTER
	// lockgen_renew_failures_total COUNTER
}

// Two clients of one process, told apart by a const label, share a registry
// under the application's namespace.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	primary := lockgenprom.New(
		lockgenprom.WithNamespace("myapp"),
		lockgenprom.WithConstLabels(prometheus.Labels{"db": "primary"}),
		lockgenprom.WithHoldBuckets(.01, .1, 1, 10, 60, 600, 3600),
	)
	reports := lockgenprom.New(
		lockgenprom.WithNamespace("myapp"),
		lockgenprom.WithConstLabels(prometheus.Labels{"db": "reports"}),
	)
	reg.MustRegister(primary, reports)

	primary.LeaderChanged("master", true)
	reports.LeaderChanged("master", false)

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			fmt.Print(mf.GetName())
			for _, l := range m.GetLabel() {
				fmt.Printf(" %s=%s", l.GetName(), l.GetValue())
			}
			fmt.Println(" =", m.GetGauge().GetValue())
		}
	}
	// Output:
	// myapp_leader db=primary lock=master = 1
	// myapp_leader db=reports lock=master = 0
}
