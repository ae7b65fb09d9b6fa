package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/probe"
)

// LeaderOption configures RunAsLeader.
type LeaderOption func(*leaderOptions)

type leaderOptions struct {
	onElected   func(lease *Lease)
	onRevoked   func(err error)
	onNewLeader func(leader Holder)
	poll        time.Duration
}

// OnElected is called when this client becomes the leader, before fn runs.
func OnElected(f func(lease *Lease)) LeaderOption {
	return func(o *leaderOptions) { o.onElected = f }
}

// OnRevoked is called when a term ends: fn returned and leadership was given
// up (or had been lost). err is fn's error joined with the release's, which
// wraps ErrLeaseLost when leadership was lost rather than given up.
func OnRevoked(f func(err error)) LeaderOption {
	return func(o *leaderOptions) { o.onRevoked = f }
}

// OnNewLeader is called while campaigning whenever another holder (a new
// owner or token) is seen leading. It costs one read per poll.
func OnNewLeader(f func(leader Holder)) LeaderOption {
	return func(o *leaderOptions) { o.onNewLeader = f }
}

// DefaultPollEvery caps the default of PollEvery: a follower given no
// PollEvery polls every TTL/4, at most every DefaultPollEvery.
const DefaultPollEvery = 500 * time.Millisecond

// PollEvery sets the longest pause between two campaign attempts of a
// follower (attempts back off with jitter up to it). Default: the smaller
// of TTL/4 and DefaultPollEvery. A leader that steps down gracefully is replaced within
// about one poll; one that dies, within its TTL plus one poll.
func PollEvery(d time.Duration) LeaderOption {
	return func(o *leaderOptions) { o.poll = d }
}

// RunAsLeader campaigns for the (unkeyed) lock until ctx ends. Each time it
// is elected it runs fn with a context that is cancelled, with cause
// ErrLeaseLost, as soon as leadership is lost (and when ctx ends), waits for
// fn to return, gives leadership up (so a follower takes over at once) and
// campaigns again after one poll interval. Two clients never run fn at the same time as long as fn
// stops when its context ends: the lease's local deadline cancels it before
// the database lets a follower in.
//
// Server errors while campaigning are logged and retried. RunAsLeader
// returns nil when ctx ends, ErrInvalid for a keyed lock or a nil fn, and
// at once, like every other entry point, an error wrapping ErrUnsupported
// when the strategy cannot run safely on the server or ErrInvalid when the
// connection (parseTime=true missing, say) or the lock table cannot serve
// it (see Client.CheckServer).
func (l *Lock) RunAsLeader(ctx context.Context, fn func(ctx context.Context, lease *Lease) error, opts ...LeaderOption) error {
	if fn == nil {
		return fmt.Errorf("%w: nil fn for leader %q", ErrInvalid, l.cfg.Name)
	}
	if l.cfg.Keyed {
		return fmt.Errorf("%w: lock %q is keyed; leader election needs an unkeyed lock", ErrInvalid, l.cfg.Name)
	}
	if l.cfg.Strategy != StrategyLease {
		// The server frees a session lock or a row lock the moment the
		// leader's connection breaks, before the leader learns of it: a
		// follower could run fn while the old leader still does.
		return fmt.Errorf("%w: lock %q uses strategy %s; leader election needs strategy lease (a %s lock is freed before its holder learns it lost it)", ErrInvalid, l.cfg.Name, l.cfg.Strategy, l.cfg.Strategy)
	}
	o := leaderOptions{poll: min(l.cfg.TTL/4, DefaultPollEvery)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.poll <= 0 {
		return fmt.Errorf("%w: leader %q: poll interval must be positive", ErrInvalid, l.cfg.Name)
	}
	for {
		lease, err := l.campaign(ctx, &o)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.lead(ctx, lease, fn, &o)
		// Step back for one poll, so that a leader whose fn returned does
		// not win its own lock back before the followers try.
		if sleepOrWake(ctx, l.client.clock, o.poll, nil) != nil {
			return nil
		}
	}
}

// IsLeader reports whether a RunAsLeader call on this Lock leads right now:
// it is in a term whose lease is neither lost nor released.
func (l *Lock) IsLeader() bool {
	lease := l.leader.Load()
	return lease != nil && lease.Err() == nil
}

// campaign tries to acquire the lock until it succeeds or ctx ends. Waiting
// backs off with jitter up to o.poll and wakes at once on a local release.
func (l *Lock) campaign(ctx context.Context, o *leaderOptions) (*Lease, error) {
	var seen Holder
	k := rowKey{l.cfg.Name, ""}
	w := l.client.wake.join(k)
	defer l.client.wake.leave(k, w)
	lw := l.newLeaseWaiter("", w.wake, o.poll)
	defer lw.close(ctx)
	select { // local campaigners take turns; only the first polls
	case <-w.turn:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		start := l.client.clock.Now()
		// The server check, once per Client (then a map lookup): a
		// connection or server that cannot run the lock ends the campaign
		// at once, as every other entry point refuses it.
		err := l.client.checkServer(ctx, nil, probe.Lease)
		var lease *Lease
		if err == nil {
			lease, err = lw.try(ctx)
		}
		l.observeAcquire(start, err)
		switch {
		case err == nil:
			return lease, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrUnsupported) || errors.Is(err, ErrInvalid):
			return nil, err
		case !errors.Is(err, ErrNotAcquired):
			l.client.logger.Warn("lockgen: campaign attempt failed", "lock", l.cfg.Name, "error", err)
		case o.onNewLeader != nil:
			if h, herr := l.Holder(ctx, ""); herr == nil && h.Held && (h.Owner != seen.Owner || h.Token != seen.Token) {
				seen = h
				o.onNewLeader(h)
			}
		}
		// With WaitOnServer this waits on the server, at most one TTL, so
		// OnNewLeader may see a new leader up to one TTL late.
		if err := lw.pause(ctx, l.cfg.TTL); err != nil {
			return nil, err
		}
	}
}

// lead runs one term: fn while the lease holds, then the release.
func (l *Lock) lead(ctx context.Context, lease *Lease, fn func(context.Context, *Lease) error, o *leaderOptions) {
	l.leader.Store(lease)
	l.client.observer.LeaderChanged(l.cfg.Name, true)
	l.client.logger.Info("lockgen: elected leader", "lock", l.cfg.Name, "owner", lease.Owner(), "token", lease.Token())
	defer func() {
		l.leader.CompareAndSwap(lease, nil)
		l.client.observer.LeaderChanged(l.cfg.Name, false)
	}()
	err := runHolding(ctx, lease, func(ctx context.Context, lease *Lease) error {
		// Inside the holding: a panicking callback still releases the lease.
		if o.onElected != nil {
			o.onElected(lease)
		}
		return fn(ctx, lease)
	})
	l.client.logger.Info("lockgen: leadership ended", "lock", l.cfg.Name, "token", lease.Token(), "error", err)
	if o.onRevoked != nil {
		o.onRevoked(err)
	}
}
