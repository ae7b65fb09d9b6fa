package runtime

// Strategy is how a lock is held, as declared in lockgen.yaml (strategy)
// and reported to Observers. docs/strategies.md compares them.
type Strategy string

// Strategies.
const (
	// StrategyLease is a lease row renewed while held (the default): one
	// autocommit statement to acquire, renew or release, expiry by the
	// database clock, safe on Galera.
	StrategyLease Strategy = "lease"
	// StrategySession holds a server-side named lock (GET_LOCK) on a pinned
	// connection: waiting happens on the server, without polling, and the
	// server frees the lock when the connection dies.
	StrategySession Strategy = "session"
	// StrategyRow holds the lock row's exclusive row lock (SELECT ... FOR
	// UPDATE) in a transaction that lasts the critical section: the server
	// itself excludes other holders and serves waiters in arrival order,
	// and a holder's writes in that transaction commit atomically with its
	// release.
	StrategyRow Strategy = "row"
)
