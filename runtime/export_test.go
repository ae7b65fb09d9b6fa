package runtime

import (
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/probe"
)

// WaitersForTest returns how many lock rows have waiters registered for
// in-process wake-ups: zero whenever nobody is waiting.
func WaitersForTest(c *Client) int {
	c.wake.mu.Lock()
	defer c.wake.mu.Unlock()
	return len(c.wake.queues)
}

// SessionLockNameForTest exposes the GET_LOCK name of (name, key).
func SessionLockNameForTest(namespace, name, key string) string {
	return sessionLockName(namespace, name, key)
}

// QueueLenForTest returns how many local waiters queue for (name, key).
func QueueLenForTest(c *Client, name, key string) int {
	c.wake.mu.Lock()
	defer c.wake.mu.Unlock()
	return len(c.wake.queues[rowKey{name, key}])
}

// WakeLockNameForTest exposes the GET_LOCK name of the wake lock of (name,
// key) (LockConfig.WaitOnServer).
func WakeLockNameForTest(namespace, name, key string) string {
	return wakeLockName(namespace, name, key)
}

// SetKeptIdleForTest makes c keep session connections for d between
// holdings instead of keptIdle; call it before c's first holding. The
// connections still kept when t ends go back to their pools then.
func SetKeptIdleForTest(t testing.TB, c *Client, d time.Duration) {
	c.kept.idle = d
	t.Cleanup(func() {
		c.kept.mu.Lock()
		conns := c.kept.conns
		c.kept.conns = nil
		c.kept.mu.Unlock()
		for _, k := range conns {
			_ = k.conn.Close()
		}
	})
}

// ReleasingForTest reports whether Release has begun on ls.
func ReleasingForTest(ls *Lease) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.released
}

// ReportClusterForTest makes the kept probe report of c, which must have
// run, say that the server is a node of cluster, as a probe of such a node
// would.
func ReportClusterForTest(c *Client, cluster probe.Cluster) {
	c.server.mu.Lock()
	defer c.server.mu.Unlock()
	r := *c.server.report
	r.Cluster = cluster
	c.server.report = &r
}

// PauseGuardForTest makes every session holding's Guard of c run pause as
// it begins, after Lease.Guard's own checks: a test holds a Guard there
// while the holding is released and the lock taken again.
func PauseGuardForTest(c *Client, pause func()) {
	c.guardPause = pause
}

// SetAfterBatchForTest has f run after each renewal batch of keyed lease
// lock l released its flight, before the batch reports its losses. Set it
// before l's first lease.
func SetAfterBatchForTest(l *Lock, f func()) {
	l.batcher.afterFlight = f
}
