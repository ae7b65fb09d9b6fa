package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/testdb"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// everyArgs is what lockgen generates for a job that declares an argument
// of every type (generator/testdata/golden/jobs, send_sms): int64, string,
// int32, bool, float64, time, duration, []string and json(...).
type everyArgs struct {
	OrderID   int64           `json:"order_id"`
	Phone     string          `json:"phone"`
	AttemptNo int32           `json:"attempt_no"`
	Urgent    bool            `json:"urgent"`
	Score     float64         `json:"score"`
	Due       time.Time       `json:"due"`
	Wait      time.Duration   `json:"wait"`
	Tags      []string        `json:"tags"`
	Raw       json.RawMessage `json:"raw"`
}

// FuzzHandleArgs feeds HandleArgs, as generated code wires it in front of
// a typed handler, the args column of a run that anyone could have written
// (another version of the application, a hand-made INSERT, a bug): it never
// panics; what does not decode as the declared type fails the attempt
// without running the handler, with an error that names the job and the
// run; and what decodes round-trips: the handler's value, enqueued again
// as EnqueueArgs encodes it, decodes to the same value (or is refused with
// ErrInvalid: raw JSON holding bytes that are not UTF-8).
func FuzzHandleArgs(f *testing.F) {
	valid, err := json.Marshal(everyArgs{
		OrderID: 42, Phone: "+1 'it''s' \\ \x00 🔒", AttemptNo: -7, Urgent: true, Score: 0.1,
		Due: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC), Wait: 90 * time.Second,
		Tags: []string{"a", "", "é"}, Raw: json.RawMessage(`{"k":[1,"x",null]}`),
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(valid),
		`{}`, ``, `null`, `[]`, `"x"`, `0`,
		`{"order_id":"42"}`, `{"order_id":1e30}`, `{"order_id":9223372036854775808}`,
		`{"attempt_no":2147483648}`, `{"score":1e400}`, `{"urgent":"true"}`,
		`{"due":"yesterday"}`, `{"due":"2030-01-02T03:04:05.000000006+14:00"}`, `{"wait":"1s"}`,
		`{"tags":"a"}`, `{"tags":[1]}`, `{"tags":null}`, `{"raw":}`, `{"raw": {"a" : [ 1 , 2 ] } }`,
		`{"phone":"\ud800"}`, "{\"phone\":\"\xff\"}", "{\"raw\":\"\xff\"}", `{"phone":"a\u0000b"}`,
		`{"order_id":1,"order_id":2}`, `{"Order_ID":3}`, `{"unknown":{"deep":[[[[]]]]}}`,
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
		`{"order_id":1`, "\xef\xbb\xbf{}", `{"rAw":{"0&":[10,100] } }`, `{"phone":"` + strings.Repeat(`\\`, 5000) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got *everyArgs
		handle := jobs.HandleArgs(func(_ context.Context, _ *jobs.Run, a everyArgs) error {
			got = &a
			return nil
		})
		run := &jobs.Run{ID: 42, Job: "send_sms", Attempt: 1, MaxAttempts: 5, Args: data}
		err := handle(context.Background(), run)
		if err != nil {
			if got != nil {
				t.Fatalf("the handler ran, then HandleArgs failed: %v", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, `decode args of job "send_sms" run 42: `) {
				t.Fatalf("decode error %q does not name the job and the run", msg)
			}
			var syntax *json.SyntaxError
			var typ *json.UnmarshalTypeError
			var parse *time.ParseError
			if !errors.As(err, &syntax) && !errors.As(err, &typ) && !errors.As(err, &parse) && !strings.Contains(err.Error(), "Time.UnmarshalJSON") {
				t.Fatalf("decode error %q wraps %T, not a JSON or time error", err, errors.Unwrap(err))
			}
			return
		}
		if got == nil {
			t.Fatal("HandleArgs returned nil without running the handler")
		}
		again, err := jobs.EncodeArgsForTest("send_sms", *got)
		if err != nil {
			if !errors.Is(err, runtime.ErrInvalid) {
				t.Fatalf("re-encoding %+v: %v, not ErrInvalid", *got, err)
			}
			return
		}
		var back *everyArgs
		run.Args = again
		if err := jobs.HandleArgs(func(_ context.Context, _ *jobs.Run, a everyArgs) error {
			back = &a
			return nil
		})(context.Background(), run); err != nil {
			t.Fatalf("args as EnqueueArgs encodes them (%s) do not decode: %v", again, err)
		}
		if !sameArgs(*got, *back) {
			t.Fatalf("round trip changed the args:\n%+v\n%+v\nvia %s", *got, *back, again)
		}
	})
}

// sameArgs compares two decoded everyArgs: times as instants, raw JSON as
// the encoder writes it (see sameRaw).
func sameArgs(a, b everyArgs) bool {
	return a.OrderID == b.OrderID && a.Phone == b.Phone && a.AttemptNo == b.AttemptNo &&
		a.Urgent == b.Urgent && a.Score == b.Score && a.Due.Equal(b.Due) && a.Wait == b.Wait &&
		slices.Equal(a.Tags, b.Tags) && (a.Tags == nil) == (b.Tags == nil) && sameRaw(a.Raw, b.Raw)
}

// sameRaw reports whether two raw JSON values are the same JSON text once
// compacted and HTML-escaped, as the encoder writes raw JSON.
func sameRaw(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == 0 && (len(b) == 0 || string(b) == "null")
	}
	canon := func(r json.RawMessage) (string, bool) {
		var c, e bytes.Buffer
		if json.Compact(&c, r) != nil {
			return "", false
		}
		json.HTMLEscape(&e, c.Bytes())
		return e.String(), true
	}
	ca, okA := canon(a)
	cb, okB := canon(b)
	return okA && okB && ca == cb
}

// TestUndecodableArgsFailTheRunNotTheWorker: runs whose args someone else
// wrote in a form the handler's type cannot decode (not JSON, a string
// where an int64 is declared, a bad time) fail for good at their first
// attempt without running the handler (a permanent error: no attempt
// decodes them better), discarded with an error naming the job and the run
// kept, never retried. The worker goes on: a good run enqueued after them
// completes.
func TestUndecodableArgsFailTheRunNotTheWorker(t *testing.T) {
	tdb := testdb.New(t)
	ctx := context.Background()
	db := tdb.Open(t)
	j := jobsNode(t, db, "decode-node")
	var calls atomic.Int32
	var good atomic.Value
	startWorker(t, j, jobs.WorkerConfig{PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond, Handlers: map[string]jobs.JobHandler{
		"send_sms": {
			Handle: jobs.HandleArgs(func(_ context.Context, _ *jobs.Run, a everyArgs) error {
				calls.Add(1)
				good.Store(a)
				return nil
			}),
			BackoffInitial: time.Millisecond, BackoffMax: time.Millisecond,
		},
	}})
	var bad []int64
	for _, args := range []string{`not json`, `{"order_id":"42"}`, `{"due":"yesterday"}`, `[1,2,3]`} {
		id, err := j.Enqueue(ctx, nil, jobs.NewRun{Job: "send_sms", Args: []byte(args), MaxAttempts: 3, Timeout: 10 * time.Second})
		require.NoError(t, err)
		bad = append(bad, id)
	}
	// A good run whose row is overwritten by hand before it is due.
	id, err := jobs.EnqueueArgs(ctx, j, nil, jobs.NewRun{Job: "send_sms", MaxAttempts: 3, Timeout: 10 * time.Second}, everyArgs{OrderID: 1}, jobs.Delay(time.Second))
	require.NoError(t, err)
	res, err := db.Exec("UPDATE lockgen_runs SET args = ? WHERE id = ? AND attempt = 0", `{"tags":[1]}`, id)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "overwritten before its first attempt")
	bad = append(bad, id)
	for _, id := range bad {
		info := waitState(t, j, id, jobs.RunDiscarded)
		assert.Equal(t, 1, info.Attempt, "run %d: discarded at its first attempt of 3 (no attempt decodes them better)", id)
		assert.Contains(t, info.LastError, fmt.Sprintf(`decode args of job "send_sms" run %d: `, id))
	}
	assert.Zero(t, calls.Load(), "the handler never ran with undecodable args")
	id, err = jobs.EnqueueArgs(ctx, j, nil, jobs.NewRun{Job: "send_sms", MaxAttempts: 1, Timeout: 10 * time.Second}, everyArgs{OrderID: 7, Phone: "+1"})
	require.NoError(t, err)
	waitState(t, j, id, jobs.RunCompleted)
	assert.Equal(t, int32(1), calls.Load())
	assert.Equal(t, "+1", good.Load().(everyArgs).Phone)
	time.Sleep(100 * time.Millisecond)
	for _, id := range bad {
		info, err := j.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, jobs.RunDiscarded, info.State, "run %d stays discarded", id)
		assert.Equal(t, 1, info.Attempt)
	}
}
