package driver

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// ProbeIdle pings every idle connection of db at once, each bounded by ctx,
// and reports how many failed. A connection whose ping fails is closed by
// the driver and dropped by the pool as it is given back.
//
// Call it after a statement timed out on a connection that may be dead:
// after a blackhole or a partition heals, every connection that was idle
// in the pool is dead too, and database/sql hands out idle connections
// first, so without it each one is found dead only by a statement of its
// own that times out, one after the other (eight idle connections and a
// 300 ms statement bound: 2.4 s, more than a short lease). Probing them
// together costs one bound. On a healthy pool it costs one COM_PING per
// idle connection; while every connection is busy it probes nothing.
func ProbeIdle(ctx context.Context, db *sql.DB) int {
	if db == nil {
		return 0
	}
	n := db.Stats().Idle
	var wg sync.WaitGroup
	var dead atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Conn(ctx)
			if err != nil {
				return
			}
			defer conn.Close()
			if err := conn.PingContext(ctx); err != nil {
				dead.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(dead.Load())
}
