package runtime

// WaitersForTest returns how many lock rows have waiters registered for
// in-process wake-ups: zero whenever nobody is waiting.
func WaitersForTest(c *Client) int {
	c.wake.mu.Lock()
	defer c.wake.mu.Unlock()
	return len(c.wake.waiters)
}

// SessionLockNameForTest exposes the GET_LOCK name of (name, key).
func SessionLockNameForTest(namespace, name, key string) string {
	return sessionLockName(namespace, name, key)
}
