//go:build cluster

package runtime_test

import (
	"context"
	"database/sql"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/listener"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
)

// term is one leader term as its fn saw it.
type term struct {
	who        string
	token      int64
	start, end time.Time // end is zero while the term lasts
}

// leaderAcrossAKill runs two leader candidates of one lease lock (TTL 3 s),
// each on a pool of its own through runtime.Failover over the cluster's
// members (addrs, the first the one to kill; the second candidate lists
// them from the second), waits until the first leads, SIGKILLs the member
// at addrs[0], and waits until leadership is healthy again: a term that
// began after the kill, or the term of the kill still going a lease after
// it (its leader's pool failed over and renewed in time). It checks that
// no two terms overlap and that tokens rise, starts the member again with
// restart (a shell command), and reports the leaderless time.
func leaderAcrossAKill(t *testing.T, env string, restart string) {
	tdb := testdb.New(t)
	clusterNodes(t, tdb, env) // the test's database and user on every node
	var addrs []string
	for _, dsn := range strings.Split(os.Getenv(env), ",") {
		cfg, err := mysql.ParseDSN(dsn)
		require.NoError(t, err)
		addrs = append(addrs, cfg.Addr)
	}
	if strings.Contains(env, "GR") {
		tdb.Exec(t, "GRANT SELECT ON performance_schema.replication_group_members TO '"+tdb.User+"'@'%'")
	}
	pool := func(first int) *sql.DB {
		return failoverPool(t, tdb.Config, tdb.Name, append(slices.Clone(addrs[first:]), addrs[:first]...))
	}
	var mu sync.Mutex
	var terms []*term
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // also when a check below fails the test early
	var wg sync.WaitGroup
	candidate := func(who string, db *sql.DB) {
		c, err := runtime.NewClient(lockgendb.NewStore(db), runtime.WithOwner(who))
		require.NoError(t, err)
		l, err := c.Lock(runtime.LockConfig{Name: "failover-leader", TTL: 3 * time.Second})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.RunAsLeader(ctx, func(ctx context.Context, lease *runtime.Lease) error {
				tm := &term{who: who, token: lease.Token(), start: time.Now()}
				mu.Lock()
				terms = append(terms, tm)
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				tm.end = time.Now()
				mu.Unlock()
				return nil
			})
		}()
	}
	leading := func(pred func(*term) bool) *term {
		mu.Lock()
		defer mu.Unlock()
		for _, tm := range terms {
			if pred(tm) {
				return tm
			}
		}
		return nil
	}
	candidate("first", pool(0))
	require.Eventually(t, func() bool { return leading(func(tm *term) bool { return tm.end.IsZero() }) != nil },
		30*time.Second, 50*time.Millisecond, "the first candidate leads")
	candidate("second", pool(1))
	time.Sleep(time.Second)

	_, port, err := net.SplitHostPort(addrs[0])
	require.NoError(t, err)
	pid, err := listener.PID(port)
	require.NoError(t, err)
	dropped := watchMemberDropped(t, ctx, tdb, addrs, port, strings.Contains(env, "GR"))
	killed := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	t.Cleanup(func() {
		cmd := exec.Command("bash", "-c", restart)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LOCKGEN_TEST_DSN=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "starting the member again: %s", out)
		if strings.Contains(env, "GR") {
			// The other tests write to the first member: make it the
			// primary again.
			cfg := tdb.AdminConfig.Clone()
			cfg.Addr = addrs[0]
			c, err := mysql.NewConnector(cfg)
			require.NoError(t, err)
			admin := sql.OpenDB(c)
			defer admin.Close()
			_, err = admin.Exec("SELECT group_replication_set_as_primary(@@server_uuid)")
			assert.NoError(t, err, "making the first member the primary again")
		}
	})

	var after *term
	survived := false
	deadline := killed.Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if after = leading(func(tm *term) bool { return tm.start.After(killed) }); after != nil {
			break
		}
		if time.Since(killed) > 6*time.Second {
			// A lease and more after the kill, the term of the kill is
			// still going: its leader renewed through another member.
			if tm := leading(func(tm *term) bool { return tm.start.Before(killed) && tm.end.IsZero() }); tm != nil {
				survived = true
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	require.True(t, after != nil || survived, "leadership came back within two minutes of the member's SIGKILL")

	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(terms, func(a, b *term) int { return a.start.Compare(b.start) })
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		assert.False(t, cur.start.Before(prev.end), "term %d (%s) began %s before term %d (%s) ended", i, cur.who, prev.end.Sub(cur.start), i-1, prev.who)
		assert.Greater(t, cur.token, prev.token, "tokens rise from term to term")
	}
	if survived {
		t.Logf("the leader's term went on across the SIGKILL of %s: its pool failed over and renewed within the lease; %d terms", addrs[0], len(terms))
		return
	}
	var before *term
	for _, tm := range terms {
		if tm.start.Before(killed) {
			before = tm
		}
	}
	lost := "-"
	if before != nil && !before.end.IsZero() {
		lost = before.end.Sub(killed).Round(time.Millisecond).String()
	}
	t.Logf("SIGKILL of %s: the old leader's term ended %s after it; the cluster %s; a new term (%s, token %d) began %s after it", addrs[0], lost, dropped(killed), after.who, after.token, after.start.Sub(killed).Round(time.Millisecond))
}

// watchMemberDropped watches, from the member at addrs[1], the cluster
// drop the member listening on port deadPort (after its SIGKILL): on
// Galera the cluster's size falling below 3, on Group Replication the
// member leaving replication_group_members and, where there is one, a
// primary elected among the others. The function it returns says when
// those happened after killed, for the test's log.
func watchMemberDropped(t *testing.T, ctx context.Context, tdb *testdb.DB, addrs []string, deadPort string, group bool) func(killed time.Time) string {
	cfg := tdb.AdminConfig.Clone()
	cfg.Addr = addrs[1]
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	admin := sql.OpenDB(c)
	t.Cleanup(func() { _ = admin.Close() })
	var mu sync.Mutex
	var droppedAt, primaryAt time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var gone, primary bool
			if group {
				var members, primaries int
				err := admin.QueryRowContext(ctx, `SELECT SUM(MEMBER_PORT = ?), SUM(MEMBER_PORT <> ? AND MEMBER_ROLE = 'PRIMARY' AND MEMBER_STATE = 'ONLINE')
					FROM performance_schema.replication_group_members`, deadPort, deadPort).Scan(&members, &primaries)
				gone, primary = err == nil && members == 0, err == nil && primaries > 0
			} else {
				var name string
				var size int
				err := admin.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size)
				gone = err == nil && size < len(addrs)
			}
			now := time.Now() // after the answer: a slow one must not date the drop early
			mu.Lock()
			if gone && droppedAt.IsZero() {
				droppedAt = now
			}
			if gone && primary && primaryAt.IsZero() {
				primaryAt = now
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func(killed time.Time) string {
		<-done // the test's ctx is cancelled by now
		mu.Lock()
		defer mu.Unlock()
		if droppedAt.IsZero() {
			return "had not dropped the member when leadership was back"
		}
		msg := "dropped the member " + droppedAt.Sub(killed).Round(time.Millisecond).String() + " after it"
		if !primaryAt.IsZero() {
			msg += ", with a primary among the others " + primaryAt.Sub(killed).Round(time.Millisecond).String() + " after it"
		}
		return msg
	}
}

// TestGaleraLeaderAcrossANodeKill: a leader on node 1 of a Galera cluster
// whose node is SIGKILLed: no two terms overlap, tokens rise, and
// leadership is back within two minutes (the figure is logged).
func TestGaleraLeaderAcrossANodeKill(t *testing.T) {
	leaderAcrossAKill(t, "LOCKGEN_TEST_GALERA_DSNS", "bash ../.ci/ensure-galera >/dev/null")
}

// TestGroupReplicationLeaderAcrossThePrimaryKill: a leader on the primary
// of a single-primary group whose member is SIGKILLed: the group elects a new primary, the
// candidates' Failover pools find it, no two terms overlap, tokens rise,
// and leadership is back within two minutes (the figure is logged).
func TestGroupReplicationLeaderAcrossThePrimaryKill(t *testing.T) {
	require.Equal(t, "single", os.Getenv("LOCKGEN_TEST_GR_MODE"), "LOCKGEN_TEST_GR_MODE: this test needs a single-primary group (make cluster-test sets it)")
	leaderAcrossAKill(t, "LOCKGEN_TEST_GR_DSNS", "bash ../.ci/ensure-group-replication rejoin >/dev/null")
}
