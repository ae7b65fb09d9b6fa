//go:build cluster

// The tests of this file run against a real MariaDB Galera cluster, only
// with the build tag cluster: `make cluster-test` starts the cluster
// (.ci/ensure-galera) and names its nodes in LOCKGEN_TEST_GALERA_DSNS (and
// the first node in LOCKGEN_TEST_DSN, where testdb makes each test's
// database, which Galera replicates to the other nodes).

package runtime_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/driver/drivertest"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/probe"
)

// galeraNodes returns the test's database on each node of the cluster, as
// the test's application user, the first node's first.
func galeraNodes(t *testing.T, tdb *testdb.DB) []*sql.DB {
	t.Helper()
	list := os.Getenv("LOCKGEN_TEST_GALERA_DSNS")
	if list == "" {
		t.Fatal("LOCKGEN_TEST_GALERA_DSNS names no Galera nodes: run `make cluster-test`, which starts the cluster")
	}
	var nodes []*sql.DB
	for _, dsn := range strings.Split(list, ",") {
		node, err := mysql.ParseDSN(dsn)
		require.NoError(t, err)
		cfg := tdb.Config.Clone()
		cfg.Addr = node.Addr
		c, err := mysql.NewConnector(cfg)
		require.NoError(t, err)
		db := sql.OpenDB(c)
		t.Cleanup(func() { _ = db.Close() })
		nodes = append(nodes, db)
	}
	require.Len(t, nodes, 3, "a cluster of three nodes")
	return nodes
}

// TestGaleraRefusesWhatItCannotKeep: on every node of a real cluster, the
// probe reports Galera, the session and row strategies are refused at
// first use (each node would grant GET_LOCK and row locks to its own
// clients at once) and so is Guard, with the reason; the lease strategy
// works. The unit tests check the same refusals against a faked probe
// answer; this one asks the cluster.
func TestGaleraRefusesWhatItCannotKeep(t *testing.T) {
	tdb := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, db := range galeraNodes(t, tdb) {
		report, err := probe.Run(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, probe.Galera, report.Cluster, "node %d", i+1)

		c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner("node"))
		require.NoError(t, err)
		for _, strategy := range []runtime.Strategy{runtime.StrategySession, runtime.StrategyRow} {
			l, err := c.Lock(runtime.LockConfig{Name: "refused-" + string(strategy), Strategy: strategy, TTL: 2 * time.Second})
			require.NoError(t, err)
			_, err = l.Try(ctx, "")
			require.ErrorIs(t, err, runtime.ErrUnsupported, "node %d, %s", i+1, strategy)
			assert.Contains(t, err.Error(), "Galera", "node %d, %s: the refusal says why", i+1, strategy)
		}
		l, err := c.Lock(runtime.LockConfig{Name: "lease", TTL: 2 * time.Second})
		require.NoError(t, err)
		lease, err := l.Try(ctx, "")
		require.NoError(t, err, "node %d: the lease strategy works", i+1)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		err = lease.Guard(ctx, tx)
		require.ErrorIs(t, err, runtime.ErrUnsupported, "node %d: Guard", i+1)
		assert.Contains(t, err.Error(), "Galera")
		require.NoError(t, tx.Rollback())
		require.NoError(t, lease.Release(ctx))
	}
}

// TestGaleraLeaseExcludesAcrossNodes: two clients on each of the three
// nodes contend for one lease lock for ten seconds, each holding it for a
// millisecond when it gets it. No two holdings overlap, each holding's
// fencing token is above every earlier holding's, every node's clients
// hold it, and no error other than "not acquired" reaches a caller: the
// certification failures and brute-force aborts that Galera answers a
// losing write with (1213) are retried inside the runtime (the log says
// how many the nodes counted).
func TestGaleraLeaseExcludesAcrossNodes(t *testing.T) {
	tdb := testdb.New(t)
	nodes := galeraNodes(t, tdb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const perNode, window = 2, 10 * time.Second
	var (
		holder   atomic.Int32 // the holding client's number + 1, 0 when none
		mu       sync.Mutex
		last     int64 // the last holding's token
		overlaps []string
		backward []string
		held     = make([]int, len(nodes))
		errs     []error
	)
	conflicts := func() (n int64) {
		for _, db := range nodes {
			rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')")
			require.NoError(t, err)
			for rows.Next() {
				var name string
				var v int64
				require.NoError(t, rows.Scan(&name, &v))
				n += v
			}
			require.NoError(t, rows.Err())
			require.NoError(t, rows.Close())
		}
		return n
	}
	conflictsBefore := conflicts()
	deadline := time.Now().Add(window)
	var wg sync.WaitGroup
	for n, db := range nodes {
		for k := range perNode {
			id := int32(n*perNode + k + 1)
			c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner("client"))
			require.NoError(t, err)
			l, err := c.Lock(runtime.LockConfig{Name: "contended", TTL: 3 * time.Second})
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					lease, err := l.Try(ctx, "")
					if errors.Is(err, runtime.ErrNotAcquired) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						continue
					}
					if other := holder.Swap(id); other != 0 {
						mu.Lock()
						overlaps = append(overlaps, fmt.Sprintf("client %d entered while client %d held", id, other))
						mu.Unlock()
					}
					mu.Lock()
					if lease.Token() <= last {
						backward = append(backward, fmt.Sprintf("token %d after %d", lease.Token(), last))
					}
					last = lease.Token()
					held[n]++
					mu.Unlock()
					time.Sleep(time.Millisecond)
					holder.CompareAndSwap(id, 0)
					if err := lease.Release(ctx); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	assert.Empty(t, overlaps, "two holders at once")
	assert.Empty(t, backward, "fencing tokens rise")
	assert.Empty(t, errs, "errors that reached callers")
	for n, count := range held {
		assert.Positive(t, count, "node %d's clients held the lock", n+1)
	}
	t.Logf("holdings by node: %v; last token %d; certification failures and brute-force aborts retried: %d", held, last, conflicts()-conflictsBefore)
}

// TestGaleraJobStatements: the job store's statements keep their contract
// on a Galera node (drivertest's job checks, against the first node).
func TestGaleraJobStatements(t *testing.T) {
	drivertest.RunJobs(t, func(t *testing.T) driver.JobStore {
		tdb := testdb.New(t)
		return lockgendb.NewStore(galeraNodes(t, tdb)[0])
	})
}
