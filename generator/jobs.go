package generator

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/internal/prose"
	"github.com/lockgen/lockgen/runtime/jobs"
)

// Names of the job files lockgen writes.
const (
	jobsFile            = "lockgen_jobs.go"
	runsTableBaseName   = "runs"
	queuesTableBaseName = "queues"
)

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
		"use run.ID and run.Attempt to make handlers idempotent. ctx is cancelled at the job's timeout."+m.externalJobsDoc(), m.SpecName)))
	f.Type().Id("JobHandlers").InterfaceFunc(func(g *jen.Group) {
		for _, j := range m.Jobs {
			if j.External {
				continue // handled over HTTP
			}
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
		argsType := jen.Struct()
		if j.ArgsType != "" {
			argsType = jen.Id(j.ArgsType)
		}
		f.Line()
		f.Comment(comment(fmt.Sprintf("%sKind is %s typed by its arguments, with its queue and the tables' prefix: for helpers "+
			"that take a job and its arguments checked together, such as lockgentest.RequireEnqueued "+
			"(github.com/lockgen/lockgen/runtime/lockgentest).", j.GoName, j.Name)))
		f.Var().Id(j.GoName + "Kind").Op("=").Add(jb("Kind").Types(argsType)).Values(jen.Dict{
			jen.Id("Name"): jen.Id(j.NameConst), jen.Id("Queue"): jen.Lit(j.Queue), jen.Id("TablePrefix"): jen.Lit(m.TablePrefix),
		})
	}

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
		f.Comment(comment(fmt.Sprintf("%s is %s in tx: the run exists only if tx commits. A nil tx is an error wrapping ErrInvalid "+
			"(use %s outside a transaction).", j.EnqueueTx, j.Enqueue, j.Enqueue)))
		f.Func().Params(recv()).Id(j.EnqueueTx).Params(params(jen.Id("tx").Op("*").Qual("database/sql", "Tx"))...).Params(jen.Int64(), jen.Error()).Block(
			// Not an enqueue outside any transaction: the caller meant the
			// run to exist only if its transaction commits.
			jen.If(jen.Id("tx").Op("==").Nil()).Block(
				jen.Return(jen.Lit(0), jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: "+j.EnqueueTx+" needs a transaction (nil tx); use "+j.Enqueue+" outside one"), rt("ErrInvalid"))),
			),
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
	f.Comment("CancelRun cancels run id if it is due or running (its handler's context is cancelled at the next heartbeat); false when it has finished.")
	f.Func().Params(recv()).Id("CancelRun").Params(ctx(), jen.Id("id").Int64()).Params(jen.Bool(), jen.Error()).Block(
		jen.Return(client.Clone().Dot("Cancel").Call(jen.Id("ctx"), jen.Id("id"))),
	)
	f.Line()
	f.Comment(comment("RetryRun restores a discarded, orphaned or cancelled run: due now, with its attempts counted from zero. False when the run is in another state; " +
		"an error wrapping ErrUniqueKeyTaken when an unfinished run of its job has its unique key. " +
		"An orphaned run's last attempt may still have succeeded: once the run is retried, a late outcome of that attempt matches nothing, " +
		"so retrying it before its worker can no longer report may run a success twice."))
	f.Func().Params(recv()).Id("RetryRun").Params(ctx(), jen.Id("id").Int64()).Params(jen.Bool(), jen.Error()).Block(
		jen.Return(client.Clone().Dot("Retry").Call(jen.Id("ctx"), jen.Id("id"))),
	)

	f.Line()
	f.Comment(comment("PauseQueue pauses queue for every node: once it returns nil, claims this node's workers send take none of its runs, " +
		"nor do those of every other node from one idle poll (the workers' PollMax, default 2s) after it (a claim already under way may still take runs). Running runs finish and their outcomes are recorded; " +
		"enqueues go on, and the pause is kept in the database until ResumeQueue. " +
		"An error wrapping ErrInvalid for a queue that no declared job uses (they use " + prose.And(quoted(m.jobQueues())) + ")."))
	f.Func().Params(recv()).Id("PauseQueue").Params(ctx(), jen.Id("queue").String()).Error().Block(
		jen.Return(client.Clone().Dot("PauseQueue").Call(jen.Id("ctx"), jen.Id("queue"))),
	)
	f.Line()
	f.Comment(comment("ResumeQueue lifts queue's pause: this node's workers claim its runs again at once, every other node's within one idle poll. " +
		"Its errors are PauseQueue's."))
	f.Func().Params(recv()).Id("ResumeQueue").Params(ctx(), jen.Id("queue").String()).Error().Block(
		jen.Return(client.Clone().Dot("ResumeQueue").Call(jen.Id("ctx"), jen.Id("queue"))),
	)
	f.Line()
	f.Comment(comment("Queues lists, in name order, the declared jobs' queues and any other queue that has runs or was ever paused, " +
		"each with whether it is paused and since when."))
	f.Func().Params(recv()).Id("Queues").Params(ctx()).Params(jen.Index().Id("QueueInfo"), jen.Error()).Block(
		jen.Return(client.Clone().Dot("Queues").Call(jen.Id("ctx"))),
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
		var queues, external, handlers, retention []jen.Code
		for _, q := range m.Queues {
			if q.External {
				external = append(external, jen.Lit(q.Name))
				continue
			}
			queues = append(queues, values(kv{"Name", jen.Lit(q.Name)}, kv{"Concurrency", jen.Lit(q.Concurrency)}))
		}
		for _, j := range m.Jobs {
			retention = append(retention, values(kv{"Job", jen.Id(j.NameConst)}, kv{"Keep", durationExpr(j.Retention)}))
			if j.External {
				continue
			}
			var handle jen.Code = jen.Id("h").Dot(j.GoName)
			if j.ArgsType != "" {
				handle = jb("HandleArgs").Call(jen.Id("h").Dot(j.GoName))
			}
			handlers = append(handlers, jen.Id(j.NameConst).Op(":").Add(values(
				kv{"Queue", jen.Lit(j.Queue)},
				kv{"JobHandler", literal(jb("JobHandler"), j.handlerFields(handle)...)},
			)))
		}
		fields := []kv{
			{"Queues", jen.Index().Add(jb("QueueConfig")).Add(list(queues))},
			{"Handlers", jen.Map(jen.String()).Add(jb("QueuedHandler")).Add(list(handlers))},
		}
		if len(external) > 0 {
			fields = append(fields, kv{"External", jen.Index().String().Add(list(external))})
		}
		fields = append(fields, kv{"Retention", jen.Index().Add(jb("Retention")).Add(list(retention))})
		g.Id("cfg").Op(":=").Add(literal(jb("NodeConfig"), fields...))
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

// externalJobsDoc tells JobHandlers' readers which jobs it leaves out.
func (m *model) externalJobsDoc() string {
	var names []string
	for _, j := range m.Jobs {
		if j.External {
			names = append(names, j.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " The jobs of external queues (" + prose.And(names) + ") have no method: consumers of the HTTP API handle them."
}
