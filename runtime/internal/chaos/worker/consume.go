package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/chaos/worker/chaosgen"
	"github.com/lockgen/lockgen/runtime/internal/chaos/worker/chaosgen/lockgendb"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/ops"
)

// consumerLease is the lease the consumer claims and heartbeats with; it
// heartbeats every third of it, and stops consumerMargin before its local
// deadline (a tenth of the lease, as a Go worker does).
const (
	consumerLease  = 2 * time.Second
	consumerMargin = 200 * time.Millisecond
)

// consumer works the external queue remote as a program in another
// language does over HTTP: through package ops, the layer whose Claim,
// Heartbeat, Complete and Fail the API's endpoints call (in-process here:
// the faults are the database's, not the HTTP hop's). Like a careful
// consumer it stops working on a run at its local deadline: the time it
// sent the last claim or heartbeat that succeeded plus the answer's
// LeaseMS, less a margin (the database may rescue the run after that), and
// its handler's context checks that deadline itself, so that a handler
// that runs first after a pause (SIGSTOP) is not told nil.
type consumer struct {
	w     *worker
	ops   *ops.Ops
	owner string
	// backoff is the pause after a failed claim: doubled at each failure
	// in a row (100 ms to 2 s), as a consumer should not hammer a server
	// that refuses it.
	backoff time.Duration
}

func newConsumer(w *worker, db *sql.DB, owner string) (*consumer, error) {
	cfg := chaosgen.OpsConfig()
	cfg.Store = lockgendb.NewStore(db)
	o, err := ops.New(db, cfg)
	if err != nil {
		return nil, err
	}
	return &consumer{w: w, ops: o, owner: owner}, nil
}

// consume claims up to 4 runs, waiting up to 2 s, and works them at once.
func (c *consumer) consume(ctx context.Context) {
	sent := time.Now()
	runs, err := c.ops.Claim(ctx, "remote", ops.ClaimRequest{Worker: c.owner, Limit: 4, Wait: "2s", Lease: consumerLease.String()})
	if err != nil {
		if ctx.Err() == nil {
			c.w.fail("consume claim", err)
			c.backoff = min(max(2*c.backoff, 100*time.Millisecond), 2*time.Second)
			c.w.sleep(ctx, c.backoff)
		}
		return
	}
	c.backoff = 0
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx, r, sent)
		}()
	}
	wg.Wait()
}

// work runs one claimed attempt: the handler, heartbeats beside it, then
// its outcome, retried until it is recorded or refused.
func (c *consumer) work(ctx context.Context, r ops.Claimed, sent time.Time) {
	hctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var mu sync.Mutex
	deadline := sent.Add(time.Duration(r.LeaseMS)*time.Millisecond - consumerMargin) // only ever moves later
	hctx = deadlineContext{Context: hctx, stop: stop, deadline: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return deadline
	}}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // the local lease: work stops when it passes, whatever a heartbeat in flight does
		defer bg.Done()
		for {
			mu.Lock()
			left := time.Until(deadline)
			mu.Unlock()
			if left <= 0 {
				stop(errLeasePassed)
				return
			}
			t := time.NewTimer(left)
			select {
			case <-hctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	go func() { // heartbeats, every third of the lease
		defer bg.Done()
		t := time.NewTicker(consumerLease / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			at := time.Now()
			hb, err := c.ops.Heartbeat(hctx, r.ID, ops.HeartbeatRequest{Claim: r.Claim, Lease: consumerLease.String()})
			switch {
			case err == nil:
				mu.Lock()
				if next := at.Add(time.Duration(hb.LeaseMS)*time.Millisecond - consumerMargin); next.After(deadline) {
					deadline = next
				}
				mu.Unlock()
			case errors.Is(err, ops.ErrConflict), errors.Is(err, ops.ErrCancelled), errors.Is(err, ops.ErrNotFound):
				stop(fmt.Errorf("consumer: %w", err))
				return
			}
		}
	}()
	run := &jobs.Run{ID: r.ID, Job: r.Job, Claim: r.Claim, Attempt: r.Attempt}
	err := handlers{c.w}.handle(hctx, run, c.w.between(0, 3*time.Second))
	stop(nil)
	bg.Wait()
	for ctx.Err() == nil {
		var oerr error
		if err == nil {
			_, oerr = c.ops.Complete(ctx, r.ID, r.Claim)
		} else {
			_, oerr = c.ops.Fail(ctx, r.ID, ops.FailRequest{Claim: r.Claim, Error: err.Error()})
		}
		if oerr == nil || errors.Is(oerr, ops.ErrConflict) || errors.Is(oerr, ops.ErrNotFound) {
			if oerr != nil {
				c.w.fail("consume outcome refused", oerr) // counted: the run was rescued meanwhile
			}
			return
		}
		c.w.sleep(ctx, 100*time.Millisecond)
	}
}

// errLeasePassed is the cause of a handler's context whose local deadline
// passed.
var errLeasePassed = errors.New("consumer: the lease passed with no heartbeat")

// deadlineContext is a handler's context that ends at a local deadline it
// checks itself in Err, whatever its watchdog goroutine has done yet.
type deadlineContext struct {
	context.Context
	stop     context.CancelCauseFunc
	deadline func() time.Time
}

func (c deadlineContext) Err() error {
	if !time.Now().Before(c.deadline()) {
		c.stop(errLeasePassed)
	}
	return c.Context.Err()
}
