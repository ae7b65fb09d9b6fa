package generator

import (
	"github.com/dave/jennifer/jen"
)

// storeGlue is lockgendb/lockgen_store.go: driver.Store (and, with jobs,
// driver.JobStore) over the sqlc queries of the same package.
func storeGlue(m *model) *jen.File {
	f := newStoreFile(m)
	db := func(name string) *jen.Statement { return jen.Qual(m.DBImport, name) }
	ctx := jen.Id("ctx").Qual("context", "Context")
	recv := jen.Id("s").Id("Store")
	q := jen.Id("s").Dot("q")
	id := func(field string) *jen.Statement { return jen.Id("id").Dot(field) }
	ttlUs := jen.Id("ttl").Dot("Microseconds").Call()

	f.Comment(m.storeDoc())
	fields := []jen.Code{
		jen.Id("q").Op("*").Add(db("Queries")),
		jen.Id("db").Op("*").Qual("database/sql", "DB"),
	}
	if len(m.Jobs) > 0 {
		fields = append(fields,
			jen.Id("inserts").Op("*").Add(dr("InsertStmts")).Comment("the prepared multi-row inserts of runs"),
			jen.Id("nowait").Op("*").Add(dr("NoWait")).Comment("whether the server completes runs in the no-wait form"),
		)
	}
	f.Type().Id("Store").Struct(fields...)
	f.Line()
	f.Comment(m.storeGuardDoc())
	if len(m.Jobs) > 0 {
		f.Var().Defs(
			jen.Id("_").Add(dr("Store")).Op("=").Id("Store").Values(),
			jen.Id("_").Add(dr("JobStore")).Op("=").Id("Store").Values(),
		)
	} else {
		f.Var().Id("_").Add(dr("Store")).Op("=").Id("Store").Values()
	}
	f.Line()
	f.Comment(m.newStoreDoc())
	prepared := []jen.Code{jen.Id("db"), jen.Id("leaseAcquire"), jen.Id("leaseRenew"), jen.Id("leaseRelease")}
	if len(m.Jobs) > 0 {
		prepared = append(prepared, jen.Id("runInsert"))
	}
	storeFields := []jen.Code{jen.Id("q").Op(":").Add(db("New")).Call(dr("NewPreparedDB").Call(prepared...)), jen.Id("db").Op(":").Id("db")}
	if len(m.Jobs) > 0 {
		storeFields = append(storeFields, jen.Id("inserts").Op(":").Add(dr("NewInsertStmts")).Call(jen.Id("db"), jen.Lit(m.RunsTable)),
			jen.Id("nowait").Op(":").New(dr("NoWait")))
	}
	f.Func().Id("NewStore").Params(jen.Id("db").Op("*").Qual("database/sql", "DB")).Id("Store").Block(
		jen.Return(jen.Id("Store").Values(storeFields...)),
	)

	f.Line()
	f.Comment(m.serverDoc())
	target := []kv{{"DB", jen.Id("s").Dot("db")}, {"LocksTable", jen.Lit(m.Table)}}
	if m.RunsTable != "" {
		target = append(target, kv{"RunsTable", jen.Lit(m.RunsTable)}, kv{"QueuesTable", jen.Lit(m.QueuesTable)})
	}
	target = append(target, kv{"Migrations", jen.Lit(m.migrationsHint())}, kv{"LocksMigration", jen.Lit(m.fileHint(m.LocksMigration))},
		kv{"LocksSessionMigration", jen.Lit(m.fileHint(m.LocksSessionMigration))})
	if m.RunsTable != "" {
		target = append(target, kv{"RunsMigration", jen.Lit(m.fileHint(m.RunsMigration))}, kv{"QueuesMigration", jen.Lit(m.fileHint(m.QueuesMigration))},
			kv{"HistoryMigration", jen.Lit(m.fileHint(m.HistoryMigration))}, kv{"HeadersMigration", jen.Lit(m.fileHint(m.HeadersMigration))})
	}
	f.Func().Params(recv.Clone()).Id("Server").Params().Add(dr("Target")).Block(
		jen.Return(literal(dr("Target"), target...)),
	)

	f.Line()
	for _, acquire := range []struct {
		name, doc string
		takeover  bool // takes the GET_LOCK name of a session holding
	}{{"LeaseAcquire", leaseAcquireDoc, false}, {"LeaseTakeover", leaseTakeoverDoc, true}} {
		strs := []jen.Code{jen.Id("name"), jen.Id("key"), jen.Id("owner")}
		fields := []kv{{"Name", jen.Id("name")}, {"LockKey", jen.Id("key")}, {"Owner", jen.Id("owner")}, {"TtlUs", ttlUs.Clone()}}
		if acquire.takeover {
			strs = append(strs, jen.Id("sessionLock"))
			fields = append(fields, kv{"SessionLock", jen.Id("sessionLock")})
		}
		f.Comment(acquire.doc)
		f.Func().Params(recv.Clone()).Id(acquire.name).Params(
			ctx.Clone(), jen.List(strs...).String(), jen.Id("ttl").Qual("time", "Duration"),
		).Params(jen.Id("token").Int64(), jen.Err().Error()).Block(
			jen.List(jen.Id("res"), jen.Err()).Op(":=").Add(q.Clone()).Dot(acquire.name).Call(jen.Id("ctx"), literal(db(acquire.name+"Params"), fields...)),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Err())),
			jen.Return(jen.Id("res").Dot("LastInsertId").Call()),
		)
		f.Line()
	}

	f.Line()
	f.Comment(leaseRenewDoc)
	f.Func().Params(recv.Clone()).Id("LeaseRenew").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")), jen.Id("ttl").Qual("time", "Duration"),
	).Params(jen.Id("ok").Bool(), jen.Err().Error()).Block(
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q.Clone()).Dot("LeaseRenew").Call(jen.Id("ctx"), literal(db("LeaseRenewParams"),
			kv{"TtlUs", ttlUs.Clone()}, kv{"Name", id("Name")}, kv{"LockKey", id("Key")}, kv{"Owner", id("Owner")}, kv{"Token", id("Token")},
		)),
		jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
	)

	f.Line()
	f.Comment(leaseReleaseDoc)
	f.Func().Params(recv.Clone()).Id("LeaseRelease").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")),
	).Params(jen.Id("ok").Bool(), jen.Err().Error()).Block(
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(q.Clone()).Dot("LeaseRelease").Call(jen.Id("ctx"), literal(db("LeaseReleaseParams"),
			kv{"Name", id("Name")}, kv{"LockKey", id("Key")}, kv{"Owner", id("Owner")}, kv{"Token", id("Token")},
		)),
		jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
	)

	f.Line()
	f.Comment(leaseGetDoc)
	f.Func().Params(recv.Clone()).Id("LeaseGet").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key")).String(),
	).Params(jen.Id("row").Add(dr("LeaseRow")), jen.Id("found").Bool(), jen.Err().Error()).Block(
		jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(q.Clone()).Dot("LeaseGet").Call(jen.Id("ctx"), literal(db("LeaseGetParams"), kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")})),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(
			jen.Return(dr("LeaseRow").Values(), jen.False(), jen.Nil()),
		),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(dr("LeaseRow").Values(), jen.False(), jen.Err()),
		),
		jen.Return(literal(dr("LeaseRow"),
			kv{"Owner", jen.Id("r").Dot("Owner")},
			kv{"Token", jen.Id("r").Dot("Token")},
			kv{"AcquiredAt", jen.Id("r").Dot("AcquiredAt")},
			kv{"ExpiresAt", jen.Id("r").Dot("ExpiresAt")},
			kv{"Remaining", jen.Qual("time", "Duration").Call(jen.Id("r").Dot("RemainingUs")).Op("*").Qual("time", "Microsecond")},
		), jen.True(), jen.Nil()),
	)

	f.Line()
	f.Comment(leaseGuardDoc)
	f.Func().Params(recv.Clone()).Id("LeaseGuard").Params(
		ctx.Clone(), jen.Id("tx").Op("*").Qual("database/sql", "Tx"), jen.Id("id").Add(dr("LeaseID")),
	).Params(jen.Id("ok").Bool(), jen.Err().Error()).Block(
		jen.List(jen.Id("_"), jen.Err()).Op("=").Add(q.Clone()).Dot("WithTx").Call(jen.Id("tx")).Dot("LeaseGuard").Call(jen.Id("ctx"), literal(db("LeaseGuardParams"),
			kv{"Name", id("Name")}, kv{"LockKey", id("Key")}, kv{"Owner", id("Owner")}, kv{"Token", id("Token")},
		)),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(
			jen.Return(jen.False(), jen.Nil()),
		),
		jen.Return(jen.Err().Op("==").Nil(), jen.Err()),
	)
	batchGlue(f, m)
	f.Line()
	f.Comment(leasePruneDoc)
	f.Func().Params(recv.Clone()).Id("LeasePrune").Params(
		ctx.Clone(), jen.Id("name").String(), jen.Id("olderThan").Qual("time", "Duration"), jen.Id("limit").Int(),
	).Params(jen.Int64(), jen.Error()).Block(
		jen.Var().Id("n").Int64(),
		jen.Comment("A second of idleness ends the session: a prune stranded by a"),
		jen.Comment("partition holds the rows it locked that long."),
		jen.Err().Op(":=").Add(dr("InTxIdle")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Lit(1), jen.Func().Params(jen.Id("conn").Op("*").Qual("database/sql", "Conn")).Error().Block(
			jen.Id("qt").Op(":=").Id("New").Call(jen.Id("conn")),
			jen.List(jen.Id("keys"), jen.Err()).Op(":=").Id("qt").Dot("LeasePrunable").Call(jen.Id("ctx"), literal(db("LeasePrunableParams"),
				kv{"Name", jen.Id("name")}, kv{"OlderThanUs", jen.Id("olderThan").Dot("Microseconds").Call()}, kv{"Limit", jen.Int32().Call(jen.Id("limit"))},
			)),
			jen.If(jen.Err().Op("!=").Nil().Op("||").Len(jen.Id("keys")).Op("==").Lit(0)).Block(jen.Return(jen.Err())),
			jen.List(jen.Id("n"), jen.Err()).Op("=").Add(dr("DeleteKeys")).Call(jen.Id("ctx"), jen.Id("conn"), jen.Lit(m.Table), jen.Id("name"), jen.Id("keys")),
			jen.Return(jen.Err()),
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Comment("The commit may not have landed: nothing is known deleted."),
			jen.Return(jen.Lit(0), jen.Err()),
		),
		jen.Return(jen.Id("n"), jen.Nil()),
	)
	sessionGlue(f, m)
	rowGlue(f, m)
	if len(m.Jobs) > 0 {
		jobsGlue(f, m)
	}
	return f
}

// batchGlue adds the batched lease methods of Store.
func batchGlue(f *jen.File, m *model) {
	db := func(name string) *jen.Statement { return jen.Qual(m.DBImport, name) }
	ctx := jen.Id("ctx").Qual("context", "Context")
	recv := jen.Id("s").Id("Store")
	q := jen.Id("s").Dot("q")

	f.Line()
	f.Comment(leaseRenewManyDoc)
	f.Func().Params(recv.Clone()).Id("LeaseRenewMany").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("owner")).String(), jen.Id("keys").Index().String(),
		jen.Id("tokens").Index().Int64(), jen.Id("ttl").Qual("time", "Duration"),
	).Params(jen.Int64(), jen.Error()).Block(
		jen.Id("holdings").Op(":=").Make(jen.Index().Qual("database/sql", "NullString"), jen.Len(jen.Id("keys"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("k")).Op(":=").Range().Id("keys")).Block(
			jen.Id("holdings").Index(jen.Id("i")).Op("=").Qual("database/sql", "NullString").Values(jen.Dict{
				jen.Id("String"): jen.Id("k").Op("+").Lit(":").Op("+").Qual("strconv", "FormatInt").Call(jen.Id("tokens").Index(jen.Id("i")), jen.Lit(10)),
				jen.Id("Valid"):  jen.True(),
			}),
		),
		jen.Return(q.Clone().Dot("LeaseRenewMany").Call(jen.Id("ctx"), literal(db("LeaseRenewManyParams"),
			kv{"TtlUs", jen.Id("ttl").Dot("Microseconds").Call()}, kv{"Name", jen.Id("name")}, kv{"Owner", jen.Id("owner")},
			kv{"LockKeys", jen.Id("keys")}, kv{"Holdings", jen.Id("holdings")},
		))),
	)

	f.Line()
	f.Comment(leaseGetManyDoc)
	f.Func().Params(recv.Clone()).Id("LeaseGetMany").Params(
		ctx.Clone(), jen.Id("name").String(), jen.Id("keys").Index().String(),
	).Params(jen.Map(jen.String()).Add(dr("LeaseRow")), jen.Error()).Block(
		jen.List(jen.Id("rows"), jen.Err()).Op(":=").Add(q.Clone()).Dot("LeaseGetMany").Call(jen.Id("ctx"), literal(db("LeaseGetManyParams"),
			kv{"Name", jen.Id("name")}, kv{"LockKeys", jen.Id("keys")},
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Id("m").Op(":=").Make(jen.Map(jen.String()).Add(dr("LeaseRow")), jen.Len(jen.Id("rows"))),
		jen.For(jen.List(jen.Id("_"), jen.Id("r")).Op(":=").Range().Id("rows")).Block(
			jen.Id("m").Index(jen.Id("r").Dot("LockKey")).Op("=").Add(literal(dr("LeaseRow"),
				kv{"Owner", jen.Id("r").Dot("Owner")},
				kv{"Token", jen.Id("r").Dot("Token")},
				kv{"Remaining", jen.Qual("time", "Duration").Call(jen.Id("r").Dot("RemainingUs")).Op("*").Qual("time", "Microsecond")},
			)),
		),
		jen.Return(jen.Id("m"), jen.Nil()),
	)
}
