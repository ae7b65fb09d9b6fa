package generator

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/runtime/jobs"
)

// The generated package re-exports, as aliases, the runtime names its
// callers use, so that an application imports only its generated package
// for ordinary use. Each list says when the package needs the names; the
// doc of each is one line, its runtime name the link to the details.

// reexport is one runtime name the generated package re-exports.
type reexport struct {
	name string
	doc  string
	// job: the name is the jobs package's, not the runtime's.
	job bool
}

// ref refers to the re-exported name.
func (r reexport) ref() *jen.Statement {
	if r.job {
		return jb(r.name)
	}
	return rt(r.name)
}

// errorReexports are the sentinel errors callers test with errors.Is: the
// runtime's own values, so errors.Is matches either name.
func (m *model) errorReexports() []reexport {
	errs := []reexport{
		{"ErrInvalid", "ErrInvalid reports a misuse: a nil argument, an invalid key, owner or option.", false},
		{"ErrUnsupported", "ErrUnsupported reports a server lockgen cannot run on safely.", false},
		{"ErrLeaseLost", "ErrLeaseLost is the cause of a holder's context when its lease ended before it was released.", false},
	}
	if len(m.Locks) > 0 {
		errs = append(errs,
			reexport{"ErrNotAcquired", "ErrNotAcquired means another holder had the lock for as long as the caller waited.", false},
			reexport{"ErrReleased", "ErrReleased is the cause of a lease's context after Release, and the error of a second Release.", false},
		)
	}
	if len(m.Jobs) > 0 {
		errs = append(errs,
			reexport{"ErrRunNotFound", "ErrRunNotFound means no run has the ID (it may have been pruned).", true},
			reexport{"ErrUniqueKeyTaken", "ErrUniqueKeyTaken means RetryRun found an unfinished run of the job with the same unique key.", true},
		)
	}
	return errs
}

// lockTypeReexports are the types the lock methods take and return.
var lockTypeReexports = []reexport{
	{"Lease", "Lease is one holding of a lock: its fencing token (Token), its context (Context), Guard and Release.", false},
	{"Holder", "Holder is who holds a lock, as the database sees it when the Holder and Leader methods read it.", false},
}

// leaderOptionReexports are the options of the RunAs methods, all of
// type LeaderOption; the runtime's functions document them.
var leaderOptionReexports = []reexport{
	{"OnElected", "OnElected calls f each time this node is elected, before fn runs.", false},
	{"OnRevoked", "OnRevoked calls f each time a term ends, with fn's error joined with the release's.", false},
	{"OnNewLeader", "OnNewLeader calls f, while campaigning, each time another holder is seen leading.", false},
	{"PollEvery", "PollEvery sets the longest pause between two campaign attempts of a follower.", false},
}

// jobTypeReexports are the types of handlers, JobRun and RunJobs.
var jobTypeReexports = []reexport{
	{"Run", "Run is the attempt of a run a handler is given: its ID, Attempt and MaxAttempts, times and Claim.", true},
	{"RunInfo", "RunInfo is a run as JobRun reads it: the Run, its State, Worker, LastError and times.", true},
	{"RunState", "RunState is the state of a run: one of the Run* constants.", true},
	{"QueueInfo", "QueueInfo is a queue as Queues lists it: its Name, whether it is Paused, and Since when.", true},
	{"WorkerConfig", "WorkerConfig tunes the worker of a queue; RunJobs takes changes to it as WorkerOptions.", true},
}

// runStateReexports are the states of RunInfo.State.
var runStateReexports = []reexport{
	{"RunAvailable", "RunAvailable is a run waiting to be due or claimed.", true},
	{"RunRunning", "RunRunning is a run a worker has claimed.", true},
	{"RunCompleted", "RunCompleted is a run whose handler returned nil.", true},
	{"RunDiscarded", "RunDiscarded is a run that failed its last attempt.", true},
	{"RunCancelled", "RunCancelled is a run cancelled before it started.", true},
	{"RunSkipped", "RunSkipped records a scheduled tick that was not run (catch-up policy or min_interval).", true},
	{"RunOrphaned", "RunOrphaned is a run whose worker stopped heartbeating during its last attempt: its outcome is unknown, a late one is still recorded, and only RetryRun runs it again.", true},
}

// enqueueOptionReexports are the options of the Enqueue methods, all of
// type EnqueueOption.
var enqueueOptionReexports = []reexport{
	{"Delay", "Delay makes the run due d after the database clock's now.", true},
	{"RunAt", "RunAt makes the run due at t, by the client's clock (at once for a past t).", true},
	{"WithPriority", fmt.Sprintf("WithPriority sets the run's priority, %d to %d; higher runs first.", -jobs.MaxPriority, jobs.MaxPriority), true},
	{"WithMaxAttempts", "WithMaxAttempts overrides the job's declared max attempts.", true},
	{"WithUniqueKey", "WithUniqueKey makes the enqueue return the unfinished run of the job with key, if there is one.", true},
}

// hasLeader reports whether any lock declares leader: true.
func (m *model) hasLeader() bool {
	for _, lk := range m.Locks {
		if lk.Leader != nil {
			return true
		}
	}
	return false
}

// hasEnqueue reports whether any job can be enqueued.
func (m *model) hasEnqueue() bool {
	for _, j := range m.Jobs {
		if j.Enqueue != "" {
			return true
		}
	}
	return false
}

// typeAliases adds type name = runtime.name for each of rs.
func typeAliases(f *jen.File, rs []reexport) {
	for _, r := range rs {
		f.Line()
		f.Comment(comment(r.doc))
		f.Type().Id(r.name).Op("=").Add(r.ref())
	}
}

// lockReexports adds to lockgen.go the errors of every package and the
// lock and leader names of a package with locks.
func lockReexports(f *jen.File, m *model) {
	f.Comment("Errors, to test with errors.Is. They are the runtime's own values.")
	f.Var().DefsFunc(func(g *jen.Group) {
		for _, r := range m.errorReexports() {
			g.Comment(comment(r.doc))
			g.Id(r.name).Op("=").Add(r.ref())
		}
	})
	if len(m.Locks) > 0 {
		typeAliases(f, lockTypeReexports)
	}
	if !m.hasLeader() {
		return
	}
	typeAliases(f, []reexport{{"LeaderOption", "LeaderOption configures a RunAs method: OnElected, OnRevoked, OnNewLeader, PollEvery.", false}})
	params := map[string]param{
		"OnElected":   {"f", jen.Func().Params(jen.Id("lease").Op("*").Id("Lease"))},
		"OnRevoked":   {"f", jen.Func().Params(jen.Id("err").Error())},
		"OnNewLeader": {"f", jen.Func().Params(jen.Id("leader").Id("Holder"))},
		"PollEvery":   {"d", jen.Qual("time", "Duration")},
	}
	for _, r := range leaderOptionReexports {
		forward(f, r, params[r.name], "LeaderOption")
	}
}

// jobReexports adds to lockgen_jobs.go the names of handlers, runs and,
// when a job can be enqueued, the enqueue options.
func jobReexports(f *jen.File, m *model) {
	typeAliases(f, jobTypeReexports)
	f.Line()
	f.Comment("Run states, the values of RunInfo.State.")
	f.Const().DefsFunc(func(g *jen.Group) {
		for _, r := range runStateReexports {
			g.Comment(comment(r.doc))
			g.Id(r.name).Op("=").Add(r.ref())
		}
	})
	if !m.hasEnqueue() {
		return
	}
	typeAliases(f, []reexport{{"EnqueueOption", "EnqueueOption changes one enqueued run: Delay, RunAt, WithPriority, WithMaxAttempts, WithUniqueKey.", true}})
	params := map[string]param{
		"Delay":           {"d", jen.Qual("time", "Duration")},
		"RunAt":           {"t", jen.Qual("time", "Time")},
		"WithPriority":    {"p", jen.Int()},
		"WithMaxAttempts": {"n", jen.Int()},
		"WithUniqueKey":   {"key", jen.String()},
	}
	for _, r := range enqueueOptionReexports {
		forward(f, r, params[r.name], "EnqueueOption")
	}
}

// param is the one parameter of a forwarded function.
type param struct {
	name string
	typ  *jen.Statement
}

// forward adds func name(p) result { return runtime.name(p) }: a function
// rather than a variable, so that go doc shows its signature.
func forward(f *jen.File, r reexport, p param, result string) {
	f.Line()
	f.Comment(comment(r.doc))
	f.Func().Id(r.name).Params(jen.Id(p.name).Add(p.typ)).Id(result).Block(jen.Return(r.ref().Call(jen.Id(p.name))))
}
