package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/internal/testkit"
)

const frozenChildEnv = "LOCKGEN_TEST_FROZEN_CHILD"

// frozenConfig: a short lease, so a 2.2 s freeze is well past its local
// deadline (0.9 s after the last renewal was sent) and its database expiry.
var frozenConfig = runtime.LockConfig{Name: "frozen", TTL: time.Second, Wait: time.Minute}

// freezeGap is how long a pause between two checks must be to count as the
// parent's SIGSTOP (the lease lasts 1 s).
const freezeGap = 700 * time.Millisecond

// runFrozenChild holds the frozen lock again and again. Inside fn it checks
// fn's ctx and the lease alternately, timing each check; the first check
// that starts more than freezeGap after the previous one ended is the
// first look after a SIGSTOP, and it prints what that check returned. When
// the freeze fell inside a check (which may have read the clock before
// it), the next check is the first whole one after the pause.
func runFrozenChild() int {
	l, err := childLock(frozenChildEnv, frozenConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for {
		err := l.With(context.Background(), "", func(ctx context.Context, lease *runtime.Lease) error {
			fmt.Printf("held %d\n", lease.Token())
			checks := []struct {
				name string
				err  func() error
			}{{"ctx.Err", ctx.Err}, {"lease.Err", lease.Err}}
			prev := time.Now()
			var frozenInside time.Duration // a freeze that fell inside the previous check
			for i := 0; ; i++ {
				c := checks[i%2]
				start := time.Now()
				err := c.err()
				end := time.Now()
				switch {
				case end.Sub(start) > freezeGap && frozenInside == 0:
					// Frozen inside this check: it may have read the clock
					// before the pause, so the next check is the first
					// whole one after it.
					frozenInside = end.Sub(start)
				case frozenInside > 0 || start.Sub(prev) > freezeGap:
					lost := errors.Is(err, context.Canceled) || errors.Is(err, runtime.ErrLeaseLost)
					gap, where := start.Sub(prev), ""
					if frozenInside > 0 {
						gap, where = frozenInside, " (frozen inside the check before)"
					}
					fmt.Printf("resumed after %v%s: first check %s lost=%t (%v)\n", gap.Round(time.Millisecond), where, c.name, lost, err)
					return nil
				case err != nil:
					fmt.Printf("lost before any freeze: %s: %v\n", c.name, err)
					return nil
				}
				prev = end
				time.Sleep(time.Millisecond)
			}
		})
		if err != nil && !errors.Is(err, runtime.ErrLeaseLost) {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
}

// TestFrozenHolderSeesLossAtFirstCheck: a holder in another OS process is
// frozen with SIGSTOP for 2.2 s (its lease: TTL 1 s) at a random moment
// inside fn, and this process takes the lock meanwhile. After SIGCONT the
// holder's first check, of fn's ctx or of the lease, must report the loss,
// every time: the loss used to be recorded only when a timer goroutine
// ran, and after a pause the holder's own goroutine often ran first and
// read nil (10 of 16 freezes).
func TestFrozenHolderSeesLossAtFirstCheck(t *testing.T) {
	tdb := testdb.New(t)
	child, lines := testkit.StartChild(t, frozenChildEnv, tdb.Config.FormatDSN())
	next := func() string {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		return strings.TrimSpace(line)
	}

	l := newNode(t, tdb.Open(t), runtime.WithOwner("parent")).lock(t, runtime.LockConfig{Name: frozenConfig.Name, TTL: frozenConfig.TTL})
	ctx := context.Background()
	const freezes = 6
	reported := 0
	for i := 0; i < freezes; i++ {
		line := next()
		require.True(t, strings.HasPrefix(line, "held "), line)
		time.Sleep(time.Duration(50+rand.IntN(300)) * time.Millisecond)
		require.NoError(t, child.Process.Signal(syscall.SIGSTOP))
		frozen := time.Now()
		// The database lets this process in once the frozen lease expired.
		var taken *runtime.Lease
		var err error
		for taken == nil && time.Since(frozen) < 2*time.Second {
			if taken, err = l.Try(ctx, ""); errors.Is(err, runtime.ErrNotAcquired) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			require.NoError(t, err)
		}
		require.NotNil(t, taken, "freeze %d: the frozen holder's lease expired", i)
		require.NoError(t, taken.Release(ctx))
		time.Sleep(time.Until(frozen.Add(2200 * time.Millisecond)))
		require.NoError(t, child.Process.Signal(syscall.SIGCONT))
		line = next()
		t.Logf("freeze %d: %s", i, line)
		if assert.Contains(t, line, "resumed after", "freeze %d", i) {
			assert.Contains(t, line, "lost=true", "freeze %d: the first check after the pause must report the loss", i)
			if strings.Contains(line, "lost=true") {
				reported++
			}
		}
	}
	t.Logf("%d freezes, %d first checks after resume reported the loss", freezes, reported)
}
