package dashboardtest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockgen/lockgen/lockgenapi/dashboardtest/demo"
	"github.com/lockgen/lockgen/runtime/lockgentest"
)

const token = "dashboard-write-token"

// lockgenBin is the lockgen binary the tests serve with, built once.
var lockgenBin struct {
	once sync.Once
	path string
	err  error
}

func buildLockgen(t *testing.T) string {
	t.Helper()
	lockgenBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "lockgen-dashboard-")
		if err != nil {
			lockgenBin.err = err
			return
		}
		lockgenBin.path = filepath.Join(dir, "lockgen")
		out, err := exec.Command("go", "build", "-o", lockgenBin.path, "github.com/lockgen/lockgen/cmd/lockgen").CombinedOutput()
		if err != nil {
			lockgenBin.err = fmt.Errorf("go build lockgen: %v\n%s", err, out)
		}
	})
	require.NoError(t, lockgenBin.err)
	return lockgenBin.path
}

// deployment is a fresh database with the demo's migrations applied and
// real workers and lock holders of the generated package at work.
type deployment struct {
	dsn    string // the application's DSN, for lockgen serve
	db     *sql.DB
	server string // "MariaDB-10.11" or "MySQL-9.7"
	locks  *demo.Locks
}

// handlers fail every third receipt for good (two attempts), so that the
// runs page has discarded runs with their errors.
type handlers struct{}

func (handlers) Tick(context.Context, *demo.Run) error          { return nil }
func (handlers) NightlyReport(context.Context, *demo.Run) error { return nil }
func (handlers) SendReceipt(_ context.Context, _ *demo.Run, a demo.SendReceiptArgs) error {
	if a.OrderID%3 == 0 {
		return fmt.Errorf("smtp: 550 mailbox %s unavailable\n\tat send (mail.go:42)\n\tat handle (jobs.go:17)", a.Email)
	}
	return nil
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	admin := os.Getenv("LOCKGEN_TEST_DSN")
	if admin == "" {
		admin = "root@tcp(127.0.0.1:3306)/test"
	}
	dsn := lockgentest.NewDatabase(t, admin, "migrations")
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var version string
	require.NoError(t, db.QueryRow("SELECT VERSION()").Scan(&version))
	server := "MySQL-" + regexp.MustCompile(`^\d+\.\d+`).FindString(version)
	if strings.Contains(version, "MariaDB") {
		server = "MariaDB-" + regexp.MustCompile(`^\d+\.\d+`).FindString(version)
	}
	locks, err := demo.New(db, demo.WithOwner("web-1"))
	require.NoError(t, err)
	return &deployment{dsn: cfg.FormatDSN(), db: db, server: server, locks: locks}
}

// work makes the data the pages show, with real workers: a leader, two
// held order locks, receipts completed and discarded, partner runs due in
// the queue worked over HTTP, runs due later. It returns once the
// receipts have all finished; the workers and holders run until the test
// ends.
func (d *deployment) work(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	hold := func(fn func(ctx context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("worker: %v", err)
			}
		}()
	}
	hold(func(ctx context.Context) error {
		return d.locks.RunAsMaster(ctx, func(ctx context.Context, _ *demo.Lease) error { <-ctx.Done(); return nil })
	})
	for _, id := range []int64{1001, 1002} {
		hold(func(ctx context.Context) error {
			return d.locks.WithOrdersLock(ctx, id, func(ctx context.Context, _ *demo.Lease) error { <-ctx.Done(); return nil })
		})
	}
	// Invoice 7 is held (row strategy) and a second node waits for it.
	invoiceHeld := make(chan struct{})
	hold(func(ctx context.Context) error {
		return d.locks.WithInvoicesLock(ctx, 7, func(ctx context.Context, _ *demo.Lease) error {
			close(invoiceHeld)
			<-ctx.Done()
			return nil
		})
	})
	other, err := demo.New(d.db, demo.WithOwner("web-2"))
	require.NoError(t, err)
	hold(func(ctx context.Context) error {
		<-invoiceHeld
		err := other.WithInvoicesLock(ctx, 7, func(context.Context, *demo.Lease) error { return nil })
		if ctx.Err() != nil {
			return nil
		}
		return err
	})
	hold(func(ctx context.Context) error { return d.locks.RunJobs(ctx, handlers{}) })
	for i := int64(1); i <= 12; i++ {
		_, err := d.locks.EnqueueSendReceipt(ctx, demo.SendReceiptArgs{OrderID: i, Email: fmt.Sprintf("buyer%d@example.com", i)})
		require.NoError(t, err)
	}
	for i := int64(1); i <= 3; i++ {
		_, err := d.locks.EnqueueSyncPartner(ctx, demo.SyncPartnerArgs{PartnerID: i})
		require.NoError(t, err)
	}
	_, err = d.locks.EnqueueSendReceipt(ctx, demo.SendReceiptArgs{OrderID: 500, Email: "later@example.com"}, demo.Delay(time.Hour))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, d.db.QueryRow("SELECT COUNT(*) FROM dash_runs WHERE job = 'send_receipt' AND state IN ('available', 'running') AND run_at < UTC_TIMESTAMP()").Scan(&open))
		var held int
		require.NoError(t, d.db.QueryRow("SELECT COUNT(*) FROM dash_locks WHERE owner <> '' AND expires_at > UTC_TIMESTAMP()").Scan(&held))
		return open == 0 && held == 3
	}, 60*time.Second, 100*time.Millisecond, "the receipts finish and the three locks are held")
}

// serve starts `lockgen serve` on the deployment and returns its URL.
func (d *deployment) serve(t *testing.T, args ...string) string {
	t.Helper()
	bin := buildLockgen(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "-addr", "127.0.0.1:0", "-dsn", d.dsn, "-f", "lockgen.yaml"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	lines := bufio.NewScanner(stderr)
	require.True(t, lines.Scan(), "serve printed nothing")
	m := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(lines.Text())
	require.NotNil(t, m, "first line: %q", lines.Text())
	go func() {
		for lines.Scan() {
			t.Log("serve: " + lines.Text())
		}
	}()
	return m[1]
}

// browser starts a headless Chromium (Debian's chromium; `make test`
// installs it) and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium is missing: `make test` installs it (.ci/ensure-chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// artifacts is where the screenshots of a run go: $LOCKGEN_ARTIFACTS or
// artifacts/ at the repository's root, then dashboard/<server>/.
func artifacts(t *testing.T, server string) string {
	t.Helper()
	root := os.Getenv("LOCKGEN_ARTIFACTS")
	if root == "" {
		root = filepath.Join("..", "..", "artifacts")
	}
	dir := filepath.Join(root, "dashboard", server)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// logServerWaits logs what the server shows of the sessions and lock waits
// of the deployment's database, for a test that did not see a waiter.
func logServerWaits(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		"SELECT id, user, db, command, time, state, LEFT(info, 200) FROM information_schema.PROCESSLIST WHERE db = DATABASE()",
		"SELECT * FROM performance_schema.data_locks WHERE OBJECT_SCHEMA = DATABASE()", // MySQL
		"SELECT * FROM information_schema.INNODB_LOCK_WAITS",                           // MariaDB
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Logf("%s: %v", q, err)
			continue
		}
		cols, _ := rows.Columns()
		t.Logf("%s: columns %v", q, cols)
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Logf("scan: %v", err)
				break
			}
			t.Logf("  %v", vals)
		}
		if err := rows.Err(); err != nil {
			t.Logf("%s: %v", q, err)
		}
		_ = rows.Close()
	}
}

func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err, name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// TestDashboardInABrowser drives headless Chromium through every page of
// `lockgen serve` on a deployment that real workers made, then retries a
// discarded run and pauses a queue through the pages, and has writes
// without authority refused (a wrong token, a form on another site, a
// read-only server), checking the database each time. The screenshots of
// every page are kept (see artifacts).
func TestDashboardInABrowser(t *testing.T) {
	d := newDeployment(t)
	d.work(t)
	base := d.serve(t, "-write-token", token)
	ctx := browser(t)
	shots := artifacts(t, d.server)
	// web-2's wait for invoice 7 has reached the server.
	var pageMu sync.Mutex
	var lastPage []byte // Eventually's condition may still run when it gives up
	if !assert.Eventually(t, func() bool {
		resp, err := http.Get(base + "/api/v1/locks?name=invoices")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		pageMu.Lock()
		lastPage = body
		pageMu.Unlock()
		var page struct {
			Items []struct{ Waiters *int64 }
		}
		require.NoError(t, json.Unmarshal(body, &page))
		return len(page.Items) == 1 && page.Items[0].Waiters != nil && *page.Items[0].Waiters == 1
	}, 30*time.Second, 150*time.Millisecond, "the API counts web-2 waiting for invoice 7") { // MariaDB refreshes its lock waits only when unread for 100 ms
		pageMu.Lock()
		t.Logf("the last page: %s", lastPage)
		pageMu.Unlock()
		logServerWaits(t, d.db)
		t.FailNow()
	}

	var discarded []int64
	rows, err := d.db.Query("SELECT id FROM dash_runs WHERE state = 'discarded' ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		discarded = append(discarded, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, discarded, 4, "orders 3, 6, 9, 12 failed twice")
	// The trace context a traced producer stores with a run (lockgenotel).
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, err = d.db.Exec("UPDATE dash_runs SET headers = JSON_OBJECT('traceparent', ?) WHERE id = ?", traceparent, discarded[0])
	require.NoError(t, err)

	pages := []struct {
		name, path string
		want       []string
	}{
		{"overview", "/", []string{"Leaders", "master", "web-1", "orders", "default", "mail", "partner", "tick", "nightly_report", "@every 1s", "Europe/Berlin", "Pause mail"}},
		{"locks", "/locks", []string{"master", "orders", "1001", "1002", "web-1", "lease", "invoices", "row", "no force-release",
			"Nobody can tell who waits for orders: lease waiters poll the row"}},
		// The mail queue's runs: the whole list, newest first, fills its
		// first page with the tick's runs (one a second) when this test
		// runs slowly (79 s on a loaded machine).
		{"runs", "/runs?queue=mail", []string{"send_receipt", "sync_partner", "discarded", "completed", "smtp: 550 mailbox"}},
		{"runs-discarded", "/runs?job=send_receipt&state=discarded", []string{"Retry every discarded run of send_receipt"}},
		{"run", fmt.Sprintf("/runs/%d", discarded[0]), []string{"send_receipt", "discarded", "order_id", "buyer3@example.com", "at send (mail.go:42)", "started", "failed", "Retry run", "Headers", "traceparent", traceparent}},
		{"schedules", "/schedules", []string{"tick", "@every 1s", "nightly_report", "0 3 * * *", "Europe/Berlin", "Newest tick", "skipped"}},
	}
	for _, p := range pages {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+p.path)), p.name)
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		require.NoError(t, err, p.name)
		for _, w := range p.want {
			assert.Contains(t, text, w, "page %s", p.name)
		}
		shoot(t, ctx, shots, p.name)
		if p.name == "locks" {
			// The row lock's waiter, as the server counts it.
			waiting, err := chromedp.Run(ctx, chromedp.Evaluate[string](
				`[...document.querySelectorAll("tbody tr")].find(r => r.cells[0].textContent == "invoices").cells[7].textContent`))
			require.NoError(t, err)
			assert.Equal(t, "1", waiting, "the Waiting cell of invoice 7")
		}
		// Every form control has a label, and the page starts with a
		// skip link: usable with a keyboard and a screen reader.
		unlabelled, err := chromedp.Run(ctx, chromedp.Evaluate[int](
			`[...document.querySelectorAll("input:not([type=hidden]), select")].filter(e => !e.closest("label")).length`))
		require.NoError(t, err)
		assert.Zero(t, unlabelled, "page %s has form controls without a label", p.name)
	}

	// A retry through the run's page takes effect in the database.
	id := discarded[0]
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/runs/%d", base, id)),
		chromedp.SendKeys(chromedp.CSS(`#run-actions input[name=token]`), token),
		chromedp.Click(chromedp.CSS(`button[formaction$="/retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.done`)),
	))
	shoot(t, ctx, shots, "run-retried")
	// The workers run the retried run at once, and it fails for good again
	// (order 3 always fails): its history, not its state, shows the retry.
	var retried bool
	require.NoError(t, d.db.QueryRow("SELECT JSON_SEARCH(history, 'one', 'retried', NULL, '$[*].event') IS NOT NULL FROM dash_runs WHERE id = ?", id).Scan(&retried))
	assert.True(t, retried, "the retry took effect")
	var state string

	// A pause through the overview takes effect in the database.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.SendKeys(chromedp.CSS(`#queue-actions input[name=token]`), token),
		chromedp.Click(chromedp.CSS(`button[formaction$="/queues/mail/pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.done`)),
	))
	shoot(t, ctx, shots, "overview-paused")
	var paused bool
	require.NoError(t, d.db.QueryRow("SELECT paused FROM dash_queues WHERE queue = 'mail'").Scan(&paused))
	assert.True(t, paused, "the pause took effect")

	// A wrong token is refused and changes nothing.
	other := discarded[1]
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/runs/%d", base, other)),
		chromedp.SendKeys(chromedp.CSS(`#run-actions input[name=token]`), "guess"),
		chromedp.Click(chromedp.CSS(`button[formaction$="/retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.error`)),
	))
	msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.error`)))
	require.NoError(t, err)
	assert.Contains(t, msg, "write token is wrong")
	require.NoError(t, d.db.QueryRow("SELECT state FROM dash_runs WHERE id = ?", other).Scan(&state))
	assert.Equal(t, "discarded", state, "a refused retry changed nothing")

	// A page on another site cannot make the browser write: its form has
	// no token to send.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/queues/default/pause"><button>win a prize</button></form>`, base)
	}))
	defer evil.Close()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(evil.URL),
		chromedp.Click(chromedp.CSS(`button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.error`)),
	))
	err = d.db.QueryRow("SELECT paused FROM dash_queues WHERE queue = 'default'").Scan(&paused)
	assert.True(t, errors.Is(err, sql.ErrNoRows) || !paused, "a forged cross-site pause changed nothing")

	// On a phone.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/")))
	shoot(t, ctx, shots, "overview-phone")
	t.Logf("screenshots in %s", shots)

	// A server without a write token shows no write control, and a form
	// posted to it anyway is refused.
	readOnly := d.serve(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)))
	for _, path := range []string{"/", fmt.Sprintf("/runs/%d", other), "/runs?state=discarded"} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(readOnly+path)))
		forms, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post], button[formaction]").length`))
		require.NoError(t, err)
		mode, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".mode")))
		require.NoError(t, err)
		assert.Zero(t, forms, "%s has write controls", path)
		assert.Equal(t, "read-only", mode)
	}
	shoot(t, ctx, shots, "run-read-only")
	resp, err := http.Post(fmt.Sprintf("%s/runs/%d/retry", readOnly, other), "application/x-www-form-urlencoded", strings.NewReader("token="+token))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.NoError(t, d.db.QueryRow("SELECT state FROM dash_runs WHERE id = ?", other).Scan(&state))
	assert.Equal(t, "discarded", state, "a read-only server changed nothing")
}
