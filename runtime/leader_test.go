package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

// TestLeaderElectionNeverOverlaps: three nodes campaign; leaders step down
// after short terms, and one leader is partitioned from the database in the
// middle of a term. An overlap checker on a shared log fails if two leaders'
// fn ever run at once or a term's token does not exceed the last one.
func TestLeaderElectionNeverOverlaps(t *testing.T) {
	tdb := testdb.New(t)
	cfg := runtime.LockConfig{Name: "leader", TTL: 400 * time.Millisecond}
	var chk overlapChecker
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	partitioned := &faultStore{Store: lockgendb.NewStore(tdb.Open(t))}
	stores := []driver.Store{partitioned, lockgendb.NewStore(tdb.Open(t)), lockgendb.NewStore(tdb.Open(t))}

	var mu sync.Mutex
	terms, lostTerms := 0, 0
	var wg sync.WaitGroup
	for i, store := range stores {
		c, err := runtime.NewClient(store, runtime.WithOwner(fmt.Sprintf("node-%d", i)))
		require.NoError(t, err)
		l, err := c.Lock(cfg)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.RunAsLeader(ctx, func(ctx context.Context, lease *runtime.Lease) error {
				chk.enter(lease.Token())
				defer chk.exit()
				assert.True(t, l.IsLeader())
				mu.Lock()
				terms++
				cut := store == partitioned && terms > 3 && lostTerms == 0
				mu.Unlock()
				term := 30 * time.Millisecond // step down after a short term
				if cut {
					partitioned.partitioned.Store(true) // the leader loses the database mid-term
					defer partitioned.partitioned.Store(false)
					term = 10 * time.Second
				}
				select {
				case <-ctx.Done():
					if errors.Is(context.Cause(ctx), runtime.ErrLeaseLost) {
						mu.Lock()
						lostTerms++
						mu.Unlock()
					}
				case <-time.After(term):
				}
				return nil
			}, runtime.PollEvery(20*time.Millisecond))
			assert.NoError(t, err)
		}()
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return terms >= 40 && lostTerms >= 1
	}, 60*time.Second, 10*time.Millisecond)
	cancel()
	wg.Wait()
	chk.check(t)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d terms, %d ended by a lost lease", terms, lostTerms)
}

// TestLeaderHandsOverOnGracefulStop: a leader whose ctx ends releases the
// lease; a follower is elected within about one poll, with a higher token.
func TestLeaderHandsOverOnGracefulStop(t *testing.T) {
	t.Run("poll", func(t *testing.T) { testGracefulHandover(t, false) })
	t.Run("server", func(t *testing.T) { testGracefulHandover(t, true) })
}

func testGracefulHandover(t *testing.T, waitOnServer bool) {
	tdb := testdb.New(t)
	cfg := runtime.LockConfig{Name: "graceful", TTL: 3 * time.Second, WaitOnServer: waitOnServer}
	rec := &recorder{}
	a, b := sessionNode(t, tdb.Open(t), runtime.WithOwner("a"), runtime.WithObserver(rec)), sessionNode(t, tdb.Open(t), runtime.WithOwner("b"))
	la, lb := a.lock(t, cfg), b.lock(t, cfg)

	var elected, revoked []string
	var mu sync.Mutex
	actx, stopA := context.WithCancel(context.Background())
	aDone := make(chan error)
	aTokens := make(chan int64, 1)
	go func() {
		aDone <- la.RunAsLeader(actx, func(ctx context.Context, lease *runtime.Lease) error {
			aTokens <- lease.Token()
			<-ctx.Done()
			return nil
		},
			runtime.OnElected(func(lease *runtime.Lease) { mu.Lock(); elected = append(elected, lease.Owner()); mu.Unlock() }),
			runtime.OnRevoked(func(err error) { mu.Lock(); revoked = append(revoked, fmt.Sprint(err)); mu.Unlock() }))
	}()
	aToken := <-aTokens
	assert.True(t, la.IsLeader())

	bctx, stopB := context.WithCancel(context.Background())
	defer stopB()
	bElected := make(chan time.Time, 1)
	bDone := make(chan error)
	var seen []runtime.Holder
	go func() {
		bDone <- lb.RunAsLeader(bctx, func(ctx context.Context, lease *runtime.Lease) error {
			assert.Greater(t, lease.Token(), aToken)
			bElected <- time.Now()
			<-ctx.Done()
			return nil
		}, runtime.OnNewLeader(func(h runtime.Holder) { mu.Lock(); seen = append(seen, h); mu.Unlock() }))
	}()
	time.Sleep(200 * time.Millisecond) // b campaigns against a for a while
	assert.False(t, lb.IsLeader())
	stopped := time.Now()
	stopA()
	require.NoError(t, <-aDone)
	assert.False(t, la.IsLeader())
	select {
	case at := <-bElected:
		t.Logf("graceful failover took %v (wait on server %v, poll <= %v, ttl %v)", at.Sub(stopped), waitOnServer, min(cfg.TTL/4, 500*time.Millisecond), cfg.TTL)
		assert.Less(t, at.Sub(stopped), cfg.TTL, "a graceful stop must not wait for the lease to expire")
	case <-time.After(10 * time.Second):
		t.Fatal("follower not elected")
	}
	stopB()
	require.NoError(t, <-bDone)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"a"}, elected)
	assert.Equal(t, []string{"<nil>"}, revoked, "a graceful term ends without error")
	require.NotEmpty(t, seen)
	assert.Equal(t, "a", seen[0].Owner)
	assert.Equal(t, aToken, seen[0].Token)
	assert.Equal(t, 1, rec.count("leader graceful"), "the observer saw a's term start")
	assert.Equal(t, 1, rec.count("follower graceful"), "and end")
}

func TestRunAsLeaderMisuse(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	keyed := n.lock(t, runtime.LockConfig{Name: "k", Keyed: true, TTL: time.Second})
	plain := n.lock(t, runtime.LockConfig{Name: "p", TTL: time.Second})
	require.ErrorIs(t, keyed.RunAsLeader(context.Background(), func(context.Context, *runtime.Lease) error { return nil }), runtime.ErrInvalid)
	require.ErrorIs(t, plain.RunAsLeader(context.Background(), nil), runtime.ErrInvalid)
}

// The leader child process: see TestKilledLeaderProcessIsReplaced.
const leaderChildEnv = "LOCKGEN_TEST_LEADER_CHILD"

func runLeaderChild() int {
	l, err := childLock(leaderChildEnv, killedLeaderConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_ = l.RunAsLeader(context.Background(), func(ctx context.Context, lease *runtime.Lease) error {
		fmt.Printf("elected %d\n", lease.Token())
		<-ctx.Done()
		return nil
	})
	return 0
}

var killedLeaderConfig = runtime.LockConfig{Name: "killed-leader", TTL: 3 * time.Second, RenewEvery: time.Second, WaitOnServer: true}

// TestKilledLeaderProcessIsReplaced: a leader in another OS process is
// killed with SIGKILL (no release); a follower here is elected within about
// one TTL, with a higher token, and not before the database let it.
func TestKilledLeaderProcessIsReplaced(t *testing.T) {
	tdb := testdb.New(t)
	child, out := testkit.StartChild(t, leaderChildEnv, tdb.Config.FormatDSN())
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	childToken, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "elected ")), 10, 64)
	require.NoError(t, err)

	n := sessionNode(t, tdb.Open(t), runtime.WithOwner("parent"))
	l := n.lock(t, killedLeaderConfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	elected := make(chan time.Time, 1)
	done := make(chan error)
	go func() {
		done <- l.RunAsLeader(ctx, func(ctx context.Context, lease *runtime.Lease) error {
			assert.Greater(t, lease.Token(), childToken)
			elected <- time.Now()
			<-ctx.Done()
			return nil
		})
	}()
	time.Sleep(500 * time.Millisecond)
	h, err := l.Holder(context.Background(), "")
	require.NoError(t, err)
	require.Equal(t, "child", h.Owner, "the child leads while alive")
	killed := time.Now()
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	select {
	case at := <-elected:
		took := at.Sub(killed)
		t.Logf("failover after SIGKILL took %v (ttl %v)", took, killedLeaderConfig.TTL)
		assert.Less(t, took, 2*killedLeaderConfig.TTL, "replaced within about one TTL")
	case <-time.After(30 * time.Second):
		t.Fatal("no new leader after the old one was killed")
	}
	cancel()
	require.NoError(t, <-done)
}

// TestPanicInOnElectedReleasesLeadership: a panicking callback does not
// leave the lease held (and renewing) with nobody leading.
func TestPanicInOnElectedReleasesLeadership(t *testing.T) {
	tdb := testdb.New(t)
	n := newNode(t, tdb.Open(t))
	l := n.lock(t, runtime.LockConfig{Name: "panicky", TTL: 3 * time.Second})
	require.PanicsWithValue(t, "boom", func() {
		_ = l.RunAsLeader(context.Background(), func(context.Context, *runtime.Lease) error { return nil },
			runtime.OnElected(func(*runtime.Lease) { panic("boom") }))
	})
	h, err := l.Holder(context.Background(), "")
	require.NoError(t, err)
	assert.False(t, h.Held, "the lease was released")
	assert.False(t, l.IsLeader())
}

// TestIsLeaderFalseOnceLeadershipIsLost: a leader partitioned from the
// database reads IsLeader() == false as soon as its term's context ends,
// while fn is still running (before anyone else can be elected).
func TestIsLeaderFalseOnceLeadershipIsLost(t *testing.T) {
	tdb := testdb.New(t)
	faulty := &faultStore{Store: lockgendb.NewStore(tdb.Open(t))}
	c, err := runtime.NewClient(faulty)
	require.NoError(t, err)
	l, err := c.Lock(runtime.LockConfig{Name: "isleader", TTL: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan bool, 2)
	done := make(chan error, 1)
	go func() {
		done <- l.RunAsLeader(ctx, func(ctx context.Context, lease *runtime.Lease) error {
			seen <- l.IsLeader()
			faulty.partitioned.Store(true)
			<-ctx.Done()
			seen <- l.IsLeader() // fn still runs: the term is over all the same
			cancel()
			return nil
		})
	}()
	assert.True(t, <-seen, "leader while the term lasts")
	assert.False(t, <-seen, "not leader once the lease is lost")
	faulty.partitioned.Store(false)
	<-done
	assert.False(t, l.IsLeader())
}
