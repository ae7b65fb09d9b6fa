package ops

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// Holding is a held lock row: who holds it, with which fencing token, and
// for how long by the database clock.
type Holding struct {
	Lock     string `json:"lock"`
	Key      string `json:"key"`
	Owner    string `json:"owner"`
	Token    int64  `json:"token"`
	Strategy string `json:"strategy,omitempty"`
	// AcquiredAt is when the holding began (UTC, database clock).
	AcquiredAt time.Time `json:"acquired_at"`
	// ExpiresAt and TimeLeftMS are the lease's expiry and what is left of
	// it; both absent for session and row holdings, which last until they
	// are released (or their connection ends).
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	TimeLeftMS *int64     `json:"time_left_ms,omitempty"`
	// Waiters counts the sessions that wait on the server for this
	// holding (a row lock wait, or GET_LOCK for session locks and lease
	// locks with wait_mode server), when the server can tell; absent
	// otherwise (LockPage.WaitersUnseen says why).
	Waiters *int64 `json:"waiters,omitempty"`

	// sessionMark: the row shows a session mark, held only while its
	// server-side lock is (see dropEndedSessions).
	sessionMark bool
}

// LockSummary is a declared lock and how many of its rows are held.
type LockSummary struct {
	Lock
	// Held counts the held rows among the first CountCap rows of the
	// lock; Exact is false when the lock has more rows than that.
	Held  int64 `json:"held"`
	Exact bool  `json:"exact"`
}

// LocksFilter selects held locks: of one lock name (all when empty), after
// a cursor (a page's Next), at most Limit (DefaultLimit when 0).
type LocksFilter struct {
	Name  string
	After string
	Limit int
}

// LockPage is one page of held locks, in (lock, key) order. Next, when not
// empty, is the cursor of the next page; the page may hold fewer items
// than asked when its rows were read up to ScanLimit.
type LockPage struct {
	Items []Holding `json:"items"`
	Next  string    `json:"next,omitempty"`
	// WaitersUnseen says, one sentence each, whose waiters the server
	// could not tell on this page and how to make them visible.
	WaitersUnseen []string `json:"waiters_unseen,omitempty"`
}

// Locks lists held locks and, where the server can tell, how many
// sessions wait for each (see Holding.Waiters). There is no force-release: a holder whose row
// was freed under it would go on working as the holder while another
// acquires, and fencing tokens protect only writes that check them.
func (o *Ops) Locks(ctx context.Context, f LocksFilter) (*LockPage, error) {
	limit, err := checkLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	if f.Name != "" {
		if err := checkName("name", f.Name, 191); err != nil {
			return nil, err
		}
	}
	name, key, err := decodeLockCursor(f.After)
	if err != nil {
		return nil, err
	}
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	page := &LockPage{Items: []Holding{}}
	err = o.peek(ctx, func(tx *sql.Tx) error {
		var rows *sql.Rows
		if f.Name != "" {
			switch {
			case name > f.Name:
				return nil
			case name < f.Name: // from the lock's first row, its unkeyed one included
				rows, err = tx.QueryContext(ctx, o.q.locksScanNameFrom, f.Name, "", ScanLimit)
			default:
				rows, err = tx.QueryContext(ctx, o.q.locksScanName, f.Name, key, ScanLimit)
			}
		} else {
			rows, err = tx.QueryContext(ctx, o.q.locksScan, name, name, key, ScanLimit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		scanned := 0
		var last Holding
		for rows.Next() {
			h, held, err := o.scanHolding(rows)
			if err != nil {
				return err
			}
			scanned++
			last = h
			if !held {
				continue
			}
			page.Items = append(page.Items, h)
			if len(page.Items) == limit {
				page.Next = encodeLockCursor(h.Lock, h.Key)
				if err := rows.Close(); err != nil {
					return err
				}
				return o.dropEndedSessions(ctx, tx, page)
			}
		}
		if scanned == ScanLimit {
			page.Next = encodeLockCursor(last.Lock, last.Key)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		return o.dropEndedSessions(ctx, tx, page)
	})
	if err != nil {
		return nil, fmt.Errorf("ops: list locks: %w", err)
	}
	o.addWaiters(ctx, page)
	return page, nil
}

// dropEndedSessions takes off the page the rows that show a session mark
// whose server-side lock is free: a session holding leaves its mark when
// it ends (or its holder dies), and only the server knows whether the
// lock is still held. The page may then hold fewer items than asked.
func (o *Ops) dropEndedSessions(ctx context.Context, tx *sql.Tx, page *LockPage) error {
	byLock := map[string][]int{}
	for i, h := range page.Items {
		if h.sessionMark {
			byLock[h.Lock] = append(byLock[h.Lock], i)
		}
	}
	if len(byLock) == 0 {
		return nil
	}
	drop := map[int]bool{}
	for lock, idx := range byLock {
		keys := make([]string, len(idx))
		for j, i := range idx {
			keys[j] = page.Items[i].Key
		}
		held, err := o.sessionHeld(ctx, tx, lock, keys)
		if err != nil {
			return err
		}
		for j, i := range idx {
			drop[i] = !held[j]
		}
	}
	kept := page.Items[:0]
	for i, h := range page.Items {
		if !drop[i] {
			kept = append(kept, h)
		}
	}
	page.Items = kept
	return nil
}

// markedKeys reads the keys of a lock's rows that show a session mark,
// among its first CountCap rows.
func (o *Ops) markedKeys(ctx context.Context, tx *sql.Tx, lock string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, o.q.lockMarks, lock, o.cfg.CountCap)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// sessionHeldBatch is the most locks one sessionHeld statement asks about.
const sessionHeldBatch = 500

// sessionHeld asks the server whether the session locks of lock's keys are
// held (IS_USED_LOCK of the GET_LOCK name session holders compute,
// runtime.ServerLockName), one statement per sessionHeldBatch keys.
func (o *Ops) sessionHeld(ctx context.Context, tx *sql.Tx, lock string, keys []string) ([]bool, error) {
	held := make([]bool, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), sessionHeldBatch)
		cols := strings.TrimSuffix(strings.Repeat("IS_USED_LOCK(?) IS NOT NULL, ", n), ", ")
		args := make([]any, n)
		dest := make([]any, n)
		got := make([]bool, n)
		for i, k := range keys[:n] {
			args[i] = runtime.ServerLockName(o.cfg.TablePrefix, lock, k, false)
			dest[i] = &got[i]
		}
		if err := tx.QueryRowContext(ctx, "SELECT "+cols, args...).Scan(dest...); err != nil {
			return nil, err
		}
		held = append(held, got...)
		keys = keys[n:]
	}
	return held, nil
}

// scanHolding reads one row of lockCols.
func (o *Ops) scanHolding(rows interface{ Scan(...any) error }) (Holding, bool, error) {
	var h Holding
	var expires time.Time
	var leftUs int64
	var held bool
	if err := rows.Scan(&h.Lock, &h.Key, &h.Owner, &h.Token, &h.AcquiredAt, &expires, &leftUs, &held); err != nil {
		return h, false, err
	}
	if l, ok := o.declaredLock(h.Lock); ok {
		h.Strategy = l.Strategy
	}
	h.sessionMark = expires.Year() == 9999
	if expires.Year() > 1970 && expires.Year() < 9999 {
		ms := leftUs / 1000
		h.ExpiresAt, h.TimeLeftMS = &expires, &ms
	}
	return h, held, nil
}

// The lock cursor is the last (name, key) of a page, opaque to clients.
func encodeLockCursor(name, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(name + "\x00" + key))
}

func decodeLockCursor(s string) (name, key string, err error) {
	if s == "" {
		return "", "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.Contains(string(b), "\x00") {
		return "", "", invalid("after", "after must be the next cursor of a page of locks")
	}
	name, key, _ = strings.Cut(string(b), "\x00")
	return name, key, nil
}
