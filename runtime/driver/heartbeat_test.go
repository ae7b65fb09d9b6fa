package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSortHeartbeat: a claim is extended only when its row was locked and
// runs with that very claim; a row locked with another claim or state is
// gone, unless an operator cancelled it with that claim (cancelled); a
// row not locked (held by another transaction, or deleted) is
// busy, never gone.
func TestSortHeartbeat(t *testing.T) {
	c := func(id, claim int64) Claim { return Claim{ID: id, Claim: claim} }
	for _, tc := range []struct {
		name   string
		claims []Claim
		locked []HeartbeatRow
		want   Heartbeat
	}{
		{"all running", []Claim{c(1, 1), c(2, 3)}, []HeartbeatRow{{1, 1, true, false, false}, {2, 3, true, false, false}}, Heartbeat{Extended: []Claim{c(1, 1), c(2, 3)}}},
		{"claimed again", []Claim{c(1, 1)}, []HeartbeatRow{{1, 2, true, false, false}}, Heartbeat{Gone: []Claim{c(1, 1)}}},
		{"not running", []Claim{c(1, 1)}, []HeartbeatRow{{1, 1, false, false, false}}, Heartbeat{Gone: []Claim{c(1, 1)}}},
		{"skipped", []Claim{c(1, 1), c(2, 1)}, []HeartbeatRow{{2, 1, true, false, false}}, Heartbeat{Extended: []Claim{c(2, 1)}, Busy: []Claim{c(1, 1)}}},
		{"cancelled by an operator", []Claim{c(1, 1)}, []HeartbeatRow{{1, 1, false, true, false}}, Heartbeat{Cancelled: []Claim{c(1, 1)}}},
		{"cancelled after another claim", []Claim{c(1, 1)}, []HeartbeatRow{{1, 2, false, true, false}}, Heartbeat{Gone: []Claim{c(1, 1)}}},
		{"none locked", []Claim{c(1, 1)}, nil, Heartbeat{Busy: []Claim{c(1, 1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SortHeartbeat(tc.claims, tc.locked))
		})
	}
}

// TestHeartbeatPlan: a heartbeat locks only the runs its read without a
// lock found running with their claims; the read settles the others
// (another claim, or not running: gone or cancelled), and a run it did not
// find is neither (busy).
func TestHeartbeatPlan(t *testing.T) {
	c := func(id, claim int64) Claim { return Claim{ID: id, Claim: claim} }
	claims := []Claim{c(1, 1), c(2, 3), c(3, 1), c(4, 2), c(5, 1)}
	peeked := []HeartbeatRow{
		{1, 1, true, false, false},  // running with its claim: lock it
		{2, 4, true, false, false},  // claimed again: settled, never locked
		{3, 1, false, true, false},  // cancelled with its claim: settled
		{4, 2, false, false, false}, // rescued (available) or finished: settled
		{9, 1, true, false, false},  // not asked for
	}
	settled, lock := HeartbeatPlan(claims, peeked)
	assert.Equal(t, []int64{1}, lock)
	assert.Equal(t, []HeartbeatRow{peeked[1], peeked[2], peeked[3]}, settled)
	assert.Equal(t, Heartbeat{Gone: []Claim{c(2, 3), c(4, 2)}, Cancelled: []Claim{c(3, 1)}, Busy: []Claim{c(1, 1), c(5, 1)}},
		SortHeartbeat(claims, settled), "before the lock: run 1 unknown yet, run 5 not found")
}

// TestSortCompletion: of the claims a completion did not complete, busy
// are those whose runs a read without a lock still finds running or
// orphaned with them; the rest are gone.
func TestSortCompletion(t *testing.T) {
	c := func(id, claim int64) Claim { return Claim{ID: id, Claim: claim} }
	claims := []Claim{c(1, 1), c(2, 1), c(3, 2), c(4, 1), c(5, 1), c(6, 1)}
	peeked := []HeartbeatRow{
		RowOf(1, 1, "completed"), // completed by this statement
		RowOf(2, 1, "running"),   // held by another transaction: busy
		RowOf(3, 2, "orphaned"),  // a late success, held: busy
		RowOf(4, 2, "running"),   // claimed again: gone
		RowOf(5, 1, "cancelled"), // cancelled: gone
		// 6 pruned: gone
	}
	assert.Equal(t, Completion{Completed: 1, Busy: []Claim{c(2, 1), c(3, 2)}}, SortCompletion(claims, 1, peeked))

	// The single-run outcomes: an orphaned run is busy for a failure (which
	// records it) but gone for a give-back (which leaves it orphaned).
	assert.ErrorIs(t, OutcomeBusy(c(2, 1), peeked, false), ErrRunBusy)
	assert.ErrorIs(t, OutcomeBusy(c(3, 2), peeked, true), ErrRunBusy)
	assert.NoError(t, OutcomeBusy(c(3, 2), peeked, false))
	assert.NoError(t, OutcomeBusy(c(4, 1), peeked, true), "claimed again")
	assert.NoError(t, OutcomeBusy(c(6, 1), peeked, true), "pruned")
}
