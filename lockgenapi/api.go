// Package lockgenapi serves lockgen's operations over HTTP/JSON, under
// /api/v1, for operators and for programs in any language, and a dashboard
// for people at / (ui.go: server-rendered pages embedded in the binary,
// readable without JavaScript; its writes are forms that carry the write
// token, or pass the Authorize hook from a page of the same origin).
//
// It lives in a Go module of its own, github.com/lockgen/lockgen/lockgenapi,
// like lockgenprom, so that the runtime keeps its few dependencies. It is a
// thin door over package ops (github.com/lockgen/lockgen/runtime/ops), which
// holds every operation, its validation and its SQL; `lockgen serve` runs
// the same handler on its own. An application mounts it in its own server:
//
//	o, err := ops.New(db, ops.Config{Locks: …, Jobs: …})
//	h := lockgenapi.New(o, lockgenapi.Options{Authorize: adminsOnly})
//	mux.Handle("/lockgen/", http.StripPrefix("/lockgen", h))
//
// The endpoints (one handler each, in endpoints.go):
//
//	GET  /api/v1/status                 the overview (ops.Status)
//	GET  /api/v1/locks?name=&after=&limit=
//	GET  /api/v1/queues
//	POST /api/v1/queues/{queue}/pause
//	POST /api/v1/queues/{queue}/resume
//	POST /api/v1/jobs/{job}/runs        enqueue (ops.Push): 201, or 200 for
//	                                    the existing run of a unique key
//	GET  /api/v1/runs?job=&queue=&state=&after=&limit=
//	GET  /api/v1/runs/{id}
//	POST /api/v1/runs/{id}/cancel
//	POST /api/v1/runs/{id}/retry
//	POST /api/v1/runs/retry             retry many (ops.RetryFilter)
//	POST /api/v1/queues/{queue}/claim   consume: claim due runs, waiting up
//	                                    to "wait" for one (ops.Claim)
//	POST /api/v1/runs/{id}/heartbeat    keep a claimed run (ops.Heartbeat)
//	POST /api/v1/runs/{id}/complete     its attempt succeeded (ops.Complete)
//	POST /api/v1/runs/complete          many succeeded (ops.CompleteMany)
//	POST /api/v1/runs/{id}/fail         it failed: retry, fail for good or
//	                                    snooze (ops.Fail)
//	GET  /api/v1/openapi.json           this API in OpenAPI 3.1, with a JSON
//	                                    Schema of each job's arguments
//
// Reads are open to whoever reaches the handler. Writes are refused (403)
// unless Options.WriteToken or Options.Authorize allows them; with a token,
// every write needs "Authorization: Bearer <token>" (compared in constant
// time; 401 otherwise). No cookie ever authorizes anything, so a page on
// another site cannot make a browser write.
//
// Every answer is JSON. An error is {"error": {"code", "field", "message"}}:
// 400 invalid (field names the parameter; a JSON body must be one object
// with no unknown field), 401/403, 404 not_found, 409 conflict (the run's
// state does not allow the change, or a consumer's claim is no longer
// current) or cancelled (an operator cancelled the consumer's run), 413
// for a body over 1 MiB, 503 unavailable (with Retry-After: a run's row is
// held for a moment, or the handler has no store to consume with), 500
// internal (the database failed; the message says no more, the log says
// what).
package lockgenapi

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/lockgen/lockgen/runtime/ops"
)

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

// Options configure the handler.
type Options struct {
	// WriteToken, when not empty, allows writes that carry it as a bearer
	// token.
	WriteToken string
	// Authorize, when set, decides every write instead of WriteToken: a
	// nil error allows it; an error is answered 403 with its text.
	Authorize func(r *http.Request) error
	// Logger logs the database errors answered 500 (slog.Default when
	// nil).
	Logger *slog.Logger
}

// handler is the http.Handler New returns.
type handler struct {
	ops  *ops.Ops
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
}

// New returns the handler of o's operations.
func New(o *ops.Ops, opts Options) http.Handler {
	h := &handler{ops: o, opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.routes()
	h.uiRoutes()
	return h
}

// ServeHTTP bounds the body and answers JSON 404/405 for what no endpoint
// serves.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if _, pattern := h.mux.Handler(r); pattern == "" {
		if strings.HasPrefix(r.URL.Path, "/api/v1/") && h.pathExists(r) {
			w.Header().Set("Allow", h.allowed(r))
			writeError(w, http.StatusMethodNotAllowed, &ops.Error{Code: "method_not_allowed", Message: r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			h.render(w, r, "error", view{Title: "Not found"}, &ops.Error{Code: ops.CodeNotFound, Message: "There is no page " + r.URL.Path + "."})
			return
		}
		writeError(w, http.StatusNotFound, &ops.Error{Code: ops.CodeNotFound, Message: "no endpoint " + r.URL.Path + " (see /api/v1/status, /api/v1/locks, /api/v1/queues, /api/v1/runs)"})
		return
	}
	h.mux.ServeHTTP(w, r)
}

// allowed lists the methods the path answers.
func (h *handler) allowed(r *http.Request) string {
	var ms []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		c := r.Clone(r.Context())
		c.Method = m
		if _, p := h.mux.Handler(c); p != "" {
			ms = append(ms, m)
		}
	}
	return strings.Join(ms, ", ")
}

func (h *handler) pathExists(r *http.Request) bool { return h.allowed(r) != "" }

// write checks a write's authority; it answers and returns false when the
// write is refused.
func (h *handler) write(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case h.opts.Authorize != nil:
		if err := h.opts.Authorize(r); err != nil {
			writeError(w, http.StatusForbidden, &ops.Error{Code: ops.CodeForbidden, Message: err.Error()})
			return false
		}
		return true
	case h.opts.WriteToken == "":
		writeError(w, http.StatusForbidden, &ops.Error{Code: ops.CodeForbidden, Message: "this server is read-only: start it with a write token (lockgen serve -write-token, or $LOCKGEN_WRITE_TOKEN) to allow writes"})
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.WriteToken)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lockgen"`)
		writeError(w, http.StatusUnauthorized, &ops.Error{Code: "unauthorized", Message: "a write needs the header Authorization: Bearer <write token>"})
		return false
	}
	return true
}

// answer writes v as JSON, or err as the error document.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		var oe *ops.Error
		if errors.As(err, &oe) {
			if oe.Code == ops.CodeUnavailable {
				w.Header().Set("Retry-After", "1")
			}
			writeError(w, statusOf(oe.Code), oe)
			return
		}
		if r.Context().Err() != nil {
			// The client went away: nobody reads the answer, and the
			// database is not at fault.
			h.log.Debug("lockgen api: request cancelled", "method", r.Method, "path", r.URL.Path, "error", err)
			return
		}
		h.log.Error("lockgen api: database error", "method", r.Method, "path", r.URL.Path, "error", err)
		writeError(w, http.StatusInternalServerError, &ops.Error{Code: "internal", Message: "the database failed to answer; the server's log says why"})
		return
	}
	writeJSON(w, status, v)
}

func statusOf(c ops.Code) int {
	switch c {
	case ops.CodeInvalid:
		return http.StatusBadRequest
	case ops.CodeNotFound:
		return http.StatusNotFound
	case ops.CodeConflict, ops.CodeCancelled:
		return http.StatusConflict
	case ops.CodeUnavailable:
		return http.StatusServiceUnavailable
	case ops.CodeForbidden:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, e *ops.Error) {
	writeJSON(w, status, map[string]*ops.Error{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
