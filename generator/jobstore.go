package generator

import "github.com/dave/jennifer/jen"

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
			{"Headers", x("Headers")},
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
			kv{"Headers", r("Headers")},
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
		[]jen.Code{ctx(), jen.List(jen.Id("queue"), jen.Id("worker")).String(), jen.Id("limit").Int(), jen.Id("lease").Add(dur()), jen.Id("after").Op("*").Add(dr("RunCursor"))},
		[]jen.Code{jen.Index().Add(dr("Run")), jen.Error()},
		jen.Var().Id("runs").Index().Add(dr("Run")),
		jen.List(jen.Id("afterPriority"), jen.Id("afterRunAt"), jen.Id("afterID")).Op(":=").Add(dr("CursorArgs")).Call(jen.Id("after")),
		jen.Err().Op(":=").Add(dr("InTx")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Func().Params(jen.Id("conn").Op("*").Qual("database/sql", "Conn")).Error().Block(
			jen.Id("qt").Op(":=").Id("New").Call(jen.Id("conn")),
			jen.List(jen.Id("rows"), jen.Err()).Op(":=").Id("qt").Dot("RunsClaimable").Call(jen.Id("ctx"), literal(db("RunsClaimableParams"),
				kv{"Queue", jen.Id("queue")}, kv{"AfterPriority", jen.Id("afterPriority")}, kv{"AfterRunAt", jen.Id("afterRunAt")},
				kv{"AfterID", jen.Id("afterID")}, kv{"Limit", jen.Int32().Call(jen.Id("limit"))})),
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
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Comment("The commit may not have landed: report no runs."),
			jen.Return(jen.Nil(), jen.Err()),
		),
		jen.Return(jen.Id("runs"), jen.Nil()),
	)
	claimArgs := jen.List(jen.Id("ids"), jen.Id("refs")).Op(":=").Id("claimArgs").Call(jen.Id("claims"))
	// rowOf is the driver.HeartbeatRow of a peeked or locked row r.
	rowOf := func() *jen.Statement {
		return dr("RowOf").Call(jen.Id("r").Dot("ID"), jen.Id("r").Dot("Claim"), jen.Id("r").Dot("State"))
	}
	method("// RunsHeartbeat implements driver.JobStore: read the runs, lock those\n// still running with the claims that no other transaction holds, then\n// extend them, in one transaction.", "RunsHeartbeat",
		[]jen.Code{ctx(), claims(), jen.Id("lease").Add(dur())}, []jen.Code{dr("Heartbeat"), jen.Error()},
		jen.Var().Id("hb").Add(dr("Heartbeat")),
		jen.Comment("A second of idleness ends the session: a heartbeat stranded by a"),
		jen.Comment("partition holds the batch's rows from the next heartbeats that long."),
		jen.Err().Op(":=").Add(dr("InTxIdle")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Lit(1), jen.Func().Params(jen.Id("conn").Op("*").Qual("database/sql", "Conn")).Error().Block(
			jen.Id("qt").Op(":=").Id("New").Call(jen.Id("conn")),
			jen.List(jen.Id("ids"), jen.Id("_")).Op(":=").Id("claimArgs").Call(jen.Id("claims")),
			jen.Comment("A read without a lock first: a run no longer running with its claim"),
			jen.Comment("(claimed again, say) is never locked, so a stale heartbeat cannot hold"),
			jen.Comment("the new claim's row."),
			jen.List(jen.Id("peeked"), jen.Err()).Op(":=").Id("peekRuns").Call(jen.Id("ctx"), jen.Id("qt"), jen.Id("ids")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
			jen.List(jen.Id("locked"), jen.Id("live")).Op(":=").Add(dr("HeartbeatPlan")).Call(jen.Id("claims"), jen.Id("peeked")),
			jen.If(jen.Len(jen.Id("live")).Op(">").Lit(0)).Block(
				jen.List(jen.Id("rows"), jen.Err()).Op(":=").Id("qt").Dot("RunsHeartbeatLock").Call(jen.Id("ctx"), jen.Id("live")),
				jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
				jen.For(jen.List(jen.Id("_"), jen.Id("r")).Op(":=").Range().Id("rows")).Block(
					jen.Id("locked").Op("=").Append(jen.Id("locked"), rowOf()),
				),
			),
			jen.Id("hb").Op("=").Add(dr("SortHeartbeat")).Call(jen.Id("claims"), jen.Id("locked")),
			jen.If(jen.Len(jen.Id("hb").Dot("Extended")).Op("==").Lit(0)).Block(jen.Return(jen.Nil())),
			jen.List(jen.Id("ids"), jen.Id("refs")).Op(":=").Id("claimArgs").Call(jen.Id("hb").Dot("Extended")),
			jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("qt").Dot("RunsHeartbeat").Call(jen.Id("ctx"), literal(db("RunsHeartbeatParams"),
				kv{"LeaseUs", jen.Id("lease").Dot("Microseconds").Call()}, kv{"Ids", jen.Id("ids")}, kv{"ClaimRefs", jen.Id("refs")})),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
			jen.Return(dr("CheckExtended").Call(jen.Id("n"), jen.Len(jen.Id("ids")))),
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Comment("The commit may not have landed: nothing is known extended."),
			jen.Return(dr("Heartbeat").Values(), jen.Err()),
		),
		jen.Return(jen.Id("hb"), jen.Nil()),
	)
	method("// RunsComplete implements driver.JobStore, in READ COMMITTED: it waits on no\n// run's row, and a listed run claimed again since keeps no lock of it. Where\n// the server has the no-wait form (MariaDB: driver.NoWait), the plain UPDATE\n// goes first, and the one that skips held rows only when a row was held. When\n// it completes fewer runs than claims, a read without a lock tells which of\n// the others another transaction held (busy).", "RunsComplete",
		[]jen.Code{ctx(), claims()}, []jen.Code{dr("Completion"), jen.Error()},
		claimArgs.Clone(),
		jen.Var().Id("done").Add(dr("Completion")),
		jen.Err().Op(":=").Add(dr("ReadCommitted")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Func().Params(jen.Id("conn").Op("*").Qual("database/sql", "Conn")).Error().Block(
			jen.Id("qt").Op(":=").Id("New").Call(jen.Id("conn")),
			jen.Var().Id("n").Int64(),
			jen.Var().Err().Error(),
			jen.Id("tried").Op(":=").Id("s").Dot("nowait").Dot("Try").Call(),
			jen.If(jen.Id("tried")).Block(
				jen.List(jen.Id("n"), jen.Err()).Op("=").Id("New").Call(dr("NoWaitConn").Values(jen.Dict{jen.Id("Conn"): jen.Id("conn")})).Dot("RunsCompleteNowait").Call(jen.Id("ctx"), literal(db("RunsCompleteNowaitParams"), kv{"Ids", jen.Id("ids")}, kv{"ClaimRefs", jen.Id("refs")})),
			),
			jen.If(jen.Op("!").Id("tried").Op("||").Err().Op("!=").Nil().Op("&&").Id("s").Dot("nowait").Dot("Fallback").Call(jen.Err())).Block(
				jen.Comment("A held row, or a server without the no-wait form: skip held rows."),
				jen.If(jen.Id("tried")).Block(
					jen.Comment("The failed statement may have used the one-shot READ COMMITTED up."),
					jen.If(jen.Err().Op(":=").Add(dr("ReadCommittedNext")).Call(jen.Id("ctx"), jen.Id("conn")), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
				),
				jen.List(jen.Id("n"), jen.Err()).Op("=").Id("qt").Dot("RunsComplete").Call(jen.Id("ctx"), literal(db("RunsCompleteParams"), kv{"Ids", jen.Id("ids")}, kv{"ClaimRefs", jen.Id("refs")})),
			),
			jen.If(jen.Err().Op("!=").Nil().Op("||").Id("n").Op("==").Int64().Call(jen.Len(jen.Id("claims")))).Block(
				jen.Id("done").Dot("Completed").Op("=").Id("n"),
				jen.Return(jen.Err()),
			),
			jen.List(jen.Id("peeked"), jen.Err()).Op(":=").Id("peekRuns").Call(jen.Id("ctx"), jen.Id("qt"), jen.Id("ids")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
			jen.Id("done").Op("=").Add(dr("SortCompletion")).Call(jen.Id("claims"), jen.Id("n"), jen.Id("peeked")),
			jen.Return(jen.Nil()),
		)),
		jen.Return(jen.Id("done"), jen.Err()),
	)
	// outcome ends a single-run outcome statement: n rows changed, else
	// driver.ErrRunBusy when another transaction held the run's row.
	outcome := func(orphaned bool) *jen.Statement {
		return jen.Return(jen.Id("s").Dot("outcome").Call(jen.Id("ctx"), jen.Id("c"), jen.Id("n"), jen.Err(), jen.Lit(orphaned)))
	}
	method("// RunFail implements driver.JobStore.", "RunFail",
		[]jen.Code{ctx(), jen.Id("c").Add(dr("Claim")), jen.Id("errText").String(), jen.Id("backoff").Add(dur())}, []jen.Code{jen.Bool(), jen.Error()},
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q()).Dot("RunFail").Call(jen.Id("ctx"), literal(db("RunFailParams"),
			kv{"ID", jen.Id("c").Dot("ID")}, kv{"Claim", jen.Id("c").Dot("Claim")}, kv{"LastError", nullString(jen.Id("errText"))},
			kv{"BackoffUs", jen.Id("backoff").Dot("Microseconds").Call()})),
		outcome(true),
	)
	method("// RunDiscard implements driver.JobStore.", "RunDiscard",
		[]jen.Code{ctx(), jen.Id("c").Add(dr("Claim")), jen.Id("errText").String()}, []jen.Code{jen.Bool(), jen.Error()},
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q()).Dot("RunDiscard").Call(jen.Id("ctx"), literal(db("RunDiscardParams"),
			kv{"ID", jen.Id("c").Dot("ID")}, kv{"Claim", jen.Id("c").Dot("Claim")}, kv{"LastError", nullString(jen.Id("errText"))})),
		outcome(true),
	)
	method("// RunSnooze implements driver.JobStore.", "RunSnooze",
		[]jen.Code{ctx(), jen.Id("c").Add(dr("Claim")), jen.Id("delay").Add(dur())}, []jen.Code{jen.Bool(), jen.Error()},
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q()).Dot("RunSnooze").Call(jen.Id("ctx"), literal(db("RunSnoozeParams"),
			kv{"ID", jen.Id("c").Dot("ID")}, kv{"Claim", jen.Id("c").Dot("Claim")}, kv{"DelayUs", jen.Id("delay").Dot("Microseconds").Call()})),
		outcome(false),
	)
	method("// outcome is the result of a single-run outcome statement on c that\n// changed n rows: when none, a read without a lock tells whether another\n// transaction held the run's row (driver.ErrRunBusy) or the run is gone.", "outcome",
		[]jen.Code{ctx(), jen.Id("c").Add(dr("Claim")), jen.Id("n").Int64(), jen.Err().Error(), jen.Id("orphaned").Bool()}, []jen.Code{jen.Bool(), jen.Error()},
		jen.If(jen.Err().Op("!=").Nil().Op("||").Id("n").Op(">").Lit(0)).Block(jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err())),
		jen.List(jen.Id("peeked"), jen.Err()).Op(":=").Id("peekRuns").Call(jen.Id("ctx"), q(), jen.Index().Int64().Values(jen.Id("c").Dot("ID"))),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.False(), jen.Err())),
		jen.Return(jen.False(), dr("OutcomeBusy").Call(jen.Id("c"), jen.Id("peeked"), jen.Id("orphaned"))),
	)
	method("// RunsRescue implements driver.JobStore: read the runs past their deadline\n// without locking, then lock those no other transaction holds and rescue\n// them, in one short transaction.", "RunsRescue",
		[]jen.Code{ctx(), jen.Id("limit").Int()}, []jen.Code{jen.Int64(), jen.Error()},
		jen.List(jen.Id("ids"), jen.Err()).Op(":=").Add(q()).Dot("RunsRescuable").Call(jen.Id("ctx"), jen.Int32().Call(jen.Id("limit"))),
		jen.If(jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("ids")).Op("==").Lit(0)).Block(jen.Return(jen.Lit(0), jen.Err())),
		jen.Var().Id("n").Int64(),
		jen.Comment("A second of idleness ends the session, as for a heartbeat: a rescue"),
		jen.Comment("stranded by a partition holds its runs from their heartbeats that long."),
		jen.Err().Op("=").Add(dr("InTxIdle")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Lit(1), jen.Func().Params(jen.Id("conn").Op("*").Qual("database/sql", "Conn")).Error().Block(
			jen.Id("qt").Op(":=").Id("New").Call(jen.Id("conn")),
			jen.List(jen.Id("locked"), jen.Err()).Op(":=").Id("qt").Dot("RunsRescueLock").Call(jen.Id("ctx"), jen.Id("ids")),
			jen.If(jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("locked")).Op("==").Lit(0)).Block(jen.Return(jen.Err())),
			jen.List(jen.Id("n"), jen.Err()).Op("=").Id("qt").Dot("RunsRescue").Call(jen.Id("ctx"), jen.Id("locked")),
			jen.Return(jen.Err()),
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Comment("The commit may not have landed: nothing is known rescued."),
			jen.Return(jen.Lit(0), jen.Err()),
		),
		jen.Return(jen.Id("n"), jen.Nil()),
	)
	method("// RunsPrune implements driver.JobStore: read the finished runs without\n// locking, then delete them by primary key.", "RunsPrune",
		[]jen.Code{ctx(), jen.Id("job").String(), jen.Id("keep").Qual("time", "Time"), jen.Id("olderThan").Add(dur()), jen.Id("limit").Int()}, []jen.Code{jen.Int64(), jen.Error()},
		jen.List(jen.Id("ids"), jen.Err()).Op(":=").Add(q()).Dot("RunsPrunable").Call(jen.Id("ctx"), literal(db("RunsPrunableParams"),
			kv{"Job", jen.Id("job")}, kv{"KeepTick", nullTime(jen.Id("keep"))}, kv{"OlderThanUs", jen.Id("olderThan").Dot("Microseconds").Call()},
			kv{"Limit", jen.Int32().Call(jen.Id("limit"))})),
		jen.If(jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("ids")).Op("==").Lit(0)).Block(jen.Return(jen.Lit(0), jen.Err())),
		jen.Return(q().Dot("RunsPrune").Call(jen.Id("ctx"), literal(db("RunsPruneParams"),
			kv{"OlderThanUs", jen.Id("olderThan").Dot("Microseconds").Call()}, kv{"Ids", jen.Id("ids")}))),
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
	method("// RunsQueues implements driver.JobStore.", "RunsQueues",
		[]jen.Code{ctx(), jen.Id("limit").Int()}, []jen.Code{jen.Index().String(), jen.Error()},
		jen.Return(q().Dot("RunsQueues").Call(jen.Id("ctx"), jen.Int32().Call(jen.Id("limit")))),
	)
	for _, name := range []string{"QueuePause", "QueueResume"} {
		method("// "+name+" implements driver.JobStore.", name,
			[]jen.Code{ctx(), jen.Id("queue").String()}, []jen.Code{jen.Error()},
			jen.Return(q().Dot(name).Call(jen.Id("ctx"), jen.Id("queue"))),
		)
	}
	method("// QueuesPaused implements driver.JobStore: a read that takes no lock.", "QueuesPaused",
		[]jen.Code{ctx()}, []jen.Code{jen.Index().String(), jen.Error()},
		jen.Return(q().Dot("QueuesPaused").Call(jen.Id("ctx"))),
	)
	method("// QueuesList implements driver.JobStore.", "QueuesList",
		[]jen.Code{ctx(), jen.Id("limit").Int()}, []jen.Code{jen.Index().Add(dr("QueueState")), jen.Error()},
		jen.List(jen.Id("rows"), jen.Err()).Op(":=").Add(q()).Dot("QueuesList").Call(jen.Id("ctx"), jen.Int32().Call(jen.Id("limit"))),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Id("out").Op(":=").Make(jen.Index().Add(dr("QueueState")), jen.Len(jen.Id("rows"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("r")).Op(":=").Range().Id("rows")).Block(
			jen.Id("out").Index(jen.Id("i")).Op("=").Add(literal(dr("QueueState"),
				kv{"Queue", r("Queue")}, kv{"Paused", r("Paused")}, kv{"PausedAt", r("PausedAt").Dot("Time")}, kv{"UpdatedAt", r("UpdatedAt")})),
		),
		jen.Return(jen.Id("out"), jen.Nil()),
	)
	f.Line()
	f.Comment("peekRuns reads the claims and states of the runs ids without a lock.")
	f.Func().Id("peekRuns").Params(ctx(), jen.Id("q").Op("*").Id("Queries"), jen.Id("ids").Index().Int64()).Params(jen.Index().Add(dr("HeartbeatRow")), jen.Error()).Block(
		jen.List(jen.Id("rows"), jen.Err()).Op(":=").Id("q").Dot("RunsHeartbeatPeek").Call(jen.Id("ctx"), jen.Id("ids")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Id("peeked").Op(":=").Make(jen.Index().Add(dr("HeartbeatRow")), jen.Len(jen.Id("rows"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("r")).Op(":=").Range().Id("rows")).Block(
			jen.Id("peeked").Index(jen.Id("i")).Op("=").Add(rowOf()),
		),
		jen.Return(jen.Id("peeked"), jen.Nil()),
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
