package lockgenapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lockgen/lockgen/runtime/ops"
)

// The dashboard: server-rendered pages over the same operations as the
// API, embedded in the binary (no build step), readable without
// JavaScript. Its writes are HTML forms that carry the write token in
// their body (no cookie, so a page on another site cannot forge one
// without knowing the token); with an Authorize hook instead, a write must
// also come from a page of this origin (Sec-Fetch-Site or Origin), since
// the hook may trust the browser's cookies.

//go:embed ui
var uiFiles embed.FS

// uiPages are the page templates, each parsed with the layout.
var uiPages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"when": func(v any) string {
			switch t := v.(type) {
			case time.Time:
				return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
			case *time.Time:
				if t != nil {
					return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
				}
			}
			return "—"
		},
		"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"left": func(ms *int64) string {
			if ms == nil {
				return "until released"
			}
			return (time.Duration(*ms) * time.Millisecond).String()
		},
		"ms": func(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() },
		// count shows a queue's count; when a count of the queue reached
		// the cap, every count of it is a lower bound ("0+" too: the
		// capped read may have missed those runs).
		"count": func(n int64, exact bool) string {
			if !exact {
				return strconv.FormatInt(n, 10) + "+"
			}
			return strconv.FormatInt(n, 10)
		},
		"short": func(s string) string {
			if line, _, cut := strings.Cut(s, "\n"); cut || utf8.RuneCountInString(line) > 120 {
				r := []rune(line)
				if len(r) > 120 {
					r = r[:120]
				}
				return string(r) + " …"
			}
			return s
		},
		"json": func(raw json.RawMessage) string {
			var b bytes.Buffer
			if json.Indent(&b, raw, "", "  ") != nil {
				return string(raw)
			}
			return b.String()
		},
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "locks", "runs", "run", "schedules", "error"} {
		pages[name] = template.Must(template.New("").Funcs(funcs).ParseFS(uiFiles, "ui/layout.html", "ui/"+name+".html"))
	}
	return pages
}()

// uiStyle is the stylesheet.
var uiStyle = func() []byte {
	b, err := fs.ReadFile(uiFiles, "ui/style.css")
	if err != nil {
		panic(err)
	}
	return b
}()

// view is what a page template gets.
type view struct {
	Title, Nav string
	// Base is the path the handler is mounted at ("" at the root), so
	// that links work under http.StripPrefix.
	Base string
	// Writes shows the write controls; Token asks for the write token in
	// them (no Authorize hook).
	Writes, Token bool
	Refresh       int
	Done, Err     string
	Now           time.Time
	Data          any
	// FormID is the id of the form that the write buttons of a part of
	// the page submit (set by WithForm).
	FormID string
}

// WithForm returns v for the write form with the given id: one form holds
// the write token, and each button names its operation (formaction).
func (v view) WithForm(id string) view {
	v.FormID = id
	return v
}

// uiRoutes registers the dashboard's pages and form writes.
func (h *handler) uiRoutes() {
	h.mux.HandleFunc("GET /{$}", h.uiOverview)
	h.mux.HandleFunc("GET /locks", h.uiLocks)
	h.mux.HandleFunc("GET /runs", h.uiRuns)
	h.mux.HandleFunc("GET /runs/{id}", h.uiRun)
	h.mux.HandleFunc("GET /schedules", h.uiSchedules)
	h.mux.HandleFunc("GET /ui/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(uiStyle)
	})
	h.mux.HandleFunc("POST /runs/{id}/cancel", h.uiRunChange((*ops.Ops).CancelRun, "cancelled"))
	h.mux.HandleFunc("POST /runs/{id}/retry", h.uiRunChange((*ops.Ops).RetryRun, "retried"))
	h.mux.HandleFunc("POST /runs/retry", h.uiRetryMany)
	h.mux.HandleFunc("POST /queues/{queue}/pause", h.uiQueueChange((*ops.Ops).PauseQueue, "paused"))
	h.mux.HandleFunc("POST /queues/{queue}/resume", h.uiQueueChange((*ops.Ops).ResumeQueue, "resumed"))
}

// render writes a page, or the error page when the operation failed.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string, v view, err error) {
	v.Base = basePath(r)
	v.Writes = h.opts.Authorize != nil || h.opts.WriteToken != ""
	v.Token = h.opts.Authorize == nil && h.opts.WriteToken != ""
	status := http.StatusOK
	if err != nil {
		name, v.Refresh, v.Data = "error", 0, nil
		var oe *ops.Error
		switch {
		case errors.As(err, &oe):
			status, v.Err = statusOf(oe.Code), oe.Message
		case r.Context().Err() != nil:
			return
		default:
			h.log.Error("lockgen dashboard: database error", "method", r.Method, "path", r.URL.Path, "error", err)
			status, v.Err = http.StatusInternalServerError, "The database failed to answer; the server's log says why."
		}
		if v.Title == "" {
			v.Title = http.StatusText(status)
		}
	}
	var b bytes.Buffer
	if err := uiPages[name].ExecuteTemplate(&b, "layout", v); err != nil {
		h.log.Error("lockgen dashboard: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// basePath is the prefix an http.StripPrefix took off the request's path.
func basePath(r *http.Request) string {
	raw := r.URL.RawPath
	if raw == "" {
		raw = r.URL.EscapedPath()
	}
	orig := r.RequestURI
	if i := strings.IndexAny(orig, "?#"); i >= 0 {
		orig = orig[:i]
	}
	if base, ok := strings.CutSuffix(orig, raw); ok && strings.HasPrefix(base, "/") && !strings.HasPrefix(base, "//") {
		return base
	}
	return ""
}

// doneText is the message a write's redirect asks the page to show.
var doneText = map[string]string{
	"cancelled": "The run was cancelled.",
	"retried":   "The run is due again.",
	"paused":    "The queue is paused on every node.",
	"resumed":   "The queue's pause is lifted.",
	"bulk":      "The selected runs are due again.",
}

func (h *handler) uiView(r *http.Request, title, nav string) view {
	return view{Title: title, Nav: nav, Done: doneText[r.URL.Query().Get("done")]}
}

// GET /
func (h *handler) uiOverview(w http.ResponseWriter, r *http.Request) {
	st, err := h.ops.Status(r.Context())
	v := h.uiView(r, "Overview", "overview")
	// It refreshes itself every 5 s, unless it has write forms: a refresh
	// would wipe a write token being typed. ?refresh=on and off override.
	v.Refresh = 5
	switch r.URL.Query().Get("refresh") {
	case "off":
		v.Refresh = 0
	case "on":
	default:
		if h.opts.Authorize != nil || h.opts.WriteToken != "" {
			v.Refresh = 0
		}
	}
	if st != nil {
		v.Data, v.Now = st, st.Time
	}
	h.render(w, r, "overview", v, err)
}

// GET /locks?name=&after=
func (h *handler) uiLocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := h.ops.Locks(r.Context(), ops.LocksFilter{Name: q.Get("name"), After: q.Get("after")})
	v := h.uiView(r, "Held locks", "locks")
	v.Data = struct {
		Name     string
		Declared []ops.Lock
		Page     *ops.LockPage
	}{q.Get("name"), h.ops.Config().Locks, page}
	h.render(w, r, "locks", v, err)
}

// GET /runs?job=&queue=&state=&after=
func (h *handler) uiRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ops.RunsFilter{Job: q.Get("job"), Queue: q.Get("queue"), State: q.Get("state"), After: q.Get("after")}
	page, err := h.ops.Runs(r.Context(), f)
	var jobs []string
	for _, j := range h.ops.Config().Jobs {
		jobs = append(jobs, j.Name)
	}
	v := h.uiView(r, "Runs", "runs")
	v.Data = struct {
		Filter    ops.RunsFilter
		Jobs      []string
		Queues    []string
		States    []string
		Page      *ops.RunPage
		Retryable bool
	}{f, jobs, h.ops.DeclaredQueues(), ops.States, page, slices.Contains([]string{"discarded", "orphaned", "cancelled"}, f.State)}
	h.render(w, r, "runs", v, err)
}

// GET /runs/{id}
func (h *handler) uiRun(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.render(w, r, "error", view{Title: "Not a run"}, &ops.Error{Code: ops.CodeInvalid, Field: "id", Message: "a run ID is a positive whole number, not " + strconv.Quote(r.PathValue("id"))})
		return
	}
	run, err := h.ops.Run(r.Context(), id)
	v := h.uiView(r, fmt.Sprintf("Run %d", id), "runs")
	if run != nil {
		v.Data = run
	}
	h.render(w, r, "run", v, err)
}

// GET /schedules
func (h *handler) uiSchedules(w http.ResponseWriter, r *http.Request) {
	st, err := h.ops.Status(r.Context())
	v := h.uiView(r, "Schedules", "schedules")
	if st != nil {
		v.Data, v.Now = st, st.Time
	}
	h.render(w, r, "schedules", v, err)
}

// uiWrite checks a form write's authority: the write token in the form
// (compared in constant time), or the Authorize hook for a request from a
// page of this origin. It renders the refusal and returns false.
func (h *handler) uiWrite(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		h.render(w, r, "error", view{Title: "Bad request"}, &ops.Error{Code: ops.CodeInvalid, Message: "the form could not be read"})
		return false
	}
	refuse := func(msg string) bool {
		h.render(w, r, "error", view{Title: "Not allowed"}, &ops.Error{Code: ops.CodeForbidden, Message: msg})
		return false
	}
	switch {
	case h.opts.Authorize != nil:
		if !sameOrigin(r) {
			return refuse("a write from the dashboard must come from one of its own pages")
		}
		if err := h.opts.Authorize(r); err != nil {
			return refuse(err.Error())
		}
		return true
	case h.opts.WriteToken == "":
		return refuse("this server is read-only: start it with a write token (lockgen serve -write-token) to allow writes")
	case subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(h.opts.WriteToken)) != 1:
		return refuse("the write token is wrong")
	}
	return true
}

// sameOrigin reports whether a browser says the request comes from a
// page of the server's own origin.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// back redirects to path (under the mount point) with a done message.
func back(w http.ResponseWriter, r *http.Request, path, done string) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	http.Redirect(w, r, basePath(r)+path+sep+"done="+done, http.StatusSeeOther)
}

// POST /runs/{id}/cancel and …/retry
func (h *handler) uiRunChange(change func(*ops.Ops, context.Context, int64) (*ops.Run, error), done string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.uiWrite(w, r) {
			return
		}
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id < 1 {
			h.render(w, r, "error", view{Title: "Not a run"}, &ops.Error{Code: ops.CodeInvalid, Field: "id", Message: "a run ID is a positive whole number"})
			return
		}
		if _, err := change(h.ops, r.Context(), id); err != nil {
			h.render(w, r, "error", view{Title: fmt.Sprintf("Run %d", id)}, err)
			return
		}
		back(w, r, fmt.Sprintf("/runs/%d", id), done)
	}
}

// POST /runs/retry with job, queue and state
func (h *handler) uiRetryMany(w http.ResponseWriter, r *http.Request) {
	if !h.uiWrite(w, r) {
		return
	}
	f := ops.RetryFilter{Job: r.PostForm.Get("job"), Queue: r.PostForm.Get("queue"), State: r.PostForm.Get("state")}
	if _, err := h.ops.RetryRuns(r.Context(), f); err != nil {
		h.render(w, r, "error", view{Title: "Retry"}, err)
		return
	}
	q := url.Values{}
	for k, v := range map[string]string{"job": f.Job, "queue": f.Queue} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/runs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	back(w, r, path, "bulk")
}

// POST /queues/{queue}/pause and …/resume
func (h *handler) uiQueueChange(change func(*ops.Ops, context.Context, string) (ops.Queue, error), done string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.uiWrite(w, r) {
			return
		}
		if _, err := change(h.ops, r.Context(), r.PathValue("queue")); err != nil {
			h.render(w, r, "error", view{Title: "Queue"}, err)
			return
		}
		back(w, r, "/", done)
	}
}
