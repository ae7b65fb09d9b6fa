package jobs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/driver"
	"github.com/lockgen/lockgen/runtime/internal/genstore/lockgendb"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// claimReplyLost is a store whose first claim that takes runs commits but
// reports an error, as a claim whose COMMIT's reply was lost (or whose
// context ended during the commit) does: the generated RunsClaim returns
// the runs it read together with the error.
type claimReplyLost struct {
	lockgendb.Store
	failed atomic.Bool
	mu     sync.Mutex
	lost   []jobs.Run
}

func (s *claimReplyLost) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration, after *driver.RunCursor) ([]jobs.Run, error) {
	runs, err := s.Store.RunsClaim(ctx, queue, worker, limit, lease, after)
	if err == nil && len(runs) > 0 && s.failed.CompareAndSwap(false, true) {
		s.mu.Lock()
		s.lost = runs
		s.mu.Unlock()
		return runs, errors.New("test: the claim's commit reply was lost")
	}
	return runs, err
}

// TestFailedClaimStartsNoHandler: a claim that returned an error starts no
// handler, even for the runs it returned: the worker cannot know whether
// they are claimed (by this claim) or still due, so running them could
// overlap with a worker that claims them next with the same claim number.
// The runs are rescued after their lease and run under a later claim.
func TestFailedClaimStartsNoHandler(t *testing.T) {
	tdb := testdb.New(t)
	store := &claimReplyLost{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "lossy-claim")
	id, err := j.Enqueue(context.Background(), nil, newRun("once"))
	require.NoError(t, err)
	var mu sync.Mutex
	var handled []jobs.Run
	startWorker(t, j, jobs.WorkerConfig{Lease: time.Second, RescueEvery: 50 * time.Millisecond, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"once": {Handle: func(_ context.Context, run *jobs.Run) error {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, *run)
			return nil
		}}}})
	waitState(t, j, id, jobs.RunCompleted)
	store.mu.Lock()
	require.Len(t, store.lost, 1)
	lost := store.lost[0]
	store.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, handled, 1, "the run was handled once")
	assert.Greater(t, handled[0].Claim, lost.Claim, "the handled attempt holds a claim after the one whose reply was lost")
}

// placeStore records each claim: the place it was given and the runs it
// took.
type placeStore struct {
	lockgendb.Store
	mu     sync.Mutex
	claims []placeClaim
}

type placeClaim struct {
	after *driver.RunCursor
	runs  []jobs.Run
}

func (s *placeStore) RunsClaim(ctx context.Context, queue, worker string, limit int, lease time.Duration, after *driver.RunCursor) ([]jobs.Run, error) {
	runs, err := s.Store.RunsClaim(ctx, queue, worker, limit, lease, after)
	if err == nil {
		s.mu.Lock()
		s.claims = append(s.claims, placeClaim{after: after, runs: runs})
		s.mu.Unlock()
	}
	return runs, err
}

func (s *placeStore) recorded() []placeClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.claims)
}

// TestClaimsGoOnFromTheLastRun: while a backlog drains, a claim that
// follows a full batch goes on from that batch's last run
// (driver.RunCursor), so that it reads none of the index entries of the
// runs claimed before; one that finds nothing there claims from the first
// at once; and a claim from the first comes at least every four PollMin,
// so that a run of higher priority enqueued meanwhile is claimed long
// before the backlog is done (without those claims, it would be last).
func TestClaimsGoOnFromTheLastRun(t *testing.T) {
	tdb := testdb.New(t)
	store := &placeStore{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "places")
	ctx := context.Background()
	const backlog = 400
	batch := make([]jobs.NewRun, backlog)
	for i := range batch {
		batch[i] = newRun("drain")
	}
	require.NoError(t, j.EnqueueMany(ctx, nil, batch))
	var mu sync.Mutex
	var order []int64
	var urgent atomic.Int64
	handler := func(ctx context.Context, run *jobs.Run) error {
		mu.Lock()
		order = append(order, run.ID)
		n := len(order)
		mu.Unlock()
		if n == 50 {
			r := newRun("drain")
			r.Priority = 10
			id, err := j.Enqueue(ctx, nil, r)
			if err != nil {
				return err
			}
			urgent.Store(id)
		}
		time.Sleep(10 * time.Millisecond)
		return nil
	}
	// About a run per millisecond: a claim from the first every 80 ms
	// comes when some 80 runs were handled since the last.
	stop := startWorker(t, j, jobs.WorkerConfig{Concurrency: 10, PollMin: 20 * time.Millisecond, PollMax: 100 * time.Millisecond,
		Handlers: map[string]jobs.JobHandler{"drain": {Handle: handler}}})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == backlog+1
	}, time.Minute, 5*time.Millisecond)
	stop() // no claim after the records are read

	mu.Lock()
	handled := slices.Clone(order)
	mu.Unlock()
	seen := map[int64]bool{}
	for _, id := range handled {
		require.False(t, seen[id], "run %d handled twice", id)
		seen[id] = true
	}
	at := slices.Index(handled, urgent.Load())
	require.GreaterOrEqual(t, at, 0, "the urgent run was handled")
	assert.Less(t, at, backlog-100, "the urgent run, enqueued after the 50th, was handled %d-th of %d: claims from the first kept coming", at+1, backlog+1)

	claims := store.recorded()
	goOn := 0
	for i, c := range claims {
		if c.after == nil {
			continue
		}
		goOn++
		require.Positive(t, i)
		prev := claims[i-1].runs
		require.NotEmpty(t, prev, "claim %d went on from a place after a claim that took nothing", i)
		assert.Equal(t, prev[len(prev)-1].Place(), *c.after, "claim %d goes on from the last run of the claim before", i)
		if len(c.runs) == 0 {
			require.Less(t, i+1, len(claims))
			assert.Nil(t, claims[i+1].after, "claim %d found nothing after its place: the next claims from the first at once", i)
		}
	}
	assert.Greater(t, goOn, len(claims)/3, "most claims of the drain go on from a place (%d of %d)", goOn, len(claims))
}

// TestClaimFromThePlaceFindingNothingClaimsFromTheFirst: a due run before
// the place (here of higher priority, enqueued while the worker's one slot
// was busy) is claimed in the same round as the claim that found nothing
// after the place, not after an idle poll or a rescue (a minute and an
// hour here).
func TestClaimFromThePlaceFindingNothingClaimsFromTheFirst(t *testing.T) {
	tdb := testdb.New(t)
	store := &placeStore{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "before-the-place")
	ctx := context.Background()
	first, err := j.Enqueue(ctx, nil, newRun("slow"))
	require.NoError(t, err)
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	done := make(chan int64, 2)
	startWorker(t, j, jobs.WorkerConfig{Concurrency: 1, PollMin: time.Minute, PollMax: time.Minute, RescueEvery: time.Hour,
		Handlers: map[string]jobs.JobHandler{"slow": {Handle: func(ctx context.Context, run *jobs.Run) error {
			started <- struct{}{}
			<-release
			done <- run.ID
			return nil
		}}}})
	<-started
	r := newRun("slow")
	r.Priority = 5
	urgent, err := j.Enqueue(ctx, nil, r)
	require.NoError(t, err)
	close(release)
	var got []int64
	for len(got) < 2 {
		select {
		case d := <-done:
			got = append(got, d)
		case <-time.After(20 * time.Second):
			t.Fatalf("handled %v; the run before the place was not claimed", got)
		}
	}
	assert.Equal(t, []int64{first, urgent}, got)
	claims := store.recorded()
	require.GreaterOrEqual(t, len(claims), 3)
	require.Len(t, claims[0].runs, 1)
	assert.Nil(t, claims[0].after)
	require.NotNil(t, claims[1].after, "after a full batch, the next claim goes on from its last run")
	assert.Equal(t, claims[0].runs[0].Place(), *claims[1].after)
	assert.Empty(t, claims[1].runs)
	assert.Nil(t, claims[2].after)
	require.Len(t, claims[2].runs, 1)
	assert.Equal(t, urgent, claims[2].runs[0].ID)
}

// heldRuns is a handler whose runs wait until the test lets them finish,
// one per send on release, and that reports each start.
type heldRuns struct {
	started chan int64
	release chan struct{}
	done    chan int64
}

// heldRun is a run of the held job whose timeout outlasts the test.
func heldRun() jobs.NewRun {
	return jobs.NewRun{Job: "held", MaxAttempts: 3, Timeout: 10 * time.Minute}
}

func newHeldRuns(n int) *heldRuns {
	return &heldRuns{started: make(chan int64, n), release: make(chan struct{}), done: make(chan int64, n)}
}

func (h *heldRuns) handler() map[string]jobs.JobHandler {
	return map[string]jobs.JobHandler{"held": {Handle: func(ctx context.Context, run *jobs.Run) error {
		h.started <- run.ID
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		h.done <- run.ID
		return nil
	}}}
}

// wait receives n ids from ch, failing the test after 20 s.
func (h *heldRuns) wait(t *testing.T, ch chan int64, n int, what string) []int64 {
	t.Helper()
	var ids []int64
	for len(ids) < n {
		select {
		case id := <-ch:
			ids = append(ids, id)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: %d of %d", what, len(ids), n)
		}
	}
	return ids
}

// TestClaimAfterAFullClaimGathersHalfABatch: after a claim that took its
// whole limit (a backlog), a worker whose handlers finish one by one does
// not claim a run or two for each: it waits (up to ClaimGather, a minute
// here) until half a batch of its slots is free, and claims that many at
// once. (ClaimGather is at most PollMin: both are a minute here.)
func TestClaimAfterAFullClaimGathersHalfABatch(t *testing.T) {
	tdb := testdb.New(t)
	store := &placeStore{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "gather")
	ctx := context.Background()
	batch := make([]jobs.NewRun, 30)
	for i := range batch {
		batch[i] = heldRun()
	}
	require.NoError(t, j.EnqueueMany(ctx, nil, batch))
	h := newHeldRuns(len(batch))
	startWorker(t, j, jobs.WorkerConfig{Concurrency: 10, ClaimGather: time.Minute, PollMin: time.Minute, PollMax: time.Minute,
		RescueEvery: -1, Handlers: h.handler()})
	h.wait(t, h.started, 10, "runs started by the first claim")
	for range 4 {
		h.release <- struct{}{}
	}
	h.wait(t, h.done, 4, "runs finished")
	// Four slots are free, fewer than half the batch of 10: a worker that
	// claimed at once would have started more runs by now.
	time.Sleep(300 * time.Millisecond)
	select {
	case id := <-h.started:
		t.Fatalf("run %d started with 4 of 10 slots free, after a full claim", id)
	default:
	}
	h.release <- struct{}{}
	h.wait(t, h.started, 5, "runs started once half the batch was free")
	claims := store.recorded()
	require.Len(t, claims, 2)
	assert.Len(t, claims[0].runs, 10)
	assert.Len(t, claims[1].runs, 5, "the second claim takes the five free slots at once")
	for range len(batch) - 5 {
		h.release <- struct{}{}
	}
	h.wait(t, h.done, len(batch)-4, "the other runs finished")
}

// TestClaimAfterTheQueueRanDryDoesNotWait: a worker gathers free slots
// only while its last claim took its whole limit. Once a claim found fewer
// runs than its limit (the queue ran dry), it claims as soon as a handler
// finishes, however few of its slots are free: a run enqueued meanwhile
// (by another node, which wakes no worker here) starts then, not a
// ClaimGather (a minute) later.
func TestClaimAfterTheQueueRanDryDoesNotWait(t *testing.T) {
	tdb := testdb.New(t)
	store := &placeStore{Store: lockgendb.NewStore(tdb.Open(t))}
	j := jobsOn(t, store, "dry")
	other := jobsOn(t, lockgendb.NewStore(tdb.Open(t)), "other-node")
	ctx := context.Background()
	enqueue := func(n int) {
		batch := make([]jobs.NewRun, n)
		for i := range batch {
			batch[i] = heldRun()
		}
		require.NoError(t, j.EnqueueMany(ctx, nil, batch))
	}
	// idleAfter waits until the worker's last claim found nothing from the
	// first due run (no claim follows it while it is idle), later than
	// the claim that took n runs, and returns the claims so far.
	idleAfter := func(n int) []placeClaim {
		var claims []placeClaim
		require.Eventually(t, func() bool {
			claims = store.recorded()
			took := slices.IndexFunc(claims, func(c placeClaim) bool { return len(c.runs) == n })
			last := len(claims) - 1
			return took >= 0 && last > took && len(claims[last].runs) == 0 && claims[last].after == nil
		}, 20*time.Second, time.Millisecond)
		return claims
	}
	enqueue(10)
	h := newHeldRuns(15)
	startWorker(t, j, jobs.WorkerConfig{Concurrency: 10, ClaimGather: time.Minute, PollMin: time.Minute, PollMax: time.Minute,
		RescueEvery: -1, Handlers: h.handler()})
	h.wait(t, h.started, 10, "runs started by the first claim")
	// Half the slots free: the worker stops gathering, and its claim finds
	// nothing.
	for range 5 {
		h.release <- struct{}{}
	}
	idleAfter(10)
	// A local enqueue wakes it: it takes the four runs (fewer than its five
	// free slots), then finds nothing for the last slot.
	enqueue(4)
	h.wait(t, h.started, 4, "runs enqueued here")
	claims := idleAfter(4)
	require.Len(t, claims[0].runs, 10, "the first claim was full")
	// One slot free of ten; the next finished handler lets a claim go at
	// once.
	late, err := other.Enqueue(ctx, nil, heldRun())
	require.NoError(t, err)
	h.release <- struct{}{}
	assert.Equal(t, []int64{late}, h.wait(t, h.started, 1, "the run enqueued elsewhere, after a handler finished"))
	for range 9 {
		h.release <- struct{}{}
	}
	h.wait(t, h.done, 15, "the runs finished")
}
