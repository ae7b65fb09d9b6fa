package generator

import "github.com/dave/jennifer/jen"

// sessionGlue adds the session strategy's methods of Store and the
// sessionConn type to the store glue.
func sessionGlue(f *jen.File, m *model) {
	db := func(name string) *jen.Statement { return jen.Qual(m.DBImport, name) }
	ctx := jen.Id("ctx").Qual("context", "Context")
	recv := jen.Id("s").Id("Store")
	crecv := jen.Id("c").Id("sessionConn")
	lockName := jen.Id("lockName").String()
	isOne := func(call *jen.Statement) []jen.Code {
		return []jen.Code{
			jen.List(jen.Id("n"), jen.Err()).Op(":=").Add(call),
			jen.Return(jen.Id("n").Op("==").Lit(1), jen.Err()),
		}
	}

	f.Line()
	f.Comment(m.sessionNamespaceDoc())
	f.Func().Params(recv.Clone()).Id("SessionNamespace").Params().String().Block(
		jen.Return(jen.Lit(m.TablePrefix)),
	)

	f.Line()
	f.Comment(sessionConnDoc)
	f.Func().Params(recv.Clone()).Id("SessionConn").Params(ctx.Clone()).Params(dr("SessionConn"), jen.Error()).Block(
		jen.List(jen.Id("pin"), jen.Err()).Op(":=").Add(dr("PinSession")).Call(jen.Id("ctx"), jen.Id("s").Dot("db")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Id("sessionConn").Values(
			jen.Id("SessionPin").Op(":").Id("pin"),
			jen.Id("q").Op(":").Add(db("New")).Call(jen.Id("pin")),
		), jen.Nil()),
	)

	f.Line()
	f.Comment(sessionIsUsedDoc)
	f.Func().Params(recv.Clone()).Id("SessionIsUsed").Params(ctx.Clone(), lockName.Clone()).Params(jen.Bool(), jen.Error()).Block(
		isOne(jen.Id("s").Dot("q").Dot("SessionIsUsed").Call(jen.Id("ctx"), jen.Id("lockName")))...,
	)

	f.Line()
	f.Comment(sessionGuardDoc)
	f.Func().Params(recv.Clone()).Id("SessionGuard").Params(
		ctx.Clone(), jen.Id("tx").Op("*").Qual("database/sql", "Tx"), jen.List(jen.Id("name"), jen.Id("key"), jen.Id("owner"), jen.Id("lockName")).String(),
		jen.Id("connID").Int64(), jen.Id("witness").String(),
	).Params(jen.Id("ok").Bool(), jen.Err().Error()).Block(
		jen.List(jen.Id("r"), jen.Err()).Op(":=").Id("s").Dot("q").Dot("WithTx").Call(jen.Id("tx")).Dot("SessionGuard").Call(jen.Id("ctx"), literal(db("SessionGuardParams"),
			kv{"LockName", jen.Id("lockName")}, kv{"ConnID", jen.Id("connID")}, kv{"Witness", jen.Id("witness")},
			kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")}, kv{"Owner", jen.Id("owner")},
		)),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(
			jen.Return(jen.False(), jen.Nil()),
		),
		jen.Return(jen.Err().Op("==").Nil().Op("&&").Id("r").Dot("Held").Op("==").Lit(1).Op("&&").Id("r").Dot("Witnessed").Op("==").Lit(1), jen.Err()),
	)

	f.Line()
	f.Comment(sessionDisarmDoc)
	f.Func().Params(recv.Clone()).Id("SessionDisarm").Params(ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key")).String()).Error().Block(
		jen.Return(jen.Id("s").Dot("q").Dot("SessionDisarm").Call(jen.Id("ctx"), literal(db("SessionDisarmParams"),
			kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")},
		))),
	)

	f.Line()
	f.Comment(serverGaleraDoc)
	f.Func().Params(recv.Clone()).Id("ServerGalera").Params(ctx.Clone()).Params(jen.Bool(), jen.Error()).Block(
		isOne(jen.Id("s").Dot("q").Dot("ServerGalera").Call(jen.Id("ctx")))...,
	)

	f.Line()
	f.Comment(sessionConnTypeDoc)
	f.Type().Id("sessionConn").Struct(
		jen.Op("*").Add(dr("SessionPin")),
		jen.Id("q").Op("*").Add(db("Queries")),
	)

	f.Line()
	f.Comment(getLockDoc)
	f.Func().Params(crecv.Clone()).Id("GetLock").Params(
		ctx.Clone(), lockName.Clone(), jen.Id("timeout").Qual("time", "Duration"),
	).Params(jen.Int64(), jen.Error()).Block(
		jen.Return(jen.Id("c").Dot("q").Dot("SessionGetLock").Call(jen.Id("ctx"), literal(db("SessionGetLockParams"),
			kv{"LockName", jen.Id("lockName")}, kv{"TimeoutUs", jen.Id("timeout").Dot("Microseconds").Call()},
		))),
	)

	f.Line()
	f.Comment(holdsLockDoc)
	f.Func().Params(crecv.Clone()).Id("HoldsLock").Params(ctx.Clone(), lockName.Clone()).Params(jen.Bool(), jen.Error()).Block(
		isOne(jen.Id("c").Dot("q").Dot("SessionHoldsLock").Call(jen.Id("ctx"), jen.Id("lockName")))...,
	)

	f.Line()
	f.Comment(releaseLockDoc)
	f.Func().Params(crecv.Clone()).Id("ReleaseLock").Params(ctx.Clone(), lockName.Clone()).Params(jen.Int64(), jen.Error()).Block(
		jen.Return(jen.Id("c").Dot("q").Dot("SessionReleaseLock").Call(jen.Id("ctx"), jen.Id("lockName"))),
	)

	f.Line()
	f.Comment(sessionTokenReadDoc)
	f.Func().Params(crecv.Clone()).Id("TokenRead").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key"), jen.Id("owner"), jen.Id("lockName")).String(),
	).Params(dr("SessionTokenRead"), jen.Error()).Block(
		jen.List(jen.Id("r"), jen.Err()).Op(":=").Id("c").Dot("q").Dot("SessionTokenRead").Call(jen.Id("ctx"), literal(db("SessionTokenReadParams"),
			kv{"LockName", jen.Id("lockName")}, kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")},
		)),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(
			jen.Return(dr("SessionTokenRead").Values(), jen.Nil()),
		),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(dr("SessionTokenRead").Values(), jen.Err())),
		jen.Return(tokenRead(), jen.Nil()),
	)

	f.Line()
	f.Comment(sessionTryReservedDoc)
	f.Func().Params(crecv.Clone()).Id("TryReserved").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key"), jen.Id("owner"), jen.Id("lockName")).String(),
	).Params(dr("SessionTry"), jen.Error()).Block(
		jen.List(jen.Id("r"), jen.Err()).Op(":=").Id("c").Dot("q").Dot("SessionTryReserved").Call(jen.Id("ctx"), literal(db("SessionTryReservedParams"),
			kv{"LockName", jen.Id("lockName")}, kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")},
		)),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(
			jen.Return(dr("SessionTry").Values(), jen.Nil()),
		),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(dr("SessionTry").Values(), jen.Err())),
		jen.Return(literal(dr("SessionTry"),
			kv{"Got", jen.Id("r").Dot("Got")},
			kv{"SessionTokenRead", tokenRead()},
		), jen.Nil()),
	)

	f.Line()
	f.Comment(sessionTokenDoc)
	f.Func().Params(crecv.Clone()).Id("Token").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key"), jen.Id("owner"), jen.Id("lockName")).String(), jen.Id("reserve").Int64(),
	).Params(jen.Id("token").Int64(), jen.Id("reserved").Bool(), jen.Err().Error()).Block(
		jen.List(jen.Id("res"), jen.Err()).Op(":=").Id("c").Dot("q").Dot("SessionToken").Call(jen.Id("ctx"), literal(db("SessionTokenParams"),
			kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")}, kv{"Owner", jen.Id("owner")}, kv{"OwnerBytes", jen.Index().Byte().Call(jen.Id("owner"))},
			kv{"Reserve", jen.Id("reserve")}, kv{"LockName", jen.Id("lockName")},
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.False(), jen.Err())),
		jen.If(jen.List(jen.Id("token"), jen.Err()).Op("=").Id("res").Dot("LastInsertId").Call(), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.False(), jen.Err())),
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("res").Dot("RowsAffected").Call(),
		jen.Return(jen.Id("token"), jen.Id("token").Op("!=").Lit(0).Op("&&").Id("n").Op("==").Lit(0), jen.Err()),
	)

	f.Line()
	f.Comment(freeDoc)
	f.Func().Params(crecv.Clone()).Id("Free").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")),
	).Params(jen.Bool(), jen.Error()).Block(
		jen.Return(jen.Id("Store").Values(jen.Id("q").Op(":").Id("c").Dot("q")).Dot("LeaseRelease").Call(jen.Id("ctx"), jen.Id("id"))),
	)

	f.Line()
	f.Comment(connRenewDoc)
	f.Func().Params(crecv.Clone()).Id("Renew").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")), jen.Id("ttl").Qual("time", "Duration"),
	).Params(jen.Bool(), jen.Error()).Block(
		jen.Return(jen.Id("Store").Values(jen.Id("q").Op(":").Id("c").Dot("q")).Dot("LeaseRenew").Call(jen.Id("ctx"), jen.Id("id"), jen.Id("ttl"))),
	)
}

// rowGlue adds the row strategy's methods of Store and the rowTx type to
// the store glue.
func rowGlue(f *jen.File, m *model) {
	db := func(name string) *jen.Statement { return jen.Qual(m.DBImport, name) }
	ctx := jen.Id("ctx").Qual("context", "Context")
	recv := jen.Id("s").Id("Store")
	trecv := jen.Id("t").Id("rowTx")
	nameKey := jen.List(jen.Id("name"), jen.Id("key")).String()
	params := func(typ string, kvs ...kv) *jen.Statement { return literal(db(typ), kvs...) }
	nk := []kv{{"Name", jen.Id("name")}, {"LockKey", jen.Id("key")}}

	f.Line()
	f.Comment(rowBeginDoc)
	f.Func().Params(recv.Clone()).Id("RowBegin").Params(ctx.Clone(), jen.List(jen.Id("lockWait"), jen.Id("idle")).Qual("time", "Duration")).Params(dr("RowTx"), jen.Error()).Block(
		jen.List(jen.Id("rc"), jen.Err()).Op(":=").Add(dr("BeginRow")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Id("lockWait"), jen.Id("idle")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Id("rowTx").Values(
			jen.Id("RowConn").Op(":").Id("rc"),
			jen.Id("q").Op(":").Id("s").Dot("q").Dot("WithTx").Call(jen.Id("rc").Dot("Tx").Call()),
		), jen.Nil()),
	)

	f.Line()
	f.Comment(rowPeekDoc)
	f.Func().Params(recv.Clone()).Id("RowPeek").Params(ctx.Clone(), nameKey.Clone()).Params(
		jen.Id("row").Add(dr("LeaseRow")), jen.Id("found").Bool(), jen.Err().Error(),
	).Block(
		jen.Err().Op("=").Add(dr("PeekRow")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Func().Params(jen.Id("tx").Op("*").Qual("database/sql", "Tx")).Error().Block(
			jen.List(jen.Id("row"), jen.Id("found"), jen.Err()).Op("=").Id("Store").Values(
				jen.Id("q").Op(":").Id("s").Dot("q").Dot("WithTx").Call(jen.Id("tx")),
			).Dot("LeaseGet").Call(jen.Id("ctx"), jen.Id("name"), jen.Id("key")),
			jen.Return(jen.Err()),
		)),
		jen.Return(jen.Id("row"), jen.Id("found"), jen.Err()),
	)

	f.Line()
	f.Comment(rowTxTypeDoc)
	f.Type().Id("rowTx").Struct(
		jen.Op("*").Add(dr("RowConn")),
		jen.Id("q").Op("*").Add(db("Queries")),
	)

	f.Line()
	f.Comment(lockNowaitDoc)
	f.Func().Params(trecv.Clone()).Id("LockNowait").Params(ctx.Clone(), nameKey.Clone()).Params(jen.Bool(), jen.Error()).Block(
		jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("t").Dot("q").Dot("RowLockNowait").Call(jen.Id("ctx"), params("RowLockNowaitParams", nk...)),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(jen.Return(jen.False(), jen.Nil())),
		jen.Return(jen.Err().Op("==").Nil(), jen.Err()),
	)

	f.Line()
	f.Comment(lockWaitDoc)
	f.Func().Params(trecv.Clone()).Id("LockWait").Params(ctx.Clone(), nameKey.Clone()).Error().Block(
		jen.Return(jen.Id("t").Dot("q").Dot("RowLock").Call(jen.Id("ctx"), params("RowLockParams", nk...))),
	)

	f.Line()
	for _, take := range []struct {
		method, query, doc string
		takeover           bool // takes the GET_LOCK name of a session holding
	}{{"Take", "RowTake", rowTakeDoc, false}, {"Takeover", "RowTakeover", rowTakeoverDoc, true}} {
		strs := []jen.Code{jen.Id("name"), jen.Id("key"), jen.Id("owner")}
		fields := append(append([]kv{}, nk...), kv{"Owner", jen.Id("owner")})
		if take.takeover {
			strs = append(strs, jen.Id("sessionLock"))
			fields = append(fields, kv{"SessionLock", jen.Id("sessionLock")})
		}
		f.Comment(take.doc)
		f.Func().Params(trecv.Clone()).Id(take.method).Params(
			ctx.Clone(), jen.List(strs...).String(),
		).Params(jen.Int64(), jen.Error()).Block(
			jen.List(jen.Id("res"), jen.Err()).Op(":=").Id("t").Dot("q").Dot(take.query).Call(jen.Id("ctx"), params(take.query+"Params", fields...)),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Err())),
			jen.Return(jen.Id("res").Dot("LastInsertId").Call()),
		)
		f.Line()
	}

	f.Line()
	f.Comment(rowHoldsDoc)
	f.Func().Params(trecv.Clone()).Id("Holds").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")),
	).Params(jen.Bool(), jen.Error()).Block(
		jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("t").Dot("q").Dot("RowHolds").Call(jen.Id("ctx"), literal(db("RowHoldsParams"),
			kv{"Name", jen.Id("id").Dot("Name")}, kv{"LockKey", jen.Id("id").Dot("Key")}, kv{"Owner", jen.Id("id").Dot("Owner")}, kv{"Token", jen.Id("id").Dot("Token")},
		)),
		jen.If(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrNoRows"))).Block(jen.Return(jen.False(), jen.Nil())),
		jen.Return(jen.Err().Op("==").Nil(), jen.Err()),
	)

	f.Line()
	f.Comment(rowFreeDoc)
	f.Func().Params(trecv.Clone()).Id("Free").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")),
	).Params(jen.Bool(), jen.Error()).Block(
		jen.Return(jen.Id("Store").Values(jen.Id("q").Op(":").Id("t").Dot("q")).Dot("LeaseRelease").Call(jen.Id("ctx"), jen.Id("id"))),
	)
}

// tokenRead is the driver.SessionTokenRead that TokenRead and TryReserved
// return from their query's row r (owner is the owner asked about).
func tokenRead() *jen.Statement {
	return literal(dr("SessionTokenRead"),
		kv{"Held", jen.Id("r").Dot("Held").Op("==").Lit(1)}, kv{"Found", jen.True()}, kv{"RowToken", jen.Id("r").Dot("Token")},
		kv{"Mine", jen.Id("r").Dot("Owner").Op("==").Id("owner")}, kv{"Armed", jen.Id("r").Dot("Armed").Op("==").Lit(1)},
		kv{"NextToken", jen.Id("r").Dot("NextToken")},
	)
}
