package runtime

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDueQueuePopsEarliestFirst: the batcher's heap of next renewals gives
// them back in time order, whatever the order of pushes and pops (ties,
// pushes between pops, the heap emptied and filled again).
func TestDueQueuePopsEarliestFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q dueQueue
	var want []time.Duration // what the queue holds, kept sorted
	for step := 0; step < 20000; step++ {
		if len(q) == 0 || rng.IntN(3) > 0 {
			at := time.Duration(rng.IntN(500)) // many ties
			q.push(dueEntry{at: at, d: &dueLease{}})
			i, _ := slices.BinarySearch(want, at)
			want = slices.Insert(want, i, at)
			continue
		}
		got := q.pop()
		if got.at != want[0] || got.d == nil {
			t.Fatalf("step %d: popped %v (lease %v), want %v", step, got.at, got.d != nil, want[0])
		}
		want = want[1:]
		if len(q) != len(want) {
			t.Fatalf("step %d: %d entries, want %d", step, len(q), len(want))
		}
	}
	for len(q) > 0 {
		if got := q.pop(); got.at != want[0] {
			t.Fatalf("draining: popped %v, want %v", got.at, want[0])
		}
		want = want[1:]
	}
	if len(want) != 0 {
		t.Fatalf("%d entries lost", len(want))
	}
}
