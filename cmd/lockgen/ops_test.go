package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/internal/sqltest"
	"github.com/lockgen/lockgen/templates"
)

// cliChildEnv makes the test binary run the lockgen command line of its
// arguments (see TestMain).
const cliChildEnv = "LOCKGEN_TEST_CLI_CHILD"

const opsSpec = `version: 1
package: locks
out: internal/locks
locks:
  - name: master
    ttl: 10s
    leader: true
  - name: orders
    ttl: 30s
    key: { name: order_id, type: int64 }
queues:
  - { name: mail, concurrency: 5 }
jobs:
  - name: send_receipt
    queue: mail
    args: { order_id: int64 }
  - name: nightly
    schedule: "@every 1m"
`

// opsDeployment is a database with lockgen's tables holding a leader, two
// held keys and three runs, and the lockgen.yaml that declares them. It
// returns the DSN and the spec's path, and the IDs of the runs.
func opsDeployment(t *testing.T) (dsn, specFile string, runs []int64) {
	t.Helper()
	db := sqltest.New(t, "lockgen_ops_")
	schema, err := templates.Render(templates.Schema, templates.Data{Header: templates.Header, Prefix: "lockgen_", Jobs: true})
	require.NoError(t, err)
	cfg := db.Config.Clone()
	cfg.MultiStatements = true
	conn := sqltest.Open(t, cfg)
	_, err = conn.Exec(string(schema))
	require.NoError(t, err)
	now := "UTC_TIMESTAMP(6)"
	for _, row := range [][2]string{{"master", ""}, {"orders", "1"}, {"orders", "2"}} {
		_, err := conn.Exec("INSERT INTO lockgen_locks (name, lock_key, owner, token, acquired_at, expires_at) VALUES (?, ?, 'node-a', 41, "+now+", "+now+" + INTERVAL 30 SECOND)", row[0], row[1])
		require.NoError(t, err)
	}
	for i, job := range []string{"send_receipt", "send_receipt", "nightly"} {
		queue, args := "mail", fmt.Sprintf(`{"order_id":%d}`, i+1)
		if job == "nightly" {
			queue, args = "default", "{}"
		}
		res, err := conn.Exec("INSERT INTO lockgen_runs (job, queue, state, run_at, args, max_attempts, timeout_us, created_at) VALUES (?, ?, 'available', "+now+", ?, 3, 60000000, "+now+")", job, queue, args)
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		runs = append(runs, id)
	}
	specFile = filepath.Join(t.TempDir(), "lockgen.yaml")
	require.NoError(t, os.WriteFile(specFile, []byte(opsSpec), 0o644))
	return db.Config.FormatDSN(), specFile, runs
}

// TestOperatorCommands runs each operator command as a user would and
// checks what it prints, its -json document and its exit status on bad
// input.
func TestOperatorCommands(t *testing.T) {
	dsn, spec, runs := opsDeployment(t)
	cli := func(args ...string) (int, string, string) {
		return lockgen(append(args, "-dsn", dsn, "-f", spec)...)
	}

	code, out, errOut := cli("status")
	require.Equal(t, exitOK, code, errOut)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^master +node-a +41 +\d+(\.\d+)?s$`),
		regexp.MustCompile(`(?m)^orders +lease +keyed +2$`),
		regexp.MustCompile(`(?m)^mail +no +2 +0 +0 +0 +0 +0$`),
		regexp.MustCompile(`(?m)^default +no +1 +0 +0 +0 +0 +0$`),
		regexp.MustCompile(`(?m)^nightly +@every 1m +\d{4}-\d\d-\d\d \d\d:\d\d:00\.000 UTC +-$`),
	} {
		assert.Regexp(t, want, out)
	}
	code, out, errOut = cli("status", "-json")
	require.Equal(t, exitOK, code, errOut)
	var doc struct {
		Leaders []struct{ Lock, Owner string }
		Queues  []struct {
			Name   string
			Counts struct{ Due int }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Leaders, 1)
	assert.Equal(t, "node-a", doc.Leaders[0].Owner)
	require.Len(t, doc.Queues, 2)

	code, out, errOut = cli("runs", "-job", "send_receipt", "-limit", "1")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, fmt.Sprintf(`(?m)^%d +send_receipt +mail +available +0/3 `, runs[1]), out)
	assert.Contains(t, out, fmt.Sprintf("next page: lockgen runs -job send_receipt -limit 1 -after %d\n", runs[1]))

	code, out, errOut = cli("run", fmt.Sprint(runs[1]))
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "args:\n  {\n    \"order_id\": 2\n  }\n")
	assert.Regexp(t, `(?m)^attempt +0 of 3$`, out)

	code, out, errOut = cli("pause", "mail")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^queue mail is paused \(since \d{4}-.* UTC\)\n$`, out)
	code, out, _ = cli("resume", "mail", "-json")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, `"paused": false`)

	code, out, errOut = cli("cancel", fmt.Sprint(runs[0]))
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("run %d (send_receipt) is cancelled\n", runs[0]), out)
	code, _, errOut = cli("cancel", fmt.Sprint(runs[0]))
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut, "is cancelled: only a run that is due or running (available or running) can be cancelled")
	code, out, errOut = cli("retry", fmt.Sprint(runs[0]))
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("run %d (send_receipt) is available\n", runs[0]), out)
	code, out, errOut = cli("run", fmt.Sprint(runs[0]))
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^history:\n  \d{4}-\d\d-\d\d [\d:.]+ UTC +cancelled *\n  \d{4}-\d\d-\d\d [\d:.]+ UTC +retried *\n`, out, "the operator's changes, in order")

	code, out, errOut = cli("cancel", fmt.Sprint(runs[1]))
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("run %d (send_receipt) is cancelled\n", runs[1]), out)
	code, out, errOut = cli("retry", "-state", "cancelled", "-queue", "mail")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "1 runs retried\n", out)

	code, out, errOut = cli("enqueue", "send_receipt", `{"order_id": 77}`, "-delay", "1h", "-unique-key", "o-77")
	require.Equal(t, exitOK, code, errOut)
	m := regexp.MustCompile(`^run (\d+) enqueued\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	code, out, errOut = cli("enqueue", "-unique-key", "o-77", "send_receipt", `{"order_id": 78}`)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "run "+m[1]+" (existing: an unfinished run of send_receipt has unique key \"o-77\")\n", out)
	code, out, errOut = cli("run", m[1], "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, `"order_id": 77`)
	assert.Contains(t, out, `"queue": "mail"`)

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"retry"}, exitUsage, "give a run ID, or -state discarded|orphaned|cancelled"},
		{[]string{"retry", "5", "-state", "discarded"}, exitUsage, "give a run ID or a filter (-state …), not both"},
		{[]string{"retry", "-state", "available"}, exitUsage, "state must be one of discarded, orphaned, cancelled"},
		{[]string{"retry", "-state", "discarded", "-finished-after", "yesterday"}, exitUsage, "-finished-after must be a time in RFC 3339"},
		{[]string{"enqueue", "send_receipt", `{"order_id": "x"}`}, exitUsage, "argument order_id: must be a whole number"},
		{[]string{"enqueue", "send_receipt", `{"orderid": 1}`}, exitUsage, `job send_receipt has no argument "orderid" (its arguments: order_id)`},
		{[]string{"enqueue", "send_receipt"}, exitUsage, "missing ARGS"},
		{[]string{"enqueue", "send_receipt", "{}", "-delay", "soon"}, exitUsage, "delay must be a Go duration"},
		{[]string{"runs", "-state", "done"}, exitUsage, "state must be one of available, running"},
		{[]string{"runs", "-job", "nope"}, exitUsage, `no job is named "nope" (the jobs are send_receipt, nightly)`},
		{[]string{"run", "abc"}, exitUsage, `a run ID is a positive whole number, not "abc"`},
		{[]string{"run", "99999999"}, exitFail, "no run has ID 99999999"},
		{[]string{"pause"}, exitUsage, "missing QUEUE"},
		{[]string{"pause", "mial"}, exitUsage, `no job uses queue "mial" (the queues are default, mail)`},
		{[]string{"pause", "mail", "default"}, exitUsage, `unexpected argument "default"`},
	} {
		code, out, errOut := cli(c.args...)
		assert.Equal(t, c.code, code, "%v: %s%s", c.args, out, errOut)
		assert.Contains(t, errOut, c.says, "%v", c.args)
		assert.Empty(t, out, "%v", c.args)
	}
	code, _, errOut = lockgen("status", "-f", spec, "-dsn", "")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no server: pass -dsn")
}

// TestServeAnswersAPythonClient runs `lockgen serve` as a process and a
// client written in Python (standard library only) against it: reads,
// paging, a pause and a resume, a cancel and a retry with the write token,
// and writes without it and bad input refused.
func TestServeAnswersAPythonClient(t *testing.T) {
	dsn, spec, _ := opsDeployment(t)
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is missing: `make test` installs it (.ci/ensure-python3)")
	const token = "py-test-token"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, os.Args[0], "serve", "-addr", "127.0.0.1:0", "-dsn", dsn, "-f", spec, "-write-token", token)
	serve.Env = append(os.Environ(), cliChildEnv+"=1")
	stderr, err := serve.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	defer func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	}()
	lines := bufio.NewScanner(stderr)
	require.True(t, lines.Scan(), "serve printed nothing")
	m := regexp.MustCompile(`^lockgen serve: listening on (http://127\.0\.0\.1:\d+) \(writes need the write token\)$`).FindStringSubmatch(lines.Text())
	require.NotNil(t, m, "first line: %q", lines.Text())
	go func() {
		for lines.Scan() { // the server's log, shown when the test fails
			t.Log("serve: " + lines.Text())
		}
	}()

	client := exec.CommandContext(ctx, python, "testdata/api_client.py", m[1], token)
	out, err := client.CombinedOutput()
	require.NoError(t, err, "python client:\n%s", out)
	assert.True(t, strings.HasSuffix(string(out), "all checks passed\n"), "%s", out)
	assert.GreaterOrEqual(t, strings.Count(string(out), "ok: "), 28, "%s", out)
}

// consumerSpec declares a queue worked outside Go, on tables of a prefix
// of their own: `lockgen serve` claims and records with the store lockgen
// generates for the default prefix, renamed (ops.Connector).
const consumerSpec = `version: 1
package: images
table_prefix: pyq_
queues:
  - { name: images, external: true }
jobs:
  - name: resize
    queue: images
    args: { image_id: int64, width: int32 }
    max_attempts: 3
    backoff: { initial: 100ms, max: 1s }
`

// TestServeFeedsAPythonConsumer runs `lockgen serve` as a process and a
// consumer written in Python (standard library only) against it: it pushes
// six runs, a first consumer claims three and is killed (SIGKILL) while it
// holds them, and a second one works all six, heartbeating past its lease
// and failing one attempt for a retry. The killed consumer's runs are
// rescued and run once more; every run completes exactly once.
func TestServeFeedsAPythonConsumer(t *testing.T) {
	db := sqltest.New(t, "lockgen_consume_")
	schema, err := templates.Render(templates.Schema, templates.Data{Header: templates.Header, Prefix: "pyq_", Jobs: true})
	require.NoError(t, err)
	cfg := db.Config.Clone()
	cfg.MultiStatements = true
	conn := sqltest.Open(t, cfg)
	_, err = conn.Exec(string(schema))
	require.NoError(t, err)
	spec := filepath.Join(t.TempDir(), "lockgen.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(consumerSpec), 0o644))
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is missing: `make test` installs it (.ci/ensure-python3)")

	const token = "consumer-token"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, os.Args[0], "serve", "-addr", "127.0.0.1:0", "-dsn", db.Config.FormatDSN(), "-f", spec, "-write-token", token)
	serve.Env = append(os.Environ(), cliChildEnv+"=1")
	stderr, err := serve.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	defer func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	}()
	lines := bufio.NewScanner(stderr)
	require.True(t, lines.Scan(), "serve printed nothing")
	m := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(lines.Text())
	require.NotNil(t, m, "first line: %q", lines.Text())
	go func() {
		for lines.Scan() {
			t.Log("serve: " + lines.Text())
		}
	}()
	consumer := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, python, append([]string{"testdata/api_consumer.py", m[1], token}, args...)...)
	}

	out, err := consumer("push", "6").CombinedOutput()
	require.NoError(t, err, "push:\n%s", out)

	hang := consumer("hang")
	hangOut, err := hang.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, hang.Start())
	held := bufio.NewScanner(hangOut)
	var claimed []string
	for held.Scan() {
		if ids, ok := strings.CutPrefix(held.Text(), "claimed "); ok {
			claimed = strings.Fields(ids)
			break
		}
	}
	require.Len(t, claimed, 3, "the hanging consumer claimed three runs")
	require.NoError(t, hang.Process.Kill()) // SIGKILL while it holds them
	_ = hang.Wait()

	out, err = consumer("work", "6").CombinedOutput()
	require.NoError(t, err, "work:\n%s", out)
	assert.True(t, strings.HasSuffix(string(out), "all checks passed\n"), "%s", out)

	rows, err := conn.Query("SELECT id, state, attempt, worker, history FROM pyq_runs ORDER BY id")
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var state, worker, history string
		var attempt int
		require.NoError(t, rows.Scan(&id, &state, &attempt, &worker, &history))
		n++
		assert.Equal(t, "completed", state, "run %d", id)
		assert.Equal(t, 1, strings.Count(history, `"event": "completed"`), "run %d completed once: %s", id, history)
		assert.Contains(t, worker, "py-work@", "run %d", id)
		if slices.Contains(claimed, strconv.FormatInt(id, 10)) {
			assert.Equal(t, 2, attempt, "run %d of the killed consumer ran once more", id)
			assert.Contains(t, history, `"event": "rescued"`, "run %d", id)
			assert.Contains(t, history, "py-hang@", "run %d's history names the killed consumer", id)
		}
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, 6, n)
}
