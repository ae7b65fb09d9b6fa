package lockgenapi_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/lockgenapi"
	"github.com/lockgen/lockgen/runtime/ops"
)

const token = "s3cret-write-token"

// testDB creates a database of its own on the test server
// (LOCKGEN_TEST_DSN, default MariaDB on 127.0.0.1:3306) with the
// repository's schema (queries/schema.sql), and drops it after the test.
func testDB(t testing.TB) *sql.DB {
	t.Helper()
	dsn := os.Getenv("LOCKGEN_TEST_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.ParseTime, cfg.InterpolateParams = true, true
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "lockgen_api_" + hex.EncodeToString(b[:])
	_, err = admin.Exec("CREATE DATABASE " + name)
	require.NoError(t, err, "is the test server running? `make test` starts it")
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE " + name) })
	cfg.DBName = name
	cfg.MultiStatements = true
	schema, err := os.ReadFile("../queries/schema.sql")
	require.NoError(t, err)
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	db.SetMaxIdleConns(16) // the push benchmark's 8 clients keep theirs
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(string(schema))
	require.NoError(t, err)
	return db
}

var config = ops.Config{
	Locks: []ops.Lock{{Name: "master", Strategy: "lease", Leader: true}, {Name: "orders", Strategy: "lease", Keyed: true}},
	Jobs:  []ops.Job{{Name: "test", Queue: "default", Args: []ops.Arg{{Name: "n", Type: "int64"}}}, {Name: "mail", Queue: "mail"}},
}

// server starts the handler over a fresh database holding a leader, two
// held keys and a few runs.
func server(t testing.TB, opts lockgenapi.Options) (*httptest.Server, *sql.DB) {
	t.Helper()
	db := testDB(t)
	now := "UTC_TIMESTAMP(6)"
	for _, key := range []string{"", "a", "b"} {
		name := "orders"
		if key == "" {
			name = "master"
		}
		_, err := db.Exec("INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at) VALUES (?, ?, 'node-a', 7, "+now+", "+now+" + INTERVAL 30 SECOND)", name, key)
		require.NoError(t, err)
	}
	for i, job := range []string{"test", "test", "mail"} {
		queue := map[string]string{"test": "default", "mail": "mail"}[job]
		_, err := db.Exec("INSERT INTO lockgen_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES (?, ?, 'available', "+now+", ?, 3, 60000000, "+now+")",
			job, queue, fmt.Sprintf(`{"n":%d}`, i))
		require.NoError(t, err)
	}
	o, err := ops.New(db, config)
	require.NoError(t, err)
	srv := httptest.NewServer(lockgenapi.New(o, opts))
	t.Cleanup(srv.Close)
	return srv, db
}

// call sends a request and decodes the JSON answer.
func call(t *testing.T, srv *httptest.Server, method, path, auth string, body io.Reader) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s %s", method, path)
	var doc map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc), "%s %s", method, path)
	return resp.StatusCode, doc
}

func errorOf(doc map[string]any) (code, field string) {
	e, _ := doc["error"].(map[string]any)
	code, _ = e["code"].(string)
	field, _ = e["field"].(string)
	return code, field
}

// TestReadEndpoints: every read answers the documents of package ops.
func TestReadEndpoints(t *testing.T) {
	srv, _ := server(t, lockgenapi.Options{})
	code, st := call(t, srv, "GET", "/api/v1/status", "", nil)
	require.Equal(t, 200, code, st)
	leaders := st["leaders"].([]any)
	require.Len(t, leaders, 1)
	assert.Equal(t, "master", leaders[0].(map[string]any)["lock"])
	assert.Equal(t, 7.0, leaders[0].(map[string]any)["token"])
	queues := st["queues"].([]any)
	require.Len(t, queues, 2)
	assert.Equal(t, map[string]any{"due": 2.0, "scheduled": 0.0, "retrying": 0.0, "running": 0.0, "orphaned": 0.0, "discarded": 0.0, "exact": true},
		queues[0].(map[string]any)["counts"])

	code, page := call(t, srv, "GET", "/api/v1/locks?name=orders&limit=1", "", nil)
	require.Equal(t, 200, code, page)
	require.Len(t, page["items"], 1)
	next := page["next"].(string)
	code, page = call(t, srv, "GET", "/api/v1/locks?name=orders&limit=1&after="+next, "", nil)
	require.Equal(t, 200, code, page)
	assert.Equal(t, "b", page["items"].([]any)[0].(map[string]any)["key"])

	code, page = call(t, srv, "GET", "/api/v1/runs?job=test", "", nil)
	require.Equal(t, 200, code, page)
	items := page["items"].([]any)
	require.Len(t, items, 2)
	id := int64(items[0].(map[string]any)["id"].(float64))
	code, run := call(t, srv, "GET", fmt.Sprintf("/api/v1/runs/%d", id), "", nil)
	require.Equal(t, 200, code, run)
	assert.Equal(t, map[string]any{"n": 1.0}, run["args"])

	code, qs := call(t, srv, "GET", "/api/v1/queues", "", nil)
	require.Equal(t, 200, code, qs)
	assert.Len(t, qs["items"], 2)
}

// TestBadInputIs4xxNamingTheField: each bad request is answered 4xx with
// the field at fault, never 500, and writes nothing.
func TestBadInputIs4xxNamingTheField(t *testing.T) {
	srv, db := server(t, lockgenapi.Options{WriteToken: token})
	bearer := "Bearer " + token
	for _, c := range []struct {
		method, path, body string
		status             int
		code, field        string
	}{
		{"GET", "/api/v1/runs?limit=abc", "", 400, "invalid", "limit"},
		{"GET", "/api/v1/runs?limit=100000", "", 400, "invalid", "limit"},
		{"GET", "/api/v1/runs?state=done", "", 400, "invalid", "state"},
		{"GET", "/api/v1/runs?job=nope", "", 400, "invalid", "job"},
		{"GET", "/api/v1/runs?queue=nope", "", 400, "invalid", "queue"},
		{"GET", "/api/v1/runs?after=1%27%20OR%201=1", "", 400, "invalid", "after"},
		{"GET", "/api/v1/runs?jbo=test", "", 400, "invalid", "jbo"},
		{"GET", "/api/v1/runs?job=test&job=mail", "", 400, "invalid", "job"},
		{"GET", "/api/v1/locks?name=%ff", "", 400, "invalid", "name"},
		{"GET", "/api/v1/locks?after=zzz", "", 400, "invalid", "after"},
		{"GET", "/api/v1/runs/abc", "", 400, "invalid", "id"},
		{"GET", "/api/v1/runs/-3", "", 400, "invalid", "id"},
		{"GET", "/api/v1/runs/99999999", "", 404, "not_found", "id"},
		{"GET", "/api/v1/nope", "", 404, "not_found", ""},
		{"DELETE", "/api/v1/runs/1", "", 405, "method_not_allowed", ""},
		{"POST", "/api/v1/queues/nope/pause", "", 400, "invalid", "queue"},
		{"POST", "/api/v1/queues/default';%20DROP%20TABLE%20lockgen_runs;--/pause", "", 400, "invalid", "queue"},
		{"POST", "/api/v1/queues/default/pause", "not json", 400, "invalid", ""},
		{"POST", "/api/v1/queues/default/pause", strings.Repeat("x", lockgenapi.MaxBody+1), 413, "invalid", ""},
		{"POST", "/api/v1/runs/abc/cancel", "", 400, "invalid", "id"},
		{"POST", "/api/v1/runs/99999999/retry", "", 404, "not_found", "id"},
		{"POST", "/api/v1/jobs/nope/runs", `{}`, 400, "invalid", "job"},
		{"POST", "/api/v1/jobs/test/runs", `{"args": {"n": "x"}}`, 400, "invalid", "args.n"},
		{"POST", "/api/v1/jobs/test/runs", `{"args": {"m": 1}}`, 400, "invalid", "args.m"},
		{"POST", "/api/v1/jobs/test/runs", `{"argz": {}}`, 400, "invalid", "argz"},
		{"POST", "/api/v1/jobs/test/runs", `{"delay": 5}`, 400, "invalid", "delay"},
		{"POST", "/api/v1/jobs/test/runs", `{"delay": "-5s"}`, 400, "invalid", "delay"},
		{"POST", "/api/v1/jobs/test/runs", `{"run_at": "tomorrow"}`, 400, "invalid", "run_at"},
		{"POST", "/api/v1/jobs/test/runs", `{"priority": 1000}`, 400, "invalid", "priority"},
		{"POST", "/api/v1/jobs/test/runs", `{"max_attempts": "3"}`, 400, "invalid", "max_attempts"},
		{"POST", "/api/v1/jobs/test/runs", `[]`, 400, "invalid", ""},
		{"POST", "/api/v1/jobs/test/runs", `{} {}`, 400, "invalid", ""},
		{"POST", "/api/v1/jobs/test/runs", "{\"unique_key\": \"\xff\"}", 400, "invalid", ""},
		{"POST", "/api/v1/jobs/test/runs", `{"args": {"n": 1}`, 400, "invalid", ""},
		{"POST", "/api/v1/runs/retry", `{}`, 400, "invalid", "state"},
		{"POST", "/api/v1/runs/retry", `{"state": "discarded", "finished_after": "yesterday"}`, 400, "invalid", "finished_after"},
		{"POST", "/api/v1/queues/nope/claim", `{"worker": "w"}`, 400, "invalid", "queue"},
		{"POST", "/api/v1/queues/default/claim", `{}`, 400, "invalid", "worker"},
		{"POST", "/api/v1/queues/default/claim", `{"worker": "w", "limit": "5"}`, 400, "invalid", "limit"},
		{"POST", "/api/v1/queues/default/claim", `{"worker": "w", "limit": 1000}`, 400, "invalid", "limit"},
		{"POST", "/api/v1/queues/default/claim", `{"worker": "w", "wait": "2h"}`, 400, "invalid", "wait"},
		{"POST", "/api/v1/queues/default/claim", `{"worker": "w", "lease": "1ms"}`, 400, "invalid", "lease"},
		{"POST", "/api/v1/queues/default/claim", `{"worker": "w", "wiat": "1s"}`, 400, "invalid", "wiat"},
		{"POST", "/api/v1/runs/1/heartbeat", `{"claim": "x"}`, 400, "invalid", "claim"},
		{"POST", "/api/v1/runs/1/heartbeat", `{}`, 400, "invalid", "claim"},
		{"POST", "/api/v1/runs/abc/complete", `{"claim": 1}`, 400, "invalid", "id"},
		{"POST", "/api/v1/runs/99999999/complete", `{"claim": 1}`, 404, "not_found", "id"},
		{"POST", "/api/v1/runs/1/fail", `{"claim": 1, "snooze": "1s", "error": "x"}`, 400, "invalid", "snooze"},
		{"POST", "/api/v1/runs/1/fail", `{"claim": 1, "retry": "no"}`, 400, "invalid", "retry"},
		{"POST", "/api/v1/runs/complete", `{"runs": []}`, 400, "invalid", "runs"},
		{"POST", "/api/v1/runs/complete", `{"runs": [{"id": 1}]}`, 400, "invalid", "runs[0].claim"},
	} {
		status, doc := call(t, srv, c.method, c.path, bearer, strings.NewReader(c.body))
		assert.Equal(t, c.status, status, "%s %s: %v", c.method, c.path, doc)
		code, field := errorOf(doc)
		assert.Equal(t, c.code, code, "%s %s", c.method, c.path)
		assert.Equal(t, c.field, field, "%s %s", c.method, c.path)
	}
	var paused, runs int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_queues").Scan(&paused))
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_runs WHERE state = 'available'").Scan(&runs))
	assert.Zero(t, paused, "a refused pause wrote nothing")
	assert.Equal(t, 3, runs)
}

// TestWritesNeedAuthority: a server without a write token is read-only; with
// one, a write needs it as a bearer token; an authorization hook decides
// instead when set. A refused write changes nothing; an allowed one takes
// effect in the database.
func TestWritesNeedAuthority(t *testing.T) {
	readOnly, _ := server(t, lockgenapi.Options{})
	status, doc := call(t, readOnly, "POST", "/api/v1/queues/default/pause", "Bearer anything", nil)
	assert.Equal(t, 403, status)
	code, _ := errorOf(doc)
	assert.Equal(t, "forbidden", code)

	srv, db := server(t, lockgenapi.Options{WriteToken: token})
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, token, "Bearer " + token + "x"} {
		status, doc := call(t, srv, "POST", "/api/v1/queues/default/pause", auth, nil)
		assert.Equal(t, 401, status, "auth %q", auth)
		code, _ := errorOf(doc)
		assert.Equal(t, "unauthorized", code)
	}
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM lockgen_queues").Scan(&n))
	assert.Zero(t, n)

	status, doc = call(t, srv, "POST", "/api/v1/queues/default/pause", "Bearer "+token, strings.NewReader("{}"))
	require.Equal(t, 200, status, doc)
	assert.Equal(t, true, doc["paused"])
	var paused bool
	require.NoError(t, db.QueryRow("SELECT paused FROM lockgen_queues WHERE queue = 'default'").Scan(&paused))
	assert.True(t, paused)
	status, doc = call(t, srv, "POST", "/api/v1/queues/default/resume", "Bearer "+token, nil)
	require.Equal(t, 200, status, doc)
	assert.Equal(t, false, doc["paused"])

	var id int64
	require.NoError(t, db.QueryRow("SELECT MIN(id) FROM lockgen_runs").Scan(&id))
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/cancel", id), "Bearer "+token, nil)
	require.Equal(t, 200, status, doc)
	assert.Equal(t, "cancelled", doc["state"])
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/cancel", id), "Bearer "+token, nil)
	assert.Equal(t, 409, status, doc)
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/retry", id), "Bearer "+token, nil)
	require.Equal(t, 200, status, doc)
	assert.Equal(t, "available", doc["state"])

	status, doc = call(t, srv, "POST", "/api/v1/jobs/test/runs", "", strings.NewReader(`{"args": {"n": 5}}`))
	assert.Equal(t, 401, status, "a push needs the token too: %v", doc)
	push := `{"args": {"n": 5}, "delay": "1h", "unique_key": "order-5", "priority": 9}`
	status, doc = call(t, srv, "POST", "/api/v1/jobs/test/runs", "Bearer "+token, strings.NewReader(push))
	require.Equal(t, 201, status, doc)
	assert.Equal(t, false, doc["existing"])
	pushed := int64(doc["id"].(float64))
	status, doc = call(t, srv, "POST", "/api/v1/jobs/test/runs", "Bearer "+token, strings.NewReader(push))
	require.Equal(t, 200, status, "the same unique key answers the existing run: %v", doc)
	assert.Equal(t, map[string]any{"id": float64(pushed), "existing": true}, doc)
	var args string
	var priority int
	require.NoError(t, db.QueryRow("SELECT args, priority FROM lockgen_runs WHERE id = ?", pushed).Scan(&args, &priority))
	assert.JSONEq(t, `{"n": 5}`, args)
	assert.Equal(t, 9, priority)

	hooked, _ := server(t, lockgenapi.Options{WriteToken: token, Authorize: func(r *http.Request) error {
		if r.Header.Get("X-Admin") != "yes" {
			return errors.New("admins only")
		}
		return nil
	}})
	status, doc = call(t, hooked, "POST", "/api/v1/queues/mail/pause", "Bearer "+token, nil)
	assert.Equal(t, 403, status, "the hook decides, not the token")
	assert.Contains(t, doc["error"].(map[string]any)["message"], "admins only")
}

// TestOpenAPIDescribesEveryEndpoint: the OpenAPI document lists each
// endpoint the handler serves, and each documented operation, called with
// example parameters, answers one of the statuses the document gives it.
func TestOpenAPIDescribesEveryEndpoint(t *testing.T) {
	srv, db := server(t, lockgenapi.Options{WriteToken: token})
	code, doc := call(t, srv, "GET", "/api/v1/openapi.json", "", nil)
	require.Equal(t, 200, code)
	assert.Equal(t, "3.1.0", doc["openapi"])
	paths := doc["paths"].(map[string]any)
	var id int64
	require.NoError(t, db.QueryRow("SELECT MAX(id) FROM lockgen_runs").Scan(&id))
	body := map[string]string{"/api/v1/jobs/test/runs": `{"args": {"n": 1}}`, "/api/v1/jobs/mail/runs": `{}`, "/api/v1/runs/retry": `{"state": "discarded"}`,
		"/api/v1/jobs/test/runs/batch": `{"runs": [{"args": {"n": 1}}, {"args": {"n": 2}}]}`, "/api/v1/jobs/mail/runs/batch": `{"runs": [{}]}`,
		"/api/v1/queues/{queue}/claim": `{"worker": "w"}`, "/api/v1/runs/{id}/heartbeat": `{"claim": 1}`, "/api/v1/runs/{id}/complete": `{"claim": 1}`,
		"/api/v1/runs/{id}/fail": `{"claim": 1}`, "/api/v1/runs/complete": `{"runs": [{"id": 1, "claim": 1}]}`}
	calls := 0
	for p, item := range paths {
		for method, op := range item.(map[string]any) {
			url := strings.NewReplacer("{queue}", "default", "{id}", fmt.Sprint(id)).Replace(p)
			status, answer := call(t, srv, strings.ToUpper(method), url, "Bearer "+token, strings.NewReader(body[p]))
			responses := op.(map[string]any)["responses"].(map[string]any)
			assert.Contains(t, responses, fmt.Sprint(status), "%s %s answered %d: %v", method, url, status, answer)
			if e, ok := answer["error"].(map[string]any); ok {
				assert.NotContains(t, e["message"], "no endpoint", "%s %s", method, url)
				assert.NotEqual(t, "method_not_allowed", e["code"], "%s %s", method, url)
			}
			calls++
		}
	}
	assert.Equal(t, 20, calls, "sixteen endpoints and a push and a batch push per job")
	args := doc["components"].(map[string]any)["schemas"].(map[string]any)["TestArgs"].(map[string]any)
	assert.Equal(t, map[string]any{"n": map[string]any{"type": "integer", "format": "int64"}}, args["properties"])
	assert.Equal(t, false, args["additionalProperties"])
}

// TestConsumeOverHTTP: a consumer claims, heartbeats and completes over
// HTTP; a heartbeat or outcome of a claim that is no longer current is 409,
// and one of a run an operator cancelled says so.
func TestConsumeOverHTTP(t *testing.T) {
	srv, db := server(t, lockgenapi.Options{WriteToken: token})
	bearer := "Bearer " + token
	status, doc := call(t, srv, "POST", "/api/v1/queues/default/claim", "", strings.NewReader(`{"worker": "w"}`))
	assert.Equal(t, 401, status, "a claim needs the token: %v", doc)

	status, doc = call(t, srv, "POST", "/api/v1/queues/default/claim", bearer, strings.NewReader(`{"worker": "py@host", "limit": 10, "lease": "1m"}`))
	require.Equal(t, 200, status, doc)
	items := doc["items"].([]any)
	require.Len(t, items, 2, "the two runs of queue default")
	first := items[0].(map[string]any)
	id, claim := int64(first["id"].(float64)), int64(first["claim"].(float64))
	assert.Equal(t, "test", first["job"])
	assert.Contains(t, first["args"], "n")
	assert.Equal(t, float64(1), first["attempt"])
	assert.NotEmpty(t, first["deadline"])
	second := items[1].(map[string]any)
	id2, claim2 := int64(second["id"].(float64)), int64(second["claim"].(float64))

	status, doc = call(t, srv, "POST", "/api/v1/queues/default/claim", bearer, strings.NewReader(`{"worker": "other", "wait": "200ms"}`))
	require.Equal(t, 200, status, doc)
	assert.Empty(t, doc["items"], "both are claimed: an empty list after the wait")

	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/heartbeat", id), bearer, strings.NewReader(fmt.Sprintf(`{"claim": %d, "lease": "2m"}`, claim)))
	require.Equal(t, 200, status, doc)
	assert.Equal(t, float64(id), doc["id"])
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/complete", id), bearer, strings.NewReader(fmt.Sprintf(`{"claim": %d}`, claim)))
	require.Equal(t, 200, status, doc)
	assert.Equal(t, "completed", doc["state"])
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/complete", id), bearer, strings.NewReader(fmt.Sprintf(`{"claim": %d}`, claim)))
	assert.Equal(t, 409, status, doc)
	code, field := errorOf(doc)
	assert.Equal(t, "conflict", code)
	assert.Equal(t, "claim", field)
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/heartbeat", id2), bearer, strings.NewReader(fmt.Sprintf(`{"claim": %d}`, claim2+1)))
	assert.Equal(t, 409, status, "a claim that never was: %v", doc)

	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/cancel", id2), bearer, nil)
	require.Equal(t, 200, status, doc)
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/heartbeat", id2), bearer, strings.NewReader(fmt.Sprintf(`{"claim": %d}`, claim2)))
	assert.Equal(t, 409, status, doc)
	code, _ = errorOf(doc)
	assert.Equal(t, "cancelled", code, "the consumer learns an operator cancelled its run")
	status, doc = call(t, srv, "POST", fmt.Sprintf("/api/v1/runs/%d/fail", id2), bearer, strings.NewReader(fmt.Sprintf(`{"claim": %d, "error": "stopped"}`, claim2)))
	assert.Equal(t, 409, status, doc)

	var state, worker string
	require.NoError(t, db.QueryRow("SELECT state, worker FROM lockgen_runs WHERE id = ?", id).Scan(&state, &worker))
	assert.Equal(t, "completed", state)
	assert.Equal(t, "py@host", worker)
	require.NoError(t, db.QueryRow("SELECT state FROM lockgen_runs WHERE id = ?", id2).Scan(&state))
	assert.Equal(t, "cancelled", state)
}

// TestDashboardPages: every page renders as HTML with its security
// headers; links keep the prefix the handler is mounted under; a form
// write needs the write token (or, with an Authorize hook, a request from
// a page of the same origin) and takes effect only then. The browser tests
// (dashboardtest) drive the same pages in Chromium.
func TestDashboardPages(t *testing.T) {
	srv, db := server(t, lockgenapi.Options{WriteToken: token})
	var id int64
	require.NoError(t, db.QueryRow("SELECT MIN(id) FROM lockgen_runs").Scan(&id))
	get := func(srv *httptest.Server, path string) (int, string, http.Header) {
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), resp.Header
	}
	for path, want := range map[string][]string{
		"/":                         {"master", "node-a", "default", "mail", "Pause mail", `name="token"`},
		"/locks":                    {"orders", "node-a"},
		"/runs":                     {"test", "mail", "available"},
		fmt.Sprintf("/runs/%d", id): {"Cancel run", "&#34;n&#34;: 0"},
		"/schedules":                {"No scheduled jobs"},
	} {
		status, body, h := get(srv, path)
		assert.Equal(t, 200, status, path)
		assert.Equal(t, "text/html; charset=utf-8", h.Get("Content-Type"), path)
		assert.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		for _, w := range want {
			assert.Contains(t, body, w, path)
		}
	}
	status, body, _ := get(srv, "/runs/abc")
	assert.Equal(t, 400, status)
	assert.Contains(t, body, "a run ID is a positive whole number")
	status, _, _ = get(srv, "/nope")
	assert.Equal(t, 404, status)

	mounted := httptest.NewServer(http.StripPrefix("/ops", lockgenapi.New(mustOps(t, db), lockgenapi.Options{})))
	defer mounted.Close()
	status, body, _ = get(mounted, "/ops/")
	assert.Equal(t, 200, status)
	assert.Contains(t, body, `href="/ops/runs"`, "links keep the mount point")
	assert.NotContains(t, body, `<form method="post"`, "read-only: no write form")
	assert.Contains(t, body, `http-equiv="refresh"`, "read-only, the overview refreshes itself")
	_, body, _ = get(srv, "/")
	assert.NotContains(t, body, `http-equiv="refresh"`, "with write forms it does not: a refresh would wipe a token being typed")
	_, body, _ = get(srv, "/?refresh=on")
	assert.Contains(t, body, `http-equiv="refresh"`, "unless asked to")

	post := func(srv *httptest.Server, path string, form url.Values, header map[string]string) *http.Response {
		req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		c := *srv.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	paused := func() bool {
		var p bool
		err := db.QueryRow("SELECT paused FROM lockgen_queues WHERE queue = 'mail'").Scan(&p)
		return err == nil && p
	}
	assert.Equal(t, 403, post(srv, "/queues/mail/pause", url.Values{"token": {"wrong"}}, nil).StatusCode)
	assert.Equal(t, 403, post(srv, "/queues/mail/pause", nil, nil).StatusCode)
	assert.False(t, paused(), "a refused write changed nothing")
	resp := post(srv, "/queues/mail/pause", url.Values{"token": {token}}, nil)
	assert.Equal(t, 303, resp.StatusCode)
	assert.Equal(t, "/?done=paused", resp.Header.Get("Location"))
	assert.True(t, paused())

	hooked := httptest.NewServer(lockgenapi.New(mustOps(t, db), lockgenapi.Options{Authorize: func(*http.Request) error { return nil }}))
	defer hooked.Close()
	assert.Equal(t, 403, post(hooked, "/queues/mail/resume", nil, nil).StatusCode, "no origin")
	assert.Equal(t, 403, post(hooked, "/queues/mail/resume", nil, map[string]string{"Sec-Fetch-Site": "cross-site"}).StatusCode)
	assert.Equal(t, 403, post(hooked, "/queues/mail/resume", nil, map[string]string{"Origin": "https://evil.example"}).StatusCode)
	assert.True(t, paused(), "refused writes changed nothing")
	assert.Equal(t, 303, post(hooked, "/queues/mail/resume", nil, map[string]string{"Sec-Fetch-Site": "same-origin"}).StatusCode)
	assert.False(t, paused())
}

func mustOps(t *testing.T, db *sql.DB) *ops.Ops {
	t.Helper()
	o, err := ops.New(db, config)
	require.NoError(t, err)
	return o
}
