package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime/driver"
)

// MaxOwnerLen is the longest owner identity the lock table stores.
const MaxOwnerLen = 191

// Client is the lock runtime of one process (or one node in tests). It is
// safe for concurrent use. It holds no global state: two Clients in one
// process behave like two nodes.
type Client struct {
	store    driver.Store
	owner    string
	clock    Clock
	logger   *slog.Logger
	observer Observer
	tracer   Tracer
	wake     *wakeups
	galera   galeraCheck
	server   serverCheck
	// kept are pinned connections kept between session holdings (see
	// keptSessions).
	kept keptSessions
	// guardPause, set by tests only, runs as a session holding's Guard
	// begins (see PauseGuardForTest).
	guardPause func()
}

// Option configures a Client.
type Option func(*clientOptions) error

type clientOptions struct {
	owner    string
	clock    Clock
	logger   *slog.Logger
	observer Observer
	tracer   Tracer
}

// WithOwner sets the identity recorded in the lock rows this client holds,
// shown to observers (Holder). Default: "<hostname>-<pid>-<random>".
// It must be non-empty, at most MaxOwnerLen bytes, valid UTF-8, and not end
// in a space. Holders in one client
// share the owner; each holding is told apart by its fencing token.
func WithOwner(owner string) Option {
	return func(o *clientOptions) error {
		if owner == "" || len(owner) > MaxOwnerLen {
			return fmt.Errorf("%w: owner must be 1 to %d bytes, got %d", ErrInvalid, MaxOwnerLen, len(owner))
		}
		if !utf8.ValidString(owner) {
			// A server without strict mode would cut it at the first bad
			// byte, and renewals with the original would never match.
			return fmt.Errorf("%w: owner %q is not valid UTF-8", ErrInvalid, owner)
		}
		if strings.HasSuffix(owner, " ") {
			// The lock table's collation ignores trailing spaces.
			return fmt.Errorf("%w: owner %q ends in a space", ErrInvalid, owner)
		}
		o.owner = owner
		return nil
	}
}

// WithClock replaces the system clock (tests). Default: SystemClock.
func WithClock(c Clock) Option {
	return func(o *clientOptions) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalid)
		}
		o.clock = c
		return nil
	}
}

// WithLogger sets the logger for lease losses and renewal trouble.
// Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *clientOptions) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalid)
		}
		o.logger = l
		return nil
	}
}

// WithObserver sets the Observer that receives acquisitions, releases,
// renewal failures, lost leases and leadership changes. Default: NopObserver.
func WithObserver(obs Observer) Option {
	return func(o *clientOptions) error {
		if obs == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalid)
		}
		o.observer = obs
		return nil
	}
}

// NewClient returns a Client running its lock statements through store.
// It fails with ErrInvalid on a nil store or a bad option.
func NewClient(store driver.Store, opts ...Option) (*Client, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalid)
	}
	o := clientOptions{clock: SystemClock{}, observer: NopObserver{}, tracer: NopTracer{}}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.owner == "" {
		o.owner = defaultOwner()
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return &Client{store: store, owner: o.owner, clock: o.clock, logger: o.logger, observer: o.observer, tracer: o.tracer, wake: newWakeups()}, nil
}

// Owner returns the identity this client records in the rows it holds.
func (c *Client) Owner() string { return c.owner }

// Clock returns the clock the client was given (WithClock), the system
// clock by default.
func (c *Client) Clock() Clock { return c.clock }

// Logger returns the logger the client was given (WithLogger),
// slog.Default() by default.
func (c *Client) Logger() *slog.Logger { return c.logger }

// Observer returns the observer of WithObserver (NopObserver by default):
// the job client (runtime/jobs) reports to it too when it implements the
// jobs' Observer.
func (c *Client) Observer() Observer { return c.observer }

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	owner := host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	if len(owner) > MaxOwnerLen {
		owner = owner[len(owner)-MaxOwnerLen:]
	}
	return owner
}
