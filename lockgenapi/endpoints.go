package lockgenapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime/ops"
)

// routes registers one handler per operation.
func (h *handler) routes() {
	h.mux.HandleFunc("GET /api/v1/status", h.status)
	h.mux.HandleFunc("GET /api/v1/locks", h.locks)
	h.mux.HandleFunc("GET /api/v1/queues", h.queues)
	h.mux.HandleFunc("POST /api/v1/queues/{queue}/pause", h.queueChange((*ops.Ops).PauseQueue))
	h.mux.HandleFunc("POST /api/v1/queues/{queue}/resume", h.queueChange((*ops.Ops).ResumeQueue))
	h.mux.HandleFunc("POST /api/v1/jobs/{job}/runs", h.push)
	h.mux.HandleFunc("POST /api/v1/jobs/{job}/runs/batch", h.pushMany)
	h.mux.HandleFunc("GET /api/v1/runs", h.runs)
	h.mux.HandleFunc("GET /api/v1/runs/{id}", h.run)
	h.mux.HandleFunc("POST /api/v1/runs/{id}/cancel", h.runChange((*ops.Ops).CancelRun))
	h.mux.HandleFunc("POST /api/v1/runs/{id}/retry", h.runChange((*ops.Ops).RetryRun))
	h.mux.HandleFunc("POST /api/v1/runs/retry", h.retryMany)
	h.mux.HandleFunc("POST /api/v1/queues/{queue}/claim", h.claim)
	h.mux.HandleFunc("POST /api/v1/runs/{id}/heartbeat", h.heartbeat)
	h.mux.HandleFunc("POST /api/v1/runs/{id}/complete", h.complete)
	h.mux.HandleFunc("POST /api/v1/runs/complete", h.completeMany)
	h.mux.HandleFunc("POST /api/v1/runs/{id}/fail", h.fail)
	h.mux.HandleFunc("GET /api/v1/openapi.json", h.openapi)
}

// GET /api/v1/openapi.json
func (h *handler) openapi(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.query(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, h.ops.OpenAPI())
}

// GET /api/v1/status
func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.query(w, r); !ok {
		return
	}
	st, err := h.ops.Status(r.Context())
	h.answer(w, r, http.StatusOK, st, err)
}

// GET /api/v1/locks?name=&after=&limit=
func (h *handler) locks(w http.ResponseWriter, r *http.Request) {
	q, ok := h.query(w, r, "name", "after", "limit")
	if !ok {
		return
	}
	limit, ok := h.limit(w, r, q)
	if !ok {
		return
	}
	page, err := h.ops.Locks(r.Context(), ops.LocksFilter{Name: q.Get("name"), After: q.Get("after"), Limit: limit})
	h.answer(w, r, http.StatusOK, page, err)
}

// GET /api/v1/queues
func (h *handler) queues(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.query(w, r); !ok {
		return
	}
	qs, err := h.ops.Queues(r.Context())
	h.answer(w, r, http.StatusOK, map[string]any{"items": qs}, err)
}

// POST /api/v1/queues/{queue}/pause and …/resume: the queue after the
// change.
func (h *handler) queueChange(change func(*ops.Ops, context.Context, string) (ops.Queue, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.writeRequest(w, r) {
			return
		}
		q, err := change(h.ops, r.Context(), r.PathValue("queue"))
		h.answer(w, r, http.StatusOK, q, err)
	}
}

// POST /api/v1/jobs/{job}/runs with an ops.Push: 201 {"id", "existing":
// false}, or 200 with the existing run of the same unique key.
func (h *handler) push(w http.ResponseWriter, r *http.Request) {
	var p ops.Push
	if !h.jsonWrite(w, r, &p) {
		return
	}
	pushed, err := h.ops.Push(r.Context(), r.PathValue("job"), p)
	status := http.StatusCreated
	if pushed.Existing {
		status = http.StatusOK
	}
	h.answer(w, r, status, pushed, err)
}

// POST /api/v1/jobs/{job}/runs/batch with {"runs": [ops.Push, …]}: 201
// {"items": [{"id", "existing"}, …]} in the order given, all or none.
func (h *handler) pushMany(w http.ResponseWriter, r *http.Request) {
	var batch struct {
		Runs []ops.Push `json:"runs"`
	}
	if !h.jsonWrite(w, r, &batch) {
		return
	}
	pushed, err := h.ops.PushMany(r.Context(), r.PathValue("job"), batch.Runs)
	h.answer(w, r, http.StatusCreated, struct {
		Items []ops.Pushed `json:"items"`
	}{pushed}, err)
}

// GET /api/v1/runs?job=&queue=&state=&after=&limit=
func (h *handler) runs(w http.ResponseWriter, r *http.Request) {
	q, ok := h.query(w, r, "job", "queue", "state", "after", "limit")
	if !ok {
		return
	}
	limit, ok := h.limit(w, r, q)
	if !ok {
		return
	}
	page, err := h.ops.Runs(r.Context(), ops.RunsFilter{Job: q.Get("job"), Queue: q.Get("queue"), State: q.Get("state"), After: q.Get("after"), Limit: limit})
	h.answer(w, r, http.StatusOK, page, err)
}

// GET /api/v1/runs/{id}
func (h *handler) run(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.query(w, r); !ok {
		return
	}
	id, ok := h.runID(w, r)
	if !ok {
		return
	}
	run, err := h.ops.Run(r.Context(), id)
	h.answer(w, r, http.StatusOK, run, err)
}

// POST /api/v1/runs/{id}/cancel and …/retry: the run after the change.
func (h *handler) runChange(change func(*ops.Ops, context.Context, int64) (*ops.Run, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.writeRequest(w, r) {
			return
		}
		id, ok := h.runID(w, r)
		if !ok {
			return
		}
		run, err := change(h.ops, r.Context(), id)
		h.answer(w, r, http.StatusOK, run, err)
	}
}

// POST /api/v1/runs/retry with an ops.RetryFilter: {"retried", "skipped_unique_key", "more"}
func (h *handler) retryMany(w http.ResponseWriter, r *http.Request) {
	var f ops.RetryFilter
	if !h.jsonWrite(w, r, &f) {
		return
	}
	n, err := h.ops.RetryRuns(r.Context(), f)
	h.answer(w, r, http.StatusOK, n, err)
}

// POST /api/v1/queues/{queue}/claim with an ops.ClaimRequest: 200
// {"items": [ops.Claimed, …]}, empty when nothing was due within the wait.
func (h *handler) claim(w http.ResponseWriter, r *http.Request) {
	var req ops.ClaimRequest
	if !h.jsonWrite(w, r, &req) {
		return
	}
	runs, err := h.ops.Claim(r.Context(), r.PathValue("queue"), req)
	if runs == nil {
		runs = []ops.Claimed{}
	}
	h.answer(w, r, http.StatusOK, struct {
		Items []ops.Claimed `json:"items"`
	}{runs}, err)
}

// POST /api/v1/runs/{id}/heartbeat with an ops.HeartbeatRequest: 200
// {"id", "claim", "deadline"}; 409 when the claim is no longer current
// (code "cancelled" when an operator cancelled the run).
func (h *handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req ops.HeartbeatRequest
	id, ok := h.runIDBody(w, r, &req)
	if !ok {
		return
	}
	hb, err := h.ops.Heartbeat(r.Context(), id, req)
	h.answer(w, r, http.StatusOK, hb, err)
}

// POST /api/v1/runs/{id}/complete with {"claim"}: the run, completed.
func (h *handler) complete(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Claim int64 `json:"claim"`
	}
	id, ok := h.runIDBody(w, r, &req)
	if !ok {
		return
	}
	run, err := h.ops.Complete(r.Context(), id, req.Claim)
	h.answer(w, r, http.StatusOK, run, err)
}

// POST /api/v1/runs/complete with {"runs": [{"id", "claim"}, …]}: 200
// {"completed", "conflicts": [{"id", "state", "claim"}, …], "busy": [{"id", "claim"}, …]}.
func (h *handler) completeMany(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Runs []ops.ClaimRef `json:"runs"`
	}
	if !h.jsonWrite(w, r, &req) {
		return
	}
	done, err := h.ops.CompleteMany(r.Context(), req.Runs)
	h.answer(w, r, http.StatusOK, done, err)
}

// POST /api/v1/runs/{id}/fail with an ops.FailRequest: the run after the
// failure (available again, discarded, or snoozed).
func (h *handler) fail(w http.ResponseWriter, r *http.Request) {
	var req ops.FailRequest
	id, ok := h.runIDBody(w, r, &req)
	if !ok {
		return
	}
	run, err := h.ops.Fail(r.Context(), id, req)
	h.answer(w, r, http.StatusOK, run, err)
}

// runIDBody checks a write on a run that carries a JSON body.
func (h *handler) runIDBody(w http.ResponseWriter, r *http.Request, v any) (int64, bool) {
	if !h.jsonWrite(w, r, v) {
		return 0, false
	}
	return h.runID(w, r)
}

// query parses the query string, refusing parameters the endpoint does not
// take (a typo would otherwise widen a filter silently), repeated ones and
// invalid UTF-8.
func (h *handler) query(w http.ResponseWriter, r *http.Request, allowed ...string) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Message: "the query string is malformed: " + err.Error()})
		return nil, false
	}
	for name, vs := range q {
		switch {
		case !slices.Contains(allowed, name):
			msg := "unknown parameter " + strconv.Quote(name)
			if len(allowed) > 0 {
				msg += " (this endpoint takes " + strings.Join(allowed, ", ") + ")"
			}
			writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Field: name, Message: msg})
			return nil, false
		case len(vs) > 1:
			writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Field: name, Message: name + " is given more than once"})
			return nil, false
		case !utf8.ValidString(vs[0]):
			writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Field: name, Message: name + " is not valid UTF-8"})
			return nil, false
		}
	}
	return q, true
}

// limit parses the limit parameter (0 when absent: the default).
func (h *handler) limit(w http.ResponseWriter, r *http.Request, q url.Values) (int, bool) {
	s := q.Get("limit")
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > ops.MaxLimit {
		writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Field: "limit", Message: "limit must be a whole number from 1 to " + strconv.Itoa(ops.MaxLimit)})
		return 0, false
	}
	return n, true
}

// runID parses the {id} of the path.
func (h *handler) runID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Field: "id", Message: "a run ID is a positive whole number, not " + strconv.Quote(r.PathValue("id"))})
		return 0, false
	}
	return id, true
}

// jsonWrite checks a write that carries a JSON body: its authority first,
// then no query parameters, then the body, decoded into v. It answers and
// returns false when the request is refused.
func (h *handler) jsonWrite(w http.ResponseWriter, r *http.Request, v any) bool {
	if !h.write(w, r) {
		return false
	}
	if _, ok := h.query(w, r); !ok {
		return false
	}
	return h.body(w, r, v)
}

// body decodes a JSON object body into v, refusing unknown fields, trailing
// data, invalid UTF-8 and bodies over MaxBody; it answers and returns false
// when the body is refused.
func (h *handler) body(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, &ops.Error{Code: ops.CodeInvalid, Message: "the body is over 1 MiB"})
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Message: "the body could not be read"})
		return false
	case !utf8.Valid(b):
		writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Message: "the body is not valid UTF-8"})
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err != nil {
		e := &ops.Error{Code: ops.CodeInvalid, Message: "the body must be one JSON object: " + err.Error()}
		var typeErr *json.UnmarshalTypeError
		var timeErr *time.ParseError
		if errors.As(err, &timeErr) {
			e.Field = faultyField(b, v)
			e.Message = e.Field + " must be a time in RFC 3339, such as \"2026-11-27T10:00:00Z\""
		} else if errors.As(err, &typeErr) {
			e.Field = typeErr.Field
			e.Message = fmt.Sprintf("%s must be a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
		} else if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			e.Field = strings.Trim(f, `"`)
			e.Message = "unknown field " + f
		}
		writeError(w, http.StatusBadRequest, e)
		return false
	}
	return true
}

// faultyField finds the top-level field of the JSON object b that v's type
// cannot decode (for errors that do not name it, such as a bad time).
func faultyField(b []byte, v any) string {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return ""
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		probe := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		one, _ := json.Marshal(map[string]json.RawMessage{k: raw[k]})
		if json.Unmarshal(one, probe) != nil {
			return k
		}
	}
	return ""
}

// jsonKind names a Go kind as JSON calls it.
func jsonKind(kind string) string {
	switch kind {
	case "int", "int32", "int64":
		return "whole number"
	case "ptr", "struct":
		return "value of its documented form"
	}
	return kind
}

// writeRequest checks a write: its authority first, then no query
// parameters and a body of at most MaxBody bytes (these writes take none;
// an empty JSON object is accepted).
func (h *handler) writeRequest(w http.ResponseWriter, r *http.Request) bool {
	if !h.write(w, r) {
		return false
	}
	if _, ok := h.query(w, r); !ok {
		return false
	}
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, &ops.Error{Code: ops.CodeInvalid, Message: "the body is over 1 MiB"})
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Message: "the body could not be read"})
		return false
	}
	if b := strings.TrimSpace(string(body)); b != "" && b != "{}" {
		writeError(w, http.StatusBadRequest, &ops.Error{Code: ops.CodeInvalid, Message: "this request takes no body"})
		return false
	}
	return true
}
