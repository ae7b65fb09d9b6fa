package jobs

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// dbClock tells the time by the database's clock, for the scheduler: all
// nodes compute their ticks from it, so a node whose wall clock is off or
// stepped (by an hour, say) neither inserts ticks ahead of the others
// (which every node that restarts afterwards would take as its position)
// nor falls silent. It reads UTC_TIMESTAMP(6) now and then and moves it
// on with the local monotonic clock in between, so a step of the local
// wall clock changes nothing. Until a read succeeds it is the local clock.
type dbClock struct {
	clock runtime.Clock
	db    *sql.DB // nil: the store has no pool to read from
	mu    sync.Mutex
	// at is the database's time when the local clock read local.
	at, local time.Time
}

// dbClockResync is how long a reading of the database clock is used
// before the next; dbClockTimeout bounds each read.
const (
	dbClockResync  = 30 * time.Second
	dbClockTimeout = 2 * time.Second
)

func newDBClock(clock runtime.Clock, db *sql.DB) *dbClock {
	return &dbClock{clock: clock, db: db}
}

// Now returns the database's time (UTC) as best known, reading the
// database clock again when the last reading is older than dbClockResync.
func (d *dbClock) Now(ctx context.Context) time.Time {
	d.mu.Lock()
	stale := d.at.IsZero() || d.clock.Now().Sub(d.local) >= dbClockResync
	d.mu.Unlock()
	if stale && d.db != nil {
		d.read(ctx)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at.IsZero() {
		return d.clock.Now()
	}
	return d.at.Add(d.clock.Now().Sub(d.local))
}

// read takes a reading, half the round trip after the statement was
// sent. A failed read keeps the reading before (and is retried at the
// next Now).
func (d *dbClock) read(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, dbClockTimeout)
	defer cancel()
	sent := d.clock.Now()
	var at time.Time
	if err := d.db.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&at); err != nil {
		return
	}
	got := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at, d.local = at.Add(got.Sub(sent)/2), got
}
