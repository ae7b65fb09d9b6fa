package generator

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedCodeBuildsAndVets generates golden cases into fresh modules,
// adds a program that calls every generated function, and builds, vets and
// runs it against this repository's runtime module (through a go.work), the
// way an application would: importing only the generated package.
func TestGeneratedCodeBuildsAndVets(t *testing.T) {
	for _, tc := range []struct{ name, main, want string }{
		{"every", everyMain, "New(nil): lockgen: invalid argument: nil *sql.DB (errors.Is ErrInvalid: true)\n"},
		{"jobs", jobsMain, "RunJobs(nil): lockgen: invalid argument: nil JobHandlers\n"},
		{"jobs-only", jobsOnlyMain, "RunJobs(nil): lockgen: invalid argument: nil JobHandlers\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			buildAndRun(t, tc.name, tc.main, tc.want)
		})
	}
}

func buildAndRun(t *testing.T, name, main, want string) {
	goExe, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to build generated code")
	runtimeDir := findRuntimeModule(t)

	specPath := goldenSpec(t, name)
	dir := filepath.Dir(specPath)
	res, err := Generate(context.Background(), Options{SpecPath: specPath})
	require.NoError(t, err)
	require.NoError(t, res.Write())
	writeFile(t, filepath.Join(dir, "go.work"), "go 1.24.0\n\nuse (\n\t.\n\t"+filepath.ToSlash(runtimeDir)+"\n)\n")
	writeFile(t, filepath.Join(dir, "main.go"), main)

	env := append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=", "GOPROXY=off")
	run := func(args ...string) string {
		cmd := exec.Command(goExe, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	run("build", "./...")
	run("vet", "./...")
	run("build", "-o", filepath.Join(dir, "app"), ".")

	cmd := exec.Command(filepath.Join(dir, "app"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), out.String())
	require.Equal(t, want, out.String())
}

// jobsMain implements JobHandlers and calls every job function generated
// for the "jobs" golden case. Run, it only checks that RunJobs rejects nil
// handlers.
const jobsMain = `package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"example.com/jobs/internal/work"
)

type handlers struct{}

func (handlers) NightlyReport(ctx context.Context, run *work.Run) error { return nil }
func (handlers) SendSMS(ctx context.Context, run *work.Run, args work.SendSMSArgs) error {
	_ = args.OrderID + int64(args.AttemptNo)
	return nil
}
func (handlers) Reindex(ctx context.Context, run *work.Run, args work.ReindexArgs) error { return nil }
func (handlers) RebuildCache(ctx context.Context, run *work.Run) error                 { return nil }

var _ work.JobHandlers = handlers{}

func main() {
	w, err := work.New(&sql.DB{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("RunJobs(nil): %v\n", w.RunJobs(context.Background(), nil))
	if false {
		_ = use(context.Background(), w)
	}
}

func use(ctx context.Context, w *work.Locks) error {
	args := work.SendSMSArgs{OrderID: 1, Phone: "+1", AttemptNo: 2, Urgent: true, Score: 0.5, Due: time.Now(), Wait: time.Second,
		Tags: []string{"a"}, Raw: json.RawMessage("{}")}
	var id int64
	var err error
	var errs []error
	id, err = w.EnqueueSendSMS(ctx, args, work.Delay(time.Minute), work.WithPriority(5), work.WithUniqueKey("k"),
		work.WithMaxAttempts(3), work.RunAt(time.Now()))
	errs = append(errs, err)
	id, err = w.EnqueueSendSMSTx(ctx, &sql.Tx{}, args)
	errs = append(errs, err, w.EnqueueSendSMSMany(ctx, []work.SendSMSArgs{args}))
	id, err = w.EnqueueReindex(ctx, work.ReindexArgs{Reason: "manual"})
	errs = append(errs, err)
	id, err = w.EnqueueRebuildCache(ctx)
	errs = append(errs, err)
	id, err = w.EnqueueRebuildCacheTx(ctx, &sql.Tx{})
	errs = append(errs, err)
	var info work.RunInfo
	info, err = w.JobRun(ctx, id)
	_, _ = w.CancelRun(ctx, id)
	_, _ = w.RetryRun(ctx, id)
	var opt work.WorkerOption = func(c *work.WorkerConfig) { c.Lease = time.Minute }
	errs = append(errs, err, w.RunJobs(ctx, handlers{}, opt, func(c *work.WorkerConfig) { c.ShutdownGrace = time.Minute }))
	_ = []string{work.NightlyReportJob, work.SendSMSJob, work.ReindexJob, work.RebuildCacheJob, string(info.State)}
	_ = []any{work.RunAvailable, work.RunRunning, work.RunCompleted, work.RunDiscarded, work.RunCancelled, work.RunSkipped, work.RunOrphaned}
	_ = []error{work.ErrInvalid, work.ErrUnsupported, work.ErrLeaseLost, work.ErrNotAcquired, work.ErrReleased,
		work.ErrRunNotFound, work.ErrUniqueKeyTaken}
	return errors.Join(errs...)
}
`

// jobsOnlyMain calls every function generated for the "jobs-only" golden
// case, a package named jobs (which imports the runtime's jobs package
// under another name). Run, it only checks that RunJobs rejects nil
// handlers.
const jobsOnlyMain = `package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"example.com/jobsonly/jobs"
)

type handlers struct{}

func (handlers) Tick(ctx context.Context, run *jobs.Run) error { return nil }
func (handlers) SendReceipt(ctx context.Context, run *jobs.Run, args jobs.SendReceiptArgs) error {
	return nil
}

func main() {
	j, err := jobs.New(&sql.DB{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("RunJobs(nil): %v\n", j.RunJobs(context.Background(), nil))
	if false {
		_ = use(context.Background(), j)
	}
}

func use(ctx context.Context, j *jobs.Locks) error {
	args := jobs.SendReceiptArgs{OrderID: 1, Email: "a@example.com"}
	id, err := j.EnqueueSendReceipt(ctx, args, jobs.Delay(time.Minute))
	errs := []error{err, j.CheckServer(ctx), j.EnqueueSendReceiptMany(ctx, []jobs.SendReceiptArgs{args})}
	id, err = j.EnqueueSendReceiptTx(ctx, &sql.Tx{}, args)
	errs = append(errs, err)
	var info jobs.RunInfo
	info, err = j.JobRun(ctx, id)
	_, _ = j.CancelRun(ctx, id)
	_, _ = j.RetryRun(ctx, id)
	errs = append(errs, err, j.RunJobs(ctx, handlers{}, func(c *jobs.WorkerConfig) { c.Lease = time.Minute }))
	_ = []string{j.Owner(), jobs.TickJob, jobs.SendReceiptJob, string(info.State)}
	_ = []error{jobs.ErrInvalid, jobs.ErrUnsupported, jobs.ErrLeaseLost, jobs.ErrRunNotFound, jobs.ErrUniqueKeyTaken}
	return errors.Join(errs...)
}
`

// everyMain calls every function generated for the "every" golden case,
// which proves the API compiles as documented. Run, it only checks that New
// rejects a nil *sql.DB.
const everyMain = `package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"example.com/every/internal/platform/dlock"
)

func main() {
	_, err := dlock.New(nil)
	fmt.Printf("New(nil): %v (errors.Is ErrInvalid: %v)\n", err, errors.Is(err, dlock.ErrInvalid))
	if err != nil {
		return
	}
	use(context.Background(), &sql.DB{})
}

func use(ctx context.Context, db *sql.DB) error {
	opts := []dlock.Option{dlock.WithOwner("node-1"), dlock.WithLogger(slog.Default())}
	_ = dlock.WithObserver // takes a runtime.Observer, such as lockgenprom's
	locks, err := dlock.New(db, opts...)
	if err != nil {
		return err
	}
	_ = locks.Owner()
	names := []string{
		dlock.MasterLockName, dlock.OrderLockName, dlock.SendSMSLockName, dlock.NightlyReportLockName,
		dlock.ImportLockName, dlock.TenantMigrationLockName, dlock.SchedulerLockName, dlock.TenantBackupLockName,
		dlock.LedgerLockName,
	}
	fn := func(ctx context.Context, lease *dlock.Lease) error {
		var token int64 = lease.Token()
		_, _ = token, ctx.Err()
		return nil
	}
	var lease *dlock.Lease
	var holder dlock.Holder
	errs := []error{
		locks.WithMasterLock(ctx, fn),
		locks.WithOrderLock(ctx, int64(42), fn),
		locks.WithSendSMSLock(ctx, "+8613800000000", fn),
		locks.WithNightlyReportLock(ctx, fn),
		locks.WithImportLock(ctx, fn),
		locks.WithTenantMigrationLock(ctx, "acme", fn),
		locks.WithSchedulerLock(ctx, fn),
		locks.WithTenantBackupLock(ctx, "6f9619ff-8b86-d011-b42d-00c04fc964ff", fn),
		locks.WithLedgerLock(ctx, "acct-1", fn),
		locks.WithLedgerLockTx(ctx, "acct-1", func(ctx context.Context, tx *sql.Tx, lease *dlock.Lease) error {
			_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 1 WHERE id = ?", "acct-1")
			return err
		}),
		locks.RunAsMaster(ctx, fn),
		locks.RunAsScheduler(ctx, fn,
			dlock.OnElected(func(lease *dlock.Lease) {}),
			dlock.OnRevoked(func(err error) {}),
			dlock.OnNewLeader(func(leader dlock.Holder) {}),
			dlock.PollEvery(time.Second),
		),
	}
	var leading bool = locks.IsMasterLeader() || locks.IsSchedulerLeader()
	lease, err = locks.TryMasterLock(ctx)
	lease, err = locks.AcquireMasterLock(ctx)
	holder, err = locks.MasterLockHolder(ctx)
	lease, err = locks.TryOrderLock(ctx, 42)
	lease, err = locks.AcquireOrderLock(ctx, 42)
	holder, err = locks.OrderLockHolder(ctx, 42)
	lease, err = locks.TrySendSMSLock(ctx, "+1")
	lease, err = locks.AcquireSendSMSLock(ctx, "+1")
	holder, err = locks.SendSMSLockHolder(ctx, "+1")
	lease, err = locks.TryNightlyReportLock(ctx)
	lease, err = locks.AcquireNightlyReportLock(ctx)
	holder, err = locks.NightlyReportLockHolder(ctx)
	lease, err = locks.TryImportLock(ctx)
	lease, err = locks.AcquireImportLock(ctx)
	holder, err = locks.ImportLockHolder(ctx)
	lease, err = locks.TryTenantMigrationLock(ctx, "acme")
	lease, err = locks.AcquireTenantMigrationLock(ctx, "acme")
	holder, err = locks.TenantMigrationLockHolder(ctx, "acme")
	lease, err = locks.TrySchedulerLock(ctx)
	lease, err = locks.AcquireSchedulerLock(ctx)
	holder, err = locks.SchedulerLockHolder(ctx)
	lease, err = locks.TryTenantBackupLock(ctx, "6f9619ff-8b86-d011-b42d-00c04fc964ff")
	lease, err = locks.AcquireTenantBackupLock(ctx, "6f9619ff-8b86-d011-b42d-00c04fc964ff")
	holder, err = locks.TenantBackupLockHolder(ctx, "6f9619ff-8b86-d011-b42d-00c04fc964ff")
	lease, err = locks.TryLedgerLock(ctx, "acct-1")
	lease, err = locks.AcquireLedgerLock(ctx, "acct-1")
	holder, err = locks.LedgerLockHolder(ctx, "acct-1")
	var pruned int64
	pruned, err = locks.PruneOrderLocks(ctx, time.Hour)
	pruned, err = locks.PruneTenantBackupLocks(ctx, time.Hour)
	pruned, err = locks.PruneLedgerLocks(ctx, time.Hour)
	_ = pruned
	holder, err = locks.MasterLeader(ctx)
	holder, err = locks.SchedulerLeader(ctx)
	var remaining time.Duration = holder.Remaining
	_, _, _, _ = names, lease, remaining, leading
	for _, e := range []error{dlock.ErrNotAcquired, dlock.ErrLeaseLost, dlock.ErrReleased, dlock.ErrUnsupported} {
		_ = errors.Is(err, e)
	}
	return errors.Join(append(errs, err)...)
}
`

// findRuntimeModule returns the absolute directory of this repository's
// runtime module, looking up from the working directory.
func findRuntimeModule(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		gomod, err := os.ReadFile(filepath.Join(dir, "runtime", "go.mod"))
		if err == nil {
			mod, err := modulePath(gomod)
			if err == nil && mod == runtimePath {
				return filepath.Join(dir, "runtime")
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			require.NoError(t, err)
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no runtime module (%s) above the working directory", runtimePath)
		dir = parent
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
}
