package runtime_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/stmtcount"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// BenchmarkHandoff measures, per strategy, how long a contended lock stays
// unused between holders: 8 contenders, each with its own pool (a node),
// take the lock in turn; a sample is the time from one holder's fn end to
// the next holder's fn start (release + wake-up + acquire). It reports the
// p50 and p99 of those samples and the server statements per handoff.
func BenchmarkHandoff(b *testing.B) {
	for _, tc := range []struct {
		name         string
		strategy     runtime.Strategy
		waitOnServer bool
	}{
		{"lease-poll", runtime.StrategyLease, false},
		{"lease-server", runtime.StrategyLease, true},
		{"session", runtime.StrategySession, false},
		{"row", runtime.StrategyRow, false},
	} {
		b.Run(tc.name, func(b *testing.B) { benchHandoff(b, tc.strategy, tc.waitOnServer) })
	}
}

func benchHandoff(b *testing.B, strategy runtime.Strategy, waitOnServer bool) {
	tdb := testdb.New(b)
	const contenders = 8
	cfg := runtime.LockConfig{Name: "handoff-" + tdb.Name, Strategy: strategy, TTL: 10 * time.Second, Wait: time.Minute, WaitOnServer: waitOnServer}
	if strategy == runtime.StrategyRow {
		cfg.TTL = 0
	}
	var counters []*stmtcount.Connector
	var locks []*runtime.Lock
	for i := 0; i < contenders; i++ {
		c := stmtcount.Wrap(testkit.Connector(b, tdb.Config))
		db := sql.OpenDB(c)
		b.Cleanup(func() { _ = db.Close() })
		client, err := runtime.NewClient(lockgendb.NewStore(db))
		if err != nil {
			b.Fatal(err)
		}
		l, err := client.Lock(cfg)
		if err != nil {
			b.Fatal(err)
		}
		counters = append(counters, c)
		locks = append(locks, l)
	}
	var mu sync.Mutex
	var lastEnd time.Time
	var samples []time.Duration
	statements := func() (n int64) {
		for _, c := range counters {
			n += c.Count()
		}
		return n
	}
	before := statements()
	b.ResetTimer()
	var wg sync.WaitGroup
	next := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		next <- struct{}{}
	}
	close(next)
	for _, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				err := l.With(context.Background(), "", func(context.Context, *runtime.Lease) error {
					mu.Lock()
					if !lastEnd.IsZero() {
						samples = append(samples, time.Since(lastEnd))
					}
					mu.Unlock()
					time.Sleep(time.Millisecond) // the critical section
					mu.Lock()
					lastEnd = time.Now()
					mu.Unlock()
					return nil
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	pct := func(p float64) float64 { return float64(samples[int(p*float64(len(samples)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(statements()-before)/float64(b.N), "stmts/handoff")
}
