package generator

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// Names of the job files lockgen writes.
const (
	jobsFile          = "lockgen_jobs.go"
	runsTableBaseName = "runs"
)

// jobModel is one declared job, with every Go name it needs.
type jobModel struct {
	spec.Job
	// NameConst is the exported constant holding the name ("SendSMSJob").
	NameConst string
	// RunVar is the unexported NewRun with the job's defaults ("sendSMSRun").
	RunVar string
	// ArgsType is "<GoName>Args" when the job declares args, else "".
	ArgsType string
	// Enqueue, EnqueueTx and EnqueueMany are the method names; empty for
	// a job that is only scheduled (EnqueueMany also for one without args).
	Enqueue, EnqueueTx, EnqueueMany string
	// CatchUpConst is the runtime constant of a scheduled job's catch-up
	// policy ("CatchUpOne"); empty for a job that is not scheduled.
	CatchUpConst string
}

// catchUpConsts are the runtime constants of the spec's catch-up policies.
var catchUpConsts = map[string]string{
	spec.CatchUpNone: "CatchUpNone",
	spec.CatchUpOne:  "CatchUpOne",
	spec.CatchUpAll:  "CatchUpAll",
}

func resolveJobs(s *spec.Spec) []jobModel {
	var jobs []jobModel
	for _, j := range s.Jobs {
		jm := jobModel{Job: j, NameConst: j.GoName + "Job", RunVar: spec.LowerCamelCase(j.Name) + "Run"}
		if len(j.Args) > 0 {
			jm.ArgsType = j.GoName + "Args"
		}
		if j.Scheduled() {
			jm.CatchUpConst = catchUpConsts[j.CatchUp]
		}
		if j.Enqueueable() {
			m := j.Methods()
			jm.Enqueue, jm.EnqueueTx = m[0], m[1]
			if jm.ArgsType != "" {
				jm.EnqueueMany = m[2]
			}
		}
		jobs = append(jobs, jm)
	}
	return jobs
}

// argGoType is the Go type of a job argument.
func argGoType(a spec.Arg) *jen.Statement {
	switch {
	case a.Import != "":
		return jen.Qual(a.Import, a.GoType)
	case a.GoType == "time.Time":
		return jen.Qual("time", "Time")
	case a.GoType == "time.Duration":
		return jen.Qual("time", "Duration")
	case a.GoType == "[]string":
		return jen.Index().String()
	default:
		return jen.Id(a.GoType)
	}
}

// jobsGo is lockgen_jobs.go: job names, argument types, the JobHandlers
// interface, Enqueue methods and RunJobs.
func jobsGo(m *model) *jen.File {
	f := newFile(m)
	recv := func() *jen.Statement { return jen.Id(m.Receiver).Op("*").Id("Locks") }
	ctx := func() *jen.Statement { return jen.Id("ctx").Qual("context", "Context") }
	opts := func() *jen.Statement { return jen.Id("opts").Op("...").Id("EnqueueOption") }
	client := jen.Id(m.Receiver).Dot("jobs")

	f.Comment("Job names, as stored in the runs table.")
	f.Const().DefsFunc(func(g *jen.Group) {
		for _, j := range m.Jobs {
			g.Comment(fmt.Sprintf("%s is the name of the %s job.", j.NameConst, j.Name))
			g.Id(j.NameConst).Op("=").Lit(j.Name)
		}
	})
	for _, j := range m.Jobs {
		if j.ArgsType == "" {
			continue
		}
		f.Line()
		f.Comment(comment(fmt.Sprintf("%s are the arguments of the %s job, stored as JSON in its runs.", j.ArgsType, j.Name)))
		f.Type().Id(j.ArgsType).StructFunc(func(g *jen.Group) {
			for _, a := range j.Args {
				g.Id(a.GoName).Add(argGoType(a)).Tag(map[string]string{"json": a.Name})
			}
		})
	}
	jobReexports(f, m)

	f.Line()
	f.Comment(comment(fmt.Sprintf("JobHandlers handles the jobs declared in %s, one method per job, so a missing handler is a compile error. "+
		"A method returning nil completes the run; an error or a panic fails the attempt, which is retried with backoff until the job's "+
		"max attempts, then discarded with the error kept. Delivery is at least once (a run whose worker died is run again): "+
		"use run.ID and run.Attempt to make handlers idempotent. ctx is cancelled at the job's timeout.", m.SpecName)))
	f.Type().Id("JobHandlers").InterfaceFunc(func(g *jen.Group) {
		for _, j := range m.Jobs {
			g.Comment(j.handlerDoc())
			params := []jen.Code{ctx(), jen.Id("run").Op("*").Id("Run")}
			if j.ArgsType != "" {
				params = append(params, jen.Id("args").Id(j.ArgsType))
			}
			g.Id(j.GoName).Params(params...).Error()
		}
	})

	f.Line()
	f.Var().DefsFunc(func(g *jen.Group) {
		for _, j := range m.Jobs {
			g.Comment(fmt.Sprintf("%s is a run of %s with its declared defaults.", j.RunVar, j.Name))
			kvs := []kv{{"Job", jen.Id(j.NameConst)}, {"Queue", jen.Lit(j.Queue)}}
			if j.Priority != 0 {
				kvs = append(kvs, kv{"Priority", jen.Lit(j.Priority)})
			}
			kvs = append(kvs, kv{"MaxAttempts", jen.Lit(j.MaxAttempts)}, kv{"Timeout", durationExpr(j.Timeout)})
			g.Id(j.RunVar).Op("=").Add(literal(jb("NewRun"), kvs...))
		}
	})

	for _, j := range m.Jobs {
		if j.Enqueue == "" {
			continue
		}
		var args, argsVal jen.Code = nil, jen.Struct().Values()
		if j.ArgsType != "" {
			args, argsVal = jen.Id("args").Id(j.ArgsType), jen.Id("args")
		}
		params := func(extra ...jen.Code) []jen.Code {
			ps := append([]jen.Code{ctx()}, extra...)
			if args != nil {
				ps = append(ps, args)
			}
			return append(ps, opts())
		}
		f.Line()
		f.Comment(comment(fmt.Sprintf("%s enqueues a run of %s, due now unless an option says otherwise (Delay, RunAt, "+
			"WithPriority, WithUniqueKey, WithMaxAttempts), and returns its ID; with a unique key that an unfinished run "+
			"already has, that run's ID. An error means the run may or may not exist.", j.Enqueue, j.Name)))
		f.Func().Params(recv()).Id(j.Enqueue).Params(params()...).Params(jen.Int64(), jen.Error()).Block(
			jen.Return(jb("EnqueueArgs").Call(jen.Id("ctx"), client.Clone(), jen.Nil(), jen.Id(j.RunVar), argsVal, jen.Id("opts").Op("..."))),
		)
		f.Line()
		f.Comment(comment(fmt.Sprintf("%s is %s in tx: the run exists only if tx commits.", j.EnqueueTx, j.Enqueue)))
		f.Func().Params(recv()).Id(j.EnqueueTx).Params(params(jen.Id("tx").Op("*").Qual("database/sql", "Tx"))...).Params(jen.Int64(), jen.Error()).Block(
			jen.Return(jb("EnqueueArgs").Call(jen.Id("ctx"), client.Clone(), jen.Id("tx"), jen.Id(j.RunVar), argsVal, jen.Id("opts").Op("..."))),
		)
		if j.EnqueueMany == "" {
			continue
		}
		f.Line()
		f.Comment(comment(fmt.Sprintf("%s enqueues one run of %s per element of args, %d per statement, with opts applied to each. "+
			"Every run is checked before any is inserted; an error means later batches may not exist.", j.EnqueueMany, j.Name, jobs.MaxEnqueueBatch)))
		f.Func().Params(recv()).Id(j.EnqueueMany).Params(ctx(), jen.Id("args").Index().Id(j.ArgsType), opts()).Error().Block(
			jen.Return(jb("EnqueueArgsMany").Call(jen.Id("ctx"), client.Clone(), jen.Nil(), jen.Id(j.RunVar), jen.Id("args"), jen.Id("opts").Op("..."))),
		)
	}

	f.Line()
	f.Comment("JobRun reads run id; an error wrapping ErrRunNotFound when there is none (it may have been pruned).")
	f.Func().Params(recv()).Id("JobRun").Params(ctx(), jen.Id("id").Int64()).Params(jen.Id("RunInfo"), jen.Error()).Block(
		jen.Return(client.Clone().Dot("Get").Call(jen.Id("ctx"), jen.Id("id"))),
	)
	f.Line()
	f.Comment("CancelRun cancels run id if it has not started; false when it is running or finished.")
	f.Func().Params(recv()).Id("CancelRun").Params(ctx(), jen.Id("id").Int64()).Params(jen.Bool(), jen.Error()).Block(
		jen.Return(client.Clone().Dot("Cancel").Call(jen.Id("ctx"), jen.Id("id"))),
	)
	f.Line()
	f.Comment(comment("RetryRun restores a discarded or cancelled run: due now, with its attempts counted from zero. False when the run is in another state; " +
		"an error wrapping ErrUniqueKeyTaken when an unfinished run of its job has its unique key."))
	f.Func().Params(recv()).Id("RetryRun").Params(ctx(), jen.Id("id").Int64()).Params(jen.Bool(), jen.Error()).Block(
		jen.Return(client.Clone().Dot("Retry").Call(jen.Id("ctx"), jen.Id("id"))),
	)

	f.Line()
	f.Comment(comment("WorkerOption tunes the workers of RunJobs: it changes the WorkerConfig every queue's worker starts from " +
		"(RunJobs sets Queue, Handlers and Concurrency per queue)."))
	f.Type().Id("WorkerOption").Op("=").Add(jb("WorkerOption"))

	f.Line()
	f.Comment(comment("RunJobs runs this node's share of the jobs until ctx ends: a worker per queue claiming due runs " +
		"(FOR UPDATE SKIP LOCKED, in batches), the scheduler (every node inserts each tick; a unique key makes it one run cluster-wide), " +
		"and pruning of finished runs after each job's retention. When ctx ends it stops claiming, lets running handlers finish for up to " +
		"the workers' ShutdownGrace (default " + spec.FormatDuration(jobs.DefaultShutdownGrace) + "), cancels the rest and returns nil. Database errors are logged and retried, never fatal; it fails at once with an error " +
		"wrapping ErrInvalid for a nil h. Run it on every node; opts tune the workers (see WorkerOption)."))
	f.Func().Params(recv()).Id("RunJobs").Params(ctx(), jen.Id("h").Id("JobHandlers"), jen.Id("opts").Op("...").Id("WorkerOption")).Error().BlockFunc(func(g *jen.Group) {
		g.If(jen.Id("h").Op("==").Nil()).Block(
			jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: nil JobHandlers"), rt("ErrInvalid"))),
		)
		// Fields in the order the runtime declares them; map entries in
		// spec order (jen.Dict would sort both).
		var queues, handlers, retention []jen.Code
		for _, q := range m.Queues {
			queues = append(queues, values(kv{"Name", jen.Lit(q.Name)}, kv{"Concurrency", jen.Lit(q.Concurrency)}))
		}
		for _, j := range m.Jobs {
			var handle jen.Code = jen.Id("h").Dot(j.GoName)
			if j.ArgsType != "" {
				handle = jb("HandleArgs").Call(jen.Id("h").Dot(j.GoName))
			}
			handlers = append(handlers, jen.Id(j.NameConst).Op(":").Add(values(
				kv{"Queue", jen.Lit(j.Queue)},
				kv{"JobHandler", literal(jb("JobHandler"), j.handlerFields(handle)...)},
			)))
			retention = append(retention, values(kv{"Job", jen.Id(j.NameConst)}, kv{"Keep", durationExpr(j.Retention)}))
		}
		g.Id("cfg").Op(":=").Add(literal(jb("NodeConfig"),
			kv{"Queues", jen.Index().Add(jb("QueueConfig")).Add(list(queues))},
			kv{"Handlers", jen.Map(jen.String()).Add(jb("QueuedHandler")).Add(list(handlers))},
			kv{"Retention", jen.Index().Add(jb("Retention")).Add(list(retention))},
		))
		for _, j := range m.Jobs {
			if !j.Scheduled() {
				continue
			}
			sched := spec.LowerCamelCase(j.Name) + "Schedule"
			g.List(jen.Id(sched), jen.Err()).Op(":=").Add(jb("ParseSchedule")).Call(jen.Lit(j.Schedule), jen.Lit(j.Timezone))
			g.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err()))
			kvs := []kv{{"Name", jen.Id(j.NameConst)}, {"Queue", jen.Lit(j.Queue)}, {"Schedule", jen.Id(sched)}, {"CatchUp", jb(j.CatchUpConst)}}
			if j.MinInterval != 0 {
				kvs = append(kvs, kv{"MinInterval", durationExpr(j.MinInterval)})
			}
			if j.Priority != 0 {
				kvs = append(kvs, kv{"Priority", jen.Lit(j.Priority)})
			}
			kvs = append(kvs, kv{"MaxAttempts", jen.Lit(j.MaxAttempts)}, kv{"Timeout", durationExpr(j.Timeout)})
			g.Id("cfg").Dot("Scheduled").Op("=").Append(jen.Id("cfg").Dot("Scheduled"), literal(jb("ScheduledJob"), kvs...))
		}
		g.For(jen.List(jen.Id("_"), jen.Id("opt")).Op(":=").Range().Id("opts")).Block(
			jen.Id("opt").Call(jen.Op("&").Id("cfg").Dot("Worker")),
		)
		g.Return(client.Clone().Dot("RunNode").Call(jen.Id("ctx"), jen.Id("cfg")))
	})
	return f
}

// handlerFields are the jobs.JobHandler fields of j.
func (j jobModel) handlerFields(handle jen.Code) []kv {
	kvs := []kv{{"Handle", handle}, {"BackoffInitial", durationExpr(j.BackoffInitial)}, {"BackoffMax", durationExpr(j.BackoffMax)}}
	if j.Concurrency == 1 {
		kvs = append(kvs, kv{"Singleton", jen.True()})
	}
	return kvs
}

// handlerDoc documents the handler method of j.
func (j jobModel) handlerDoc() string {
	var what []string
	if j.Scheduled() {
		what = append(what, fmt.Sprintf("scheduled %q in %s", j.Schedule, j.Timezone))
	}
	if j.Enqueue != "" {
		what = append(what, "enqueued with "+j.Enqueue)
	}
	attempts := fmt.Sprintf("%d attempts", j.MaxAttempts)
	if j.MaxAttempts == 1 {
		attempts = "1 attempt"
	}
	doc := fmt.Sprintf("%s handles a run of %s (%s; timeout %s, %s).", j.GoName, j.Name, strings.Join(what, ", "),
		spec.FormatDuration(j.Timeout), attempts)
	if j.Scheduled() && j.ArgsType != "" {
		doc += " Scheduled runs get zero args."
	}
	if j.Concurrency == 1 {
		doc += " It is a cluster-wide singleton: one run at a time, holding the lock lockgen_job:" + j.Name + "."
	}
	return doc
}

// jobsGlue adds the driver.JobStore methods of Store.
func jobsGlue(f *jen.File, m *model) {
	db := func(name string) *jen.Statement { return jen.Qual(m.DBImport, name) }
	ctx := func() *jen.Statement { return jen.Id("ctx").Qual("context", "Context") }
	recv := func() *jen.Statement { return jen.Id("s").Id("Store") }
	q := func() *jen.Statement { return jen.Id("s").Dot("q") }
	dur := func() *jen.Statement { return jen.Qual("time", "Duration") }
	nullString := func(v jen.Code) *jen.Statement {
		return jen.Qual("database/sql", "NullString").Values(jen.Dict{jen.Id("String"): v, jen.Id("Valid"): jen.Add(v).Op("!=").Lit("")})
	}
	nullTime := func(v *jen.Statement) *jen.Statement {
		return jen.Qual("database/sql", "NullTime").Values(jen.Dict{jen.Id("Time"): v.Clone(), jen.Id("Valid"): jen.Op("!").Add(v.Clone()).Dot("IsZero").Call()})
	}
	runFields := func(r string) []kv {
		x := func(f string) *jen.Statement { return jen.Id(r).Dot(f) }
		return []kv{
			{"ID", x("ID")}, {"Job", x("Job")}, {"Queue", x("Queue")}, {"Priority", jen.Int().Call(x("Priority"))},
			{"Args", jen.Index().Byte().Call(x("Args"))}, {"Attempt", jen.Int().Call(x("Attempt"))}, {"MaxAttempts", jen.Int().Call(x("MaxAttempts"))},
			{"Timeout", dur().Call(x("TimeoutUs")).Op("*").Qual("time", "Microsecond")},
			{"ScheduledAt", x("ScheduledAt").Dot("Time")}, {"RunAt", x("RunAt")}, {"CreatedAt", x("CreatedAt")}, {"Claim", x("Claim")},
		}
	}
	method := func(doc, name string, params []jen.Code, results []jen.Code, body ...jen.Code) {
		f.Line()
		f.Comment(doc)
		f.Func().Params(recv()).Id(name).Params(params...).Params(results...).Block(body...)
	}
	claims := func() *jen.Statement { return jen.Id("claims").Index().Add(dr("Claim")) }

	r := func(fld string) *jen.Statement { return jen.Id("r").Dot(fld) }
	method("// RunInsert implements driver.JobStore.", "RunInsert",
		[]jen.Code{ctx(), jen.Id("tx").Op("*").Qual("database/sql", "Tx"), jen.Id("r").Add(dr("NewRun"))},
		[]jen.Code{jen.Int64(), jen.Error()},
		jen.Id("qs").Op(":=").Add(q()),
		jen.If(jen.Id("tx").Op("!=").Nil()).Block(jen.Id("qs").Op("=").Id("qs").Dot("WithTx").Call(jen.Id("tx"))),
		jen.List(jen.Id("res"), jen.Err()).Op(":=").Id("qs").Dot("RunInsert").Call(jen.Id("ctx"), literal(db("RunInsertParams"),
			kv{"Job", r("Job")}, kv{"Queue", r("Queue")}, kv{"Priority", jen.Int32().Call(r("Priority"))}, kv{"DelayUs", r("Delay").Dot("Microseconds").Call()},
			kv{"ScheduledAt", nullTime(r("ScheduledAt"))}, kv{"Args", jen.String().Call(r("Args"))}, kv{"MaxAttempts", jen.Int32().Call(r("MaxAttempts"))},
			kv{"TimeoutUs", r("Timeout").Dot("Microseconds").Call()}, kv{"UniqueKey", nullString(r("UniqueKey"))},
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Err())),
		jen.Return(jen.Id("res").Dot("LastInsertId").Call()),
	)
	method("// RunInsertMany implements driver.JobStore: the multi-row RunInsert, prepared.", "RunInsertMany",
		[]jen.Code{ctx(), jen.Id("tx").Op("*").Qual("database/sql", "Tx"), jen.Id("runs").Index().Add(dr("NewRun"))},
		[]jen.Code{jen.Error()},
		jen.Return(jen.Id("s").Dot("inserts").Dot("Exec").Call(jen.Id("ctx"), jen.Id("tx"), jen.Id("runs"))),
	)
	method("// RunsClaim implements driver.JobStore: lock, read and mark the runs in one transaction.", "RunsClaim",
		[]jen.Code{ctx(), jen.List(jen.Id("queue"), jen.Id("worker")).String(), jen.Id("limit").Int(), jen.Id("lease").Add(dur())},
		[]jen.Code{jen.Index().Add(dr("Run")), jen.Error()},
		jen.Var().Id("runs").Index().Add(dr("Run")),
		jen.Err().Op(":=").Add(dr("InTx")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Func().Params(jen.Id("tx").Op("*").Qual("database/sql", "Tx")).Error().Block(
			jen.Id("qt").Op(":=").Add(q()).Dot("WithTx").Call(jen.Id("tx")),
			jen.List(jen.Id("rows"), jen.Err()).Op(":=").Id("qt").Dot("RunsClaimable").Call(jen.Id("ctx"), literal(db("RunsClaimableParams"),
				kv{"Queue", jen.Id("queue")}, kv{"Limit", jen.Int32().Call(jen.Id("limit"))})),
			jen.If(jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("rows")).Op("==").Lit(0)).Block(jen.Return(jen.Err())),
			jen.Id("ids").Op(":=").Make(jen.Index().Int64(), jen.Len(jen.Id("rows"))),
			jen.For(jen.List(jen.Id("i"), jen.Id("r")).Op(":=").Range().Id("rows")).Block(jen.Id("ids").Index(jen.Id("i")).Op("=").Id("r").Dot("ID")),
			jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("qt").Dot("RunsMarkRunning").Call(jen.Id("ctx"), literal(db("RunsMarkRunningParams"),
				kv{"Worker", jen.Id("worker")}, kv{"LeaseUs", jen.Id("lease").Dot("Microseconds").Call()}, kv{"Ids", jen.Id("ids")})),
			jen.If(jen.Err().Op("==").Nil()).Block(jen.Err().Op("=").Add(dr("CheckClaimed")).Call(jen.Id("n"), jen.Len(jen.Id("ids")))),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
			jen.Comment("The rows are locked: the claim made them the next attempt and claim."),
			jen.For(jen.List(jen.Id("_"), jen.Id("r")).Op(":=").Range().Id("rows")).Block(
				jen.Id("r").Dot("Attempt").Op("++"),
				jen.Id("r").Dot("Claim").Op("++"),
				jen.Id("runs").Op("=").Append(jen.Id("runs"), literal(dr("Run"), runFields("r")...)),
			),
			jen.Return(jen.Nil()),
		)),
		jen.Return(jen.Id("runs"), jen.Err()),
	)
	claimArgs := jen.List(jen.Id("ids"), jen.Id("refs")).Op(":=").Id("claimArgs").Call(jen.Id("claims"))
	method("// RunsHeartbeat implements driver.JobStore.", "RunsHeartbeat",
		[]jen.Code{ctx(), claims(), jen.Id("lease").Add(dur())}, []jen.Code{jen.Int64(), jen.Error()},
		claimArgs.Clone(),
		jen.Return(q().Dot("RunsHeartbeat").Call(jen.Id("ctx"), literal(db("RunsHeartbeatParams"),
			kv{"LeaseUs", jen.Id("lease").Dot("Microseconds").Call()}, kv{"Ids", jen.Id("ids")}, kv{"ClaimRefs", jen.Id("refs")}))),
	)
	method("// RunsComplete implements driver.JobStore.", "RunsComplete",
		[]jen.Code{ctx(), claims()}, []jen.Code{jen.Int64(), jen.Error()},
		claimArgs.Clone(),
		jen.Return(q().Dot("RunsComplete").Call(jen.Id("ctx"), literal(db("RunsCompleteParams"), kv{"Ids", jen.Id("ids")}, kv{"ClaimRefs", jen.Id("refs")}))),
	)
	method("// RunFail implements driver.JobStore.", "RunFail",
		[]jen.Code{ctx(), jen.Id("c").Add(dr("Claim")), jen.Id("errText").String(), jen.Id("backoff").Add(dur())}, []jen.Code{jen.Bool(), jen.Error()},
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q()).Dot("RunFail").Call(jen.Id("ctx"), literal(db("RunFailParams"),
			kv{"BackoffUs", jen.Id("backoff").Dot("Microseconds").Call()}, kv{"LastError", nullString(jen.Id("errText"))},
			kv{"ID", jen.Id("c").Dot("ID")}, kv{"Claim", jen.Id("c").Dot("Claim")})),
		jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
	)
	method("// RunSnooze implements driver.JobStore.", "RunSnooze",
		[]jen.Code{ctx(), jen.Id("c").Add(dr("Claim")), jen.Id("delay").Add(dur())}, []jen.Code{jen.Bool(), jen.Error()},
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q()).Dot("RunSnooze").Call(jen.Id("ctx"), literal(db("RunSnoozeParams"),
			kv{"DelayUs", jen.Id("delay").Dot("Microseconds").Call()}, kv{"ID", jen.Id("c").Dot("ID")}, kv{"Claim", jen.Id("c").Dot("Claim")})),
		jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
	)
	method("// RunsRescue implements driver.JobStore: read the runs past their deadline\n// without locking, then rescue them by primary key.", "RunsRescue",
		[]jen.Code{ctx(), jen.Id("limit").Int()}, []jen.Code{jen.Int64(), jen.Error()},
		jen.List(jen.Id("ids"), jen.Err()).Op(":=").Add(q()).Dot("RunsRescuable").Call(jen.Id("ctx"), jen.Int32().Call(jen.Id("limit"))),
		jen.If(jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("ids")).Op("==").Lit(0)).Block(jen.Return(jen.Lit(0), jen.Err())),
		jen.Return(q().Dot("RunsRescue").Call(jen.Id("ctx"), jen.Id("ids"))),
	)
	method("// RunsPrune implements driver.JobStore.", "RunsPrune",
		[]jen.Code{ctx(), jen.Id("job").String(), jen.Id("keep").Qual("time", "Time"), jen.Id("olderThan").Add(dur()), jen.Id("limit").Int()}, []jen.Code{jen.Int64(), jen.Error()},
		jen.Return(q().Dot("RunsPrune").Call(jen.Id("ctx"), literal(db("RunsPruneParams"),
			kv{"Job", jen.Id("job")}, kv{"KeepTick", nullTime(jen.Id("keep"))}, kv{"OlderThanUs", jen.Id("olderThan").Dot("Microseconds").Call()},
			kv{"Limit", jen.Int32().Call(jen.Id("limit"))}))),
	)
	for _, name := range []string{"RunCancel", "RunRetry"} {
		method("// "+name+" implements driver.JobStore.", name,
			[]jen.Code{ctx(), jen.Id("id").Int64()}, []jen.Code{jen.Bool(), jen.Error()},
			jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q()).Dot(name).Call(jen.Id("ctx"), jen.Id("id")),
			jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
		)
	}
	method("// RunGet implements driver.JobStore.", "RunGet",
		[]jen.Code{ctx(), jen.Id("id").Int64()}, []jen.Code{dr("RunInfo"), jen.Bool(), jen.Error()},
		jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(q()).Dot("RunGet").Call(jen.Id("ctx"), jen.Id("id")),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(jen.Return(dr("RunInfo").Values(), jen.False(), jen.Nil())),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(dr("RunInfo").Values(), jen.False(), jen.Err())),
		jen.Return(literal(dr("RunInfo"),
			kv{"Run", literal(dr("Run"), runFields("r")...)},
			kv{"State", dr("RunState").Call(r("State"))}, kv{"Worker", r("Worker")}, kv{"LastError", r("LastError").Dot("String")},
			kv{"Deadline", r("Deadline").Dot("Time")}, kv{"FinishedAt", r("FinishedAt").Dot("Time")}, kv{"UniqueKey", r("UniqueKey").Dot("String")},
		), jen.True(), jen.Nil()),
	)
	method("// RunLastTick implements driver.JobStore.", "RunLastTick",
		[]jen.Code{ctx(), jen.Id("job").String()}, []jen.Code{jen.Qual("time", "Time"), jen.Bool(), jen.Error()},
		jen.List(jen.Id("t"), jen.Err()).Op(":=").Add(q()).Dot("RunLastTick").Call(jen.Id("ctx"), jen.Id("job")),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(jen.Return(jen.Qual("time", "Time").Values(), jen.False(), jen.Nil())),
		jen.Return(jen.Id("t").Dot("Time"), jen.Err().Op("==").Nil().Op("&&").Id("t").Dot("Valid"), jen.Err()),
	)
	method("// RunInsertSkipped implements driver.JobStore.", "RunInsertSkipped",
		[]jen.Code{ctx(), jen.List(jen.Id("job"), jen.Id("queue")).String(), jen.Id("tick").Qual("time", "Time"), jen.Id("reason").String()}, []jen.Code{jen.Error()},
		jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(q()).Dot("RunInsertSkipped").Call(jen.Id("ctx"), literal(db("RunInsertSkippedParams"),
			kv{"Job", jen.Id("job")}, kv{"Queue", jen.Id("queue")}, kv{"ScheduledAt", nullTime(jen.Id("tick"))}, kv{"Reason", nullString(jen.Id("reason"))})),
		jen.Return(jen.Err()),
	)
	f.Line()
	f.Comment("claimArgs splits claims into the ids and claim_ref values of the batched run statements.")
	f.Func().Id("claimArgs").Params(claims()).Params(jen.Index().Int64(), jen.Index().Qual("database/sql", "NullString")).Block(
		jen.Id("ids").Op(":=").Make(jen.Index().Int64(), jen.Len(jen.Id("claims"))),
		jen.Id("refs").Op(":=").Make(jen.Index().Qual("database/sql", "NullString"), jen.Len(jen.Id("claims"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("c")).Op(":=").Range().Id("claims")).Block(
			jen.List(jen.Id("ids").Index(jen.Id("i")), jen.Id("refs").Index(jen.Id("i"))).Op("=").List(
				jen.Id("c").Dot("ID"), jen.Qual("database/sql", "NullString").Values(jen.Dict{jen.Id("String"): jen.Id("c").Dot("ClaimRef").Call(), jen.Id("Valid"): jen.True()})),
		),
		jen.Return(jen.Id("ids"), jen.Id("refs")),
	)
}
