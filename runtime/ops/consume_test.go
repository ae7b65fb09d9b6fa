package ops_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
	"github.com/lockgen/lockgen/runtime/ops"
)

func ptr[T any](v T) *T { return &v }

func codeOf(t *testing.T, err error) ops.Code {
	t.Helper()
	var e *ops.Error
	require.True(t, errors.As(err, &e), "want an *ops.Error, got %v", err)
	return e.Code
}

func TestConsumeClaimHeartbeatComplete(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)
	a := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail", Args: []byte(`{"to":"a@example.com"}`)})
	b := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	f.enqueue(t, jobs.NewRun{Job: "test"}) // another queue: not handed out

	var before time.Time
	require.NoError(t, f.db.QueryRow("SELECT UTC_TIMESTAMP(6)").Scan(&before))
	got, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "py@host-1", Limit: 5, Lease: "20s"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	ids := []int64{got[0].ID, got[1].ID}
	assert.ElementsMatch(t, []int64{a, b}, ids)
	for _, c := range got {
		assert.Equal(t, "mail", c.Job)
		assert.Equal(t, 1, c.Attempt)
		assert.Equal(t, int64(1), c.Claim)
		assert.Equal(t, "1m0s", c.Timeout)
		assert.WithinDuration(t, before.Add(20*time.Second), c.Deadline, 5*time.Second)
		r, err := f.ops.Run(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, "running", r.State)
		assert.Equal(t, "py@host-1", r.Worker)
		require.NotNil(t, r.Deadline)
		assert.False(t, r.Deadline.Before(c.Deadline), "the deadline answered (%v) is never after the database's (%v)", c.Deadline, *r.Deadline)
	}
	first := got[0]
	if first.ID == a {
		assert.JSONEq(t, `{"to":"a@example.com"}`, string(first.Args))
	}

	hb, err := f.ops.Heartbeat(ctx, first.ID, ops.HeartbeatRequest{Claim: first.Claim, Lease: "5m"})
	require.NoError(t, err)
	assert.True(t, hb.Deadline.After(first.Deadline.Add(4*time.Minute)), "extended to five minutes")
	r, err := f.ops.Run(ctx, first.ID)
	require.NoError(t, err)
	assert.False(t, r.Deadline.Before(hb.Deadline))

	done, err := f.ops.Complete(ctx, first.ID, first.Claim)
	require.NoError(t, err)
	assert.Equal(t, "completed", done.State)
	events := []string{}
	for _, e := range done.History {
		events = append(events, e.Event)
	}
	assert.Equal(t, []string{"started", "completed"}, events)
	assert.Equal(t, "py@host-1", done.History[0].Worker)

	_, err = f.ops.Complete(ctx, first.ID, first.Claim)
	assert.Equal(t, ops.CodeConflict, codeOf(t, err), "a second outcome of the same claim")
	_, err = f.ops.Heartbeat(ctx, first.ID, ops.HeartbeatRequest{Claim: first.Claim})
	assert.Equal(t, ops.CodeConflict, codeOf(t, err), "a heartbeat of a finished run")
	_, err = f.ops.Complete(ctx, 1<<40, 1)
	assert.Equal(t, ops.CodeNotFound, codeOf(t, err))
}

// TestHeadersTravelWithTheRun: a push's headers (a producer's trace
// context) come back with each claim of the run and in its details, from
// Go workers' runs too; a run without headers has none.
func TestHeadersTravelWithTheRun(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)
	tp := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "k=v"}
	pushed, err := f.ops.Push(ctx, "mail", ops.Push{Headers: tp})
	require.NoError(t, err)
	enqueued := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail", Headers: map[string]string{"x-tenant": "7"}})
	plain := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})

	got, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "py@host-1", Limit: 5})
	require.NoError(t, err)
	require.Len(t, got, 3)
	want := map[int64]map[string]string{pushed.ID: tp, enqueued: {"x-tenant": "7"}, plain: nil}
	for _, c := range got {
		assert.Equal(t, want[c.ID], c.Headers, "run %d's claim", c.ID)
		r, err := f.ops.Run(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, want[c.ID], r.Headers, "run %d's details", c.ID)
	}
	var null bool
	require.NoError(t, f.db.QueryRow("SELECT headers IS NULL FROM lockgen_runs WHERE id = ?", plain).Scan(&null))
	assert.True(t, null, "a run without headers stores NULL")
}

// TestConsumeRescuesASilentConsumer: a consumer that stops heartbeating
// loses its run to the next claim's rescue, and its late outcomes are
// refused while the new claim's count.
func TestConsumeRescuesASilentConsumer(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)
	id := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	old, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "dead", Lease: "1s"})
	require.NoError(t, err)
	require.Len(t, old, 1)

	// The rescue makes the run due again after a backoff; a long poll
	// claims it once it is.
	var again []ops.Claimed
	for i := 0; i < 20 && len(again) == 0; i++ {
		again, err = f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "alive", Wait: "2s"})
		require.NoError(t, err)
	}
	require.Len(t, again, 1, "the silent consumer's run is rescued and claimed again")
	assert.Equal(t, id, again[0].ID)
	assert.Equal(t, 2, again[0].Attempt)
	assert.Equal(t, old[0].Claim+1, again[0].Claim)

	_, err = f.ops.Heartbeat(ctx, id, ops.HeartbeatRequest{Claim: old[0].Claim})
	assert.Equal(t, ops.CodeConflict, codeOf(t, err), "the old claim's heartbeat")
	_, err = f.ops.Complete(ctx, id, old[0].Claim)
	assert.Equal(t, ops.CodeConflict, codeOf(t, err), "the old claim's completion")
	_, err = f.ops.Fail(ctx, id, ops.FailRequest{Claim: old[0].Claim, Error: "late"})
	assert.Equal(t, ops.CodeConflict, codeOf(t, err), "the old claim's failure")

	r, err := f.ops.Complete(ctx, id, again[0].Claim)
	require.NoError(t, err)
	assert.Equal(t, "completed", r.State)
	assert.Equal(t, "alive", r.Worker)
}

func TestConsumeFailRetriesDiscardsAndSnoozes(t *testing.T) {
	ctx := context.Background()
	cfg := deployment
	cfg.Jobs = append([]ops.Job(nil), deployment.Jobs...)
	for i := range cfg.Jobs {
		cfg.Jobs[i].BackoffInitial, cfg.Jobs[i].BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	}
	f := newFixture(t, cfg)
	id := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	claim := func() ops.Claimed {
		t.Helper()
		got, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w", Wait: "5s"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		return got[0]
	}

	c := claim()
	r, err := f.ops.Fail(ctx, id, ops.FailRequest{Claim: c.Claim, Error: "smtp: 421"})
	require.NoError(t, err)
	assert.Equal(t, "available", r.State)
	assert.Equal(t, "smtp: 421", r.LastError)

	c = claim()
	assert.Equal(t, 2, c.Attempt)
	r, err = f.ops.Fail(ctx, id, ops.FailRequest{Claim: c.Claim, Snooze: "10ms"})
	require.NoError(t, err)
	assert.Equal(t, "available", r.State)
	assert.Equal(t, 1, r.Attempt, "a snooze does not count the attempt")

	c = claim()
	assert.Equal(t, 2, c.Attempt)
	r, err = f.ops.Fail(ctx, id, ops.FailRequest{Claim: c.Claim, Error: "bad address", Retry: ptr(false)})
	require.NoError(t, err)
	assert.Equal(t, "discarded", r.State, "retry false fails it for good with an attempt left")
	assert.Equal(t, "bad address", r.LastError)
}

func TestConsumeLongPollPauseAndCancel(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)

	got, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w", Wait: "100ms"})
	require.NoError(t, err)
	assert.Empty(t, got, "nothing due within the wait")

	// A long poll answers with a run enqueued while it waits.
	res := make(chan []ops.Claimed, 1)
	go func() {
		got, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w", Wait: "30s"})
		assert.NoError(t, err)
		res <- got
	}()
	time.Sleep(200 * time.Millisecond)
	id := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	got = <-res
	require.Len(t, got, 1)
	assert.Equal(t, id, got[0].ID)

	// An operator's cancel reaches the consumer at its next heartbeat.
	_, err = f.ops.CancelRun(ctx, id)
	require.NoError(t, err)
	_, err = f.ops.Heartbeat(ctx, id, ops.HeartbeatRequest{Claim: got[0].Claim})
	assert.Equal(t, ops.CodeCancelled, codeOf(t, err))
	assert.ErrorIs(t, err, ops.ErrCancelled)
	_, err = f.ops.Complete(ctx, id, got[0].Claim)
	assert.Equal(t, ops.CodeConflict, codeOf(t, err), "a cancelled run stays cancelled")

	// A paused queue hands out nothing; resumed, it does.
	_, err = f.ops.PauseQueue(ctx, "mail")
	require.NoError(t, err)
	id = f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	got, err = f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w", Wait: "300ms"})
	require.NoError(t, err)
	assert.Empty(t, got, "paused")
	_, err = f.ops.ResumeQueue(ctx, "mail")
	require.NoError(t, err)
	got, err = f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w", Wait: "5s"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, id, got[0].ID)
}

func TestConsumeRefusesBadInputNamingTheField(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)
	id := f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	claims := map[string]struct {
		queue string
		req   ops.ClaimRequest
		field string
	}{
		"unknown queue":   {"nope", ops.ClaimRequest{Worker: "w"}, "queue"},
		"no worker":       {"mail", ops.ClaimRequest{}, "worker"},
		"long worker":     {"mail", ops.ClaimRequest{Worker: string(make([]byte, 192))}, "worker"},
		"bad utf-8":       {"mail", ops.ClaimRequest{Worker: "\xff"}, "worker"},
		"limit too big":   {"mail", ops.ClaimRequest{Worker: "w", Limit: 101}, "limit"},
		"negative limit":  {"mail", ops.ClaimRequest{Worker: "w", Limit: -1}, "limit"},
		"wait too long":   {"mail", ops.ClaimRequest{Worker: "w", Wait: "1h"}, "wait"},
		"wait not a time": {"mail", ops.ClaimRequest{Worker: "w", Wait: "soon"}, "wait"},
		"lease too short": {"mail", ops.ClaimRequest{Worker: "w", Lease: "10ms"}, "lease"},
	}
	for name, tc := range claims {
		_, err := f.ops.Claim(ctx, tc.queue, tc.req)
		var e *ops.Error
		require.True(t, errors.As(err, &e), name)
		assert.Equal(t, ops.CodeInvalid, e.Code, name)
		assert.Equal(t, tc.field, e.Field, name)
	}
	fails := map[string]struct {
		id    int64
		req   ops.FailRequest
		field string
	}{
		"no claim":          {id, ops.FailRequest{}, "claim"},
		"bad id":            {0, ops.FailRequest{Claim: 1}, "id"},
		"snooze and error":  {id, ops.FailRequest{Claim: 1, Snooze: "1s", Error: "x"}, "snooze"},
		"negative snooze":   {id, ops.FailRequest{Claim: 1, Snooze: "-1s"}, "snooze"},
		"snooze not a time": {id, ops.FailRequest{Claim: 1, Snooze: "1 week"}, "snooze"},
	}
	for name, tc := range fails {
		_, err := f.ops.Fail(ctx, tc.id, tc.req)
		var e *ops.Error
		require.True(t, errors.As(err, &e), name)
		assert.Equal(t, ops.CodeInvalid, e.Code, name)
		assert.Equal(t, tc.field, e.Field, name)
	}
	_, err := f.ops.Heartbeat(ctx, id, ops.HeartbeatRequest{Claim: 1, Lease: "1y"})
	assert.Equal(t, ops.CodeInvalid, codeOf(t, err))
	r, err := f.ops.Run(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "available", r.State, "nothing was claimed or written")
	assert.Equal(t, 0, r.Attempt)
}

// TestConsumeOnAnotherTablePrefix: a pool opened with ops.Connector runs
// the default-prefix store and the layer's own SQL on the tables of the
// deployment's prefix; without it, consuming is refused, not pointed at
// the default tables.
func TestConsumeOnAnotherTablePrefix(t *testing.T) {
	ctx := context.Background()
	tdb := testdb.New(t)
	cfg := tdb.AdminConfig.Clone()
	cfg.MultiStatements = true
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	_, err = admin.Exec(strings.ReplaceAll(testdb.Schema(t), "lockgen_", "app_"))
	require.NoError(t, err, "the schema of the prefix app_")
	for _, table := range testdb.Tables(t) {
		tdb.Grant(t, strings.Replace(table, "lockgen_", "app_", 1))
	}
	base, err := mysql.NewConnector(tdb.Config)
	require.NoError(t, err)
	c, err := ops.Connector(base, "app_")
	require.NoError(t, err)
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	deploy := deployment
	deploy.TablePrefix = "app_"
	o, err := ops.New(db, deploy)
	require.NoError(t, err)

	pushed, err := o.Push(ctx, "mail", ops.Push{})
	require.NoError(t, err)
	got, err := o.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, pushed.ID, got[0].ID)
	r, err := o.Complete(ctx, got[0].ID, got[0].Claim)
	require.NoError(t, err)
	assert.Equal(t, "completed", r.State)

	var n int
	require.NoError(t, admin.QueryRow("SELECT COUNT(*) FROM app_runs WHERE state = 'completed'").Scan(&n))
	assert.Equal(t, 1, n, "the run is in app_runs")
	require.NoError(t, admin.QueryRow("SELECT COUNT(*) FROM lockgen_runs").Scan(&n))
	assert.Equal(t, 0, n, "nothing in the default tables")

	plain, err := ops.New(tdb.Open(t), deploy)
	require.NoError(t, err)
	_, err = plain.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w"})
	assert.Equal(t, ops.CodeUnavailable, codeOf(t, err), "no store for prefix app_ on a plain pool")

	other, err := ops.Connector(base, "other_")
	require.NoError(t, err)
	odb := sql.OpenDB(other)
	t.Cleanup(func() { _ = odb.Close() })
	_, err = ops.New(odb, deploy)
	assert.Equal(t, ops.CodeInvalid, codeOf(t, err), "a pool renaming to another prefix")
}

func TestConsumeCompleteManyListsTheConflicts(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)
	for i := 0; i < 3; i++ {
		f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	}
	got, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w", Limit: 3})
	require.NoError(t, err)
	require.Len(t, got, 3)
	_, err = f.ops.CancelRun(ctx, got[1].ID)
	require.NoError(t, err)
	refs := []ops.ClaimRef{{ID: got[0].ID, Claim: got[0].Claim}, {ID: got[1].ID, Claim: got[1].Claim}, {ID: got[2].ID, Claim: got[2].Claim}, {ID: 1 << 40, Claim: 1}}
	done, err := f.ops.CompleteMany(ctx, refs)
	require.NoError(t, err)
	assert.Equal(t, int64(2), done.Completed)
	assert.Equal(t, []ops.Conflict{{ID: got[1].ID, State: "cancelled", Claim: got[1].Claim}, {ID: 1 << 40}}, done.Conflicts)
	for _, i := range []int{0, 2} {
		r, err := f.ops.Run(ctx, got[i].ID)
		require.NoError(t, err)
		assert.Equal(t, "completed", r.State)
	}
	done, err = f.ops.CompleteMany(ctx, refs[:1])
	require.NoError(t, err)
	assert.Equal(t, int64(0), done.Completed, "already completed")
	assert.Empty(t, done.Conflicts, "it is completed with that claim")

	for name, tc := range map[string]struct {
		refs  []ops.ClaimRef
		field string
	}{
		"none":     {nil, "runs"},
		"too many": {make([]ops.ClaimRef, ops.MaxClaim+1), "runs"},
		"no claim": {[]ops.ClaimRef{{ID: 1, Claim: 1}, {ID: 2}}, "runs[1].claim"},
		"bad id":   {[]ops.ClaimRef{{ID: -1, Claim: 1}}, "runs[0].id"},
	} {
		_, err := f.ops.CompleteMany(ctx, tc.refs)
		var e *ops.Error
		require.True(t, errors.As(err, &e), name)
		assert.Equal(t, ops.CodeInvalid, e.Code, name)
		assert.Equal(t, tc.field, e.Field, name)
	}
}

// TestConsumeOutcomesOfAHeldRunAreBusy: while an operator's transaction
// holds a claimed run's row, a consumer's complete and fail answer
// CodeUnavailable at once and write nothing, and CompleteMany completes the
// other runs of its batch and lists the held one as busy, not as a
// conflict. Once the row is free, the outcome is recorded.
func TestConsumeOutcomesOfAHeldRunAreBusy(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, deployment)
	for range 2 {
		f.enqueue(t, jobs.NewRun{Job: "mail", Queue: "mail"})
	}
	got, err := f.ops.Claim(ctx, "mail", ops.ClaimRequest{Worker: "w", Limit: 2})
	require.NoError(t, err)
	require.Len(t, got, 2)
	held, other := got[0], got[1]
	tx, err := f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "SELECT id FROM lockgen_runs WHERE id = ? FOR UPDATE", held.ID)
	require.NoError(t, err)

	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = f.ops.Complete(bounded, held.ID, held.Claim)
	assert.Equal(t, ops.CodeUnavailable, codeOf(t, err), "complete: %v", err)
	_, err = f.ops.Fail(bounded, held.ID, ops.FailRequest{Claim: held.Claim, Error: "boom"})
	assert.Equal(t, ops.CodeUnavailable, codeOf(t, err), "fail: %v", err)
	done, err := f.ops.CompleteMany(bounded, []ops.ClaimRef{{ID: held.ID, Claim: held.Claim}, {ID: other.ID, Claim: other.Claim}})
	require.NoError(t, err)
	assert.Equal(t, ops.Completed{Completed: 1, Conflicts: []ops.Conflict{}, Busy: []ops.ClaimRef{{ID: held.ID, Claim: held.Claim}}}, done)
	var state string
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT state FROM lockgen_runs WHERE id = ?", held.ID).Scan(&state))
	assert.Equal(t, "running", state, "nothing was written to the held run")

	require.NoError(t, tx.Rollback())
	r, err := f.ops.Complete(ctx, held.ID, held.Claim)
	require.NoError(t, err)
	assert.Equal(t, "completed", r.State)
}
