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
	sqldriver "database/sql/driver"
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

// galeraNodes returns the test's database on each node of the Galera
// cluster, as the test's application user, the first node's first.
func galeraNodes(t *testing.T, tdb *testdb.DB) []*sql.DB {
	return clusterNodes(t, tdb, "LOCKGEN_TEST_GALERA_DSNS")
}

// clusterNodes returns the test's database on each node of the cluster
// named by the environment variable env, as the test's application user,
// the first node's first.
func clusterNodes(t *testing.T, tdb *testdb.DB, env string) []*sql.DB {
	t.Helper()
	list := os.Getenv(env)
	if list == "" {
		t.Fatalf("%s names no cluster nodes: run `make cluster-test`, which starts the clusters", env)
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

// checkRefusals checks, on the node db of a cluster of the kind named,
// that the probe reports that cluster, that the session and row strategies
// are refused at first use with an error naming it, and, when the node
// takes writes, that the lease strategy works there and Guard is refused.
func checkRefusals(t *testing.T, ctx context.Context, db *sql.DB, cluster probe.Cluster, node string, writes bool) {
	t.Helper()
	report, err := probe.Run(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, cluster, report.Cluster, node)
	c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner("node"))
	require.NoError(t, err)
	for _, strategy := range []runtime.Strategy{runtime.StrategySession, runtime.StrategyRow} {
		l, err := c.Lock(runtime.LockConfig{Name: "refused-" + string(strategy), Strategy: strategy, TTL: 2 * time.Second})
		require.NoError(t, err)
		_, err = l.Try(ctx, "")
		require.ErrorIs(t, err, runtime.ErrUnsupported, "%s, %s", node, strategy)
		assert.Contains(t, err.Error(), string(cluster), "%s, %s: the refusal says why", node, strategy)
	}
	if !writes {
		return
	}
	l, err := c.Lock(runtime.LockConfig{Name: "lease", TTL: 2 * time.Second})
	require.NoError(t, err)
	lease, err := l.Try(ctx, "")
	require.NoError(t, err, "%s: the lease strategy works", node)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	err = lease.Guard(ctx, tx)
	require.ErrorIs(t, err, runtime.ErrUnsupported, "%s: Guard", node)
	assert.Contains(t, err.Error(), string(cluster), "%s: Guard's refusal says why", node)
	require.NoError(t, tx.Rollback())
	require.NoError(t, lease.Release(ctx))
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
		checkRefusals(t, ctx, db, probe.Galera, fmt.Sprintf("node %d", i+1), true)
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
	conflicts := statusSum(t, nodes, "wsrep_local_cert_failures", "wsrep_local_bf_aborts")
	before := conflicts()
	held, last := contendAcross(t, nodes, 10*time.Second)
	t.Logf("holdings by node: %v; last token %d; certification failures and brute-force aborts retried: %d", held, last, conflicts()-before)
}

// statusSum returns a function that adds up the named global status
// counters of every node.
func statusSum(t *testing.T, nodes []*sql.DB, names ...string) func() int64 {
	return func() (n int64) {
		for _, db := range nodes {
			rows, err := db.QueryContext(context.Background(), "SHOW GLOBAL STATUS WHERE Variable_name IN (?"+strings.Repeat(", ?", len(names)-1)+")", anySlice(names)...)
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
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// contendAcross runs two clients per node on one lease lock for window, each
// holding it for a millisecond when it gets it, and checks that no two
// holdings overlap, that each holding's fencing token is above every
// earlier one's, that every node's clients held it, that no error other
// than "not acquired" reached a caller, and that an acquire reported busy
// after its retries all lost to transient errors left the row to others
// (its owner is not the holder then). It returns the holdings by
// node and the last token.
func contendAcross(t *testing.T, nodes []*sql.DB, window time.Duration) (held []int, last int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), window+time.Minute)
	defer cancel()
	const perNode = 2
	var (
		holder   atomic.Int32 // the holding client's number + 1, 0 when none
		mu       sync.Mutex
		overlaps []string
		backward []string
		hidden   []string // holdings their client was told it did not get
		errs     []error
	)
	held = make([]int, len(nodes))
	lostRetries := 0
	deadline := time.Now().Add(window)
	var wg sync.WaitGroup
	for n, db := range nodes {
		for k := range perNode {
			id := int32(n*perNode + k + 1)
			owner := fmt.Sprintf("client-%d", id)
			c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner(owner))
			require.NoError(t, err)
			l, err := c.Lock(runtime.LockConfig{Name: "contended", TTL: 3 * time.Second})
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					lease, err := l.Try(ctx, "")
					if errors.Is(err, runtime.ErrNotAcquired) {
						if runtime.IsTransient(err) {
							// Every retry lost to a transient error: the
							// statement rolled back, so the row must not
							// show this client as its holder.
							h, herr := l.Holder(ctx, "")
							mu.Lock()
							lostRetries++
							if herr != nil {
								errs = append(errs, herr)
							} else if h.Held && h.Owner == owner {
								hidden = append(hidden, fmt.Sprintf("%s holds token %d after its acquire failed: %v", owner, h.Token, err))
							}
							mu.Unlock()
						}
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
	assert.Empty(t, hidden, "a failed acquire left its client holding the row")
	t.Logf("acquires busy after every retry lost to a transient error: %d", lostRetries)
	for n, count := range held {
		assert.Positive(t, count, "node %d's clients held the lock", n+1)
	}
	return held, last
}

// TestGaleraJobStatements: the job store's statements keep their contract
// on a Galera node (drivertest's job checks, against the first node).
func TestGaleraJobStatements(t *testing.T) {
	drivertest.RunJobs(t, func(t *testing.T) driver.JobStore {
		tdb := testdb.New(t)
		return lockgendb.NewStore(galeraNodes(t, tdb)[0])
	})
}

// groupReplication returns the test's database on each member of the
// single-primary Group Replication group (LOCKGEN_TEST_GR_MODE single);
// the first member is the primary.
func groupReplication(t *testing.T, tdb *testdb.DB) []*sql.DB {
	t.Helper()
	require.Equal(t, "single", os.Getenv("LOCKGEN_TEST_GR_MODE"), "LOCKGEN_TEST_GR_MODE: these tests need a single-primary group (make cluster-test sets it)")
	return clusterNodes(t, tdb, "LOCKGEN_TEST_GR_DSNS")
}

// TestGroupReplicationRefusesWhatItCannotKeep: on every member of a real
// single-primary group, the probe reports Group Replication, and the
// session and row strategies and Guard are refused at first use with the
// reason (each member grants GET_LOCK and row locks to its own clients;
// certification covers write sets, not Guard's shared lock); the lease
// strategy works on the primary.
func TestGroupReplicationRefusesWhatItCannotKeep(t *testing.T) {
	tdb := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, db := range groupReplication(t, tdb) {
		// A secondary takes no writes.
		checkRefusals(t, ctx, db, probe.GroupReplication, fmt.Sprintf("member %d", i+1), i == 0)
	}
}

// TestGroupReplicationMultiPrimaryIsRefused: on every member of a real
// multi-primary group (LOCKGEN_TEST_GR_MODE multi), the probe reports a
// multi-primary member and every strategy, leader election and the job
// queue are refused at first use, with the reason (probe.MultiPrimaryRefusal:
// such a group can split after a member rejoins under write load, MySQL
// Bug#121063, which a 30-minute chaos run here ran into).
func TestGroupReplicationMultiPrimaryIsRefused(t *testing.T) {
	require.Equal(t, "multi", os.Getenv("LOCKGEN_TEST_GR_MODE"), "LOCKGEN_TEST_GR_MODE: this test needs a multi-primary group (make cluster-test sets it)")
	tdb := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, db := range clusterNodes(t, tdb, "LOCKGEN_TEST_GR_DSNS") {
		member := fmt.Sprintf("member %d", i+1)
		report, err := probe.Run(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, probe.GroupReplication, report.Cluster, member)
		assert.True(t, report.MultiPrimary, member)
		assert.Contains(t, report.Server(), "multi-primary", member)
		for _, f := range probe.Features {
			assert.Equal(t, probe.MultiPrimaryRefusal, report.Refusal(f), "%s: %s", member, f)
		}
		c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner("node"))
		require.NoError(t, err)
		for _, strategy := range []runtime.Strategy{runtime.StrategyLease, runtime.StrategySession, runtime.StrategyRow} {
			l, err := c.Lock(runtime.LockConfig{Name: "refused-" + string(strategy), Strategy: strategy, TTL: 2 * time.Second})
			require.NoError(t, err)
			_, err = l.Try(ctx, "")
			require.ErrorIs(t, err, runtime.ErrUnsupported, "%s, %s", member, strategy)
			assert.Contains(t, err.Error(), "Bug#121063", "%s, %s: the refusal says why", member, strategy)
		}
		leader, err := c.Lock(runtime.LockConfig{Name: "refused-leader", TTL: 2 * time.Second})
		require.NoError(t, err)
		err = leader.RunAsLeader(ctx, func(context.Context, *runtime.Lease) error { return nil })
		require.ErrorIs(t, err, runtime.ErrUnsupported, "%s: leader election", member)
	}
}

// TestGroupReplicationLeaseExcludesAcrossClients: clients on the primary
// contend for one lease for ten seconds (contendAcross): no overlap,
// tokens rising, and no error reaches a caller.
func TestGroupReplicationLeaseExcludesAcrossClients(t *testing.T) {
	tdb := testdb.New(t)
	members := groupReplication(t, tdb)[:1] // the primary
	admin := tdb.Admin(t)                   // the first member, as root: the group's statistics
	conflicts := func() (n int64) {
		require.NoError(t, admin.QueryRow("SELECT CAST(IFNULL(SUM(COUNT_CONFLICTS_DETECTED), 0) AS SIGNED) FROM performance_schema.replication_group_member_stats").Scan(&n))
		return n
	}
	before := conflicts()
	held, last := contendAcross(t, members, 10*time.Second)
	t.Logf("holdings: %v; last token %d; certification conflicts detected: %d", held, last, conflicts()-before)
}

// TestGroupReplicationJobStatements: the job store's statements keep their
// contract on the primary (drivertest's job checks).
func TestGroupReplicationJobStatements(t *testing.T) {
	drivertest.RunJobs(t, func(t *testing.T) driver.JobStore {
		tdb := testdb.New(t)
		return lockgendb.NewStore(groupReplication(t, tdb)[0])
	})
}

// TestGroupReplicationFailoverFindsTheMemberThatTakesWrites: a pool opened
// through runtime.Failover with the members in reverse order (the primary
// last) opens every connection on the primary, however many secondaries
// come before it in the list; and a lease works through it. Without
// SELECT on performance_schema.replication_group_members the application
// user is refused on every member, with an error that names the grant (a
// member restarted outside its group could take writes alone, and its
// state cannot be read without it); with the grant, and as root, it
// works.
func TestGroupReplicationFailoverFindsTheMemberThatTakesWrites(t *testing.T) {
	tdb := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	groupReplication(t, tdb)
	var addrs []string
	for _, dsn := range strings.Split(os.Getenv("LOCKGEN_TEST_GR_DSNS"), ",") {
		cfg, err := mysql.ParseDSN(dsn)
		require.NoError(t, err)
		addrs = append([]string{cfg.Addr}, addrs...)
	}
	want := addrs[len(addrs)-1] // the first member: the primary
	open := func(user *mysql.Config) *sql.DB { return failoverPool(t, user, tdb.Name, addrs) }
	ungranted := open(tdb.Config)
	err := ungranted.PingContext(ctx)
	require.ErrorIs(t, err, runtime.ErrNoWritableMember)
	assert.Contains(t, err.Error(), "GRANT SELECT ON performance_schema.replication_group_members")
	require.NoError(t, ungranted.Close())
	tdb.Exec(t, "GRANT SELECT ON performance_schema.replication_group_members TO '"+tdb.User+"'@'%'")

	for _, user := range []*mysql.Config{tdb.Config, tdb.AdminConfig} {
		db := open(user)
		for range 4 {
			conn, err := db.Conn(ctx)
			require.NoError(t, err)
			var port string
			require.NoError(t, conn.QueryRowContext(ctx, "SELECT @@port").Scan(&port))
			assert.True(t, strings.HasSuffix(want, ":"+port), "%s: a connection on port %s, want %s", user.User, port, want)
			require.NoError(t, conn.Close())
			db.SetMaxIdleConns(0) // the next connection is a new one
		}
		c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner("failover"))
		require.NoError(t, err)
		l, err := c.Lock(runtime.LockConfig{Name: "failover", TTL: 5 * time.Second})
		require.NoError(t, err)
		lease, err := l.Try(ctx, "")
		require.NoError(t, err, "%s: a lease through the member that takes writes", user.User)
		require.NoError(t, lease.Release(ctx))
		require.NoError(t, db.Close())
	}
}

// failoverPool opens a pool on database name through runtime.Failover over
// the members at addrs, in that order, as user; each member's connect is
// bounded (runtime.ConnectTimeout, 2 s). The test closes it.
func failoverPool(t *testing.T, user *mysql.Config, name string, addrs []string) *sql.DB {
	t.Helper()
	var members []sqldriver.Connector
	for _, addr := range addrs {
		cfg := user.Clone()
		cfg.Addr, cfg.DBName = addr, name
		cfg.Timeout, cfg.ReadTimeout = time.Second, 5*time.Second
		c, err := mysql.NewConnector(cfg)
		require.NoError(t, err)
		members = append(members, runtime.ConnectTimeout(c, 2*time.Second))
	}
	db := sql.OpenDB(runtime.Failover(members...))
	t.Cleanup(func() { _ = db.Close() })
	return db
}
