// Package claimplace keeps where a process's claims of a queue go on from
// (driver.RunCursor), for the Go workers' claimer and the HTTP consume
// operations alike.
package claimplace

import (
	"context"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/driver"
)

// Place is where the next claim of a queue may go on from, and when the
// last claim from the first due run was decided. Its zero value claims
// from the first. It is safe for concurrent use; concurrent claims each
// leave their last run as the place, and the last to finish wins (the
// place is a hint: a claim from a place that lags walks a few more index
// entries, one from a place ahead leaves runs to the next claim from the
// first).
type Place struct {
	mu        sync.Mutex
	next      *driver.RunCursor
	fromFirst time.Time
}

// Claim claims up to limit due runs of queue through js, as
// driver.JobStore.RunsClaim does, and returns them in claim order. It goes
// on from the place when the claim before it took a full batch (limit
// runs, so more may be due after its last) and the last claim from the
// first was decided less than every before now; else it claims from the
// first. A claim from the place that finds nothing claims from the first
// at once, with the same ctx: a due run before the place (of a higher
// priority, or one another claim skipped while it held it) waits at most
// every longer than it would have, and never for a poll. With an error it
// returns no runs (the commit may not have landed) and forgets the place.
func (p *Place) Claim(ctx context.Context, js driver.JobStore, now time.Time, every time.Duration, queue, worker string, limit int, lease time.Duration) ([]driver.Run, error) {
	p.mu.Lock()
	after := p.next
	if after != nil && now.Sub(p.fromFirst) >= every {
		after = nil
	}
	if after == nil {
		p.fromFirst = now
	}
	p.mu.Unlock()
	runs, err := js.RunsClaim(ctx, queue, worker, limit, lease, after)
	if err == nil && len(runs) == 0 && after != nil {
		// Nothing due after the place: what is left, if anything, is
		// before it.
		p.mu.Lock()
		p.fromFirst = now
		p.mu.Unlock()
		runs, err = js.RunsClaim(ctx, queue, worker, limit, lease, nil)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = nil
	if err == nil && len(runs) == limit && limit > 0 {
		next := runs[len(runs)-1].Place()
		p.next = &next
	}
	return runs, err
}
