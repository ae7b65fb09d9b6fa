package generator

import (
	"bytes"
	"fmt"
	"go/format"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/templates"
)

// renderGo renders the Go wrappers and the Store glue of m, keyed by their
// output paths. jennifer formats them with gofmt and lists exactly the
// imports they use.
func renderGo(m *model) (map[string][]byte, error) {
	files := map[string][]byte{}
	gofiles := map[string]*jen.File{
		path.Join(m.OutDir, wrappersFile): wrappers(m),
		path.Join(m.DBDir, storeFile):     storeGlue(m),
	}
	if len(m.Jobs) > 0 {
		gofiles[path.Join(m.OutDir, jobsFile)] = jobsGo(m)
	}
	for name, f := range gofiles {
		var buf bytes.Buffer
		if err := f.Render(&buf); err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		src, err := groupImports(buf.Bytes())
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		files[name] = src
	}
	return files, nil
}

// groupImports puts the standard library imports of the gofmt'd source src
// in a group of their own before the others, as goimports does; jennifer
// lists them all in one sorted group.
func groupImports(src []byte) ([]byte, error) {
	const open, closing = "\nimport (\n", "\n)\n"
	start := bytes.Index(src, []byte(open))
	if start < 0 {
		return src, nil
	}
	start += len(open)
	end := start + bytes.Index(src[start:], []byte(closing))
	var std, other []string
	for _, line := range strings.Split(string(src[start:end]), "\n") {
		if isStdImport(line) {
			std = append(std, line)
		} else {
			other = append(other, line)
		}
	}
	if len(std) == 0 || len(other) == 0 {
		return src, nil
	}
	block := strings.Join(std, "\n") + "\n\n" + strings.Join(other, "\n")
	out := slices.Concat(src[:start], []byte(block), src[end:])
	return format.Source(out)
}

// isStdImport reports whether an import line names a standard library
// package: one whose path has no dot in its first element.
func isStdImport(line string) bool {
	quoted := line[strings.Index(line, `"`)+1:]
	first, _, _ := strings.Cut(quoted, "/")
	return !strings.Contains(strings.TrimSuffix(first, `"`), ".")
}

// newFile starts a generated Go file of m's package.
func newFile(m *model) *jen.File {
	f := jen.NewFile(m.Package)
	f.HeaderComment(templates.Header)
	f.ImportName(runtimePath, "runtime")
	f.ImportName(m.DBImport, m.DBPackage)
	return f
}

// rt refers to an exported name of the runtime package.
func rt(name string) *jen.Statement { return jen.Qual(runtimePath, name) }

// dr refers to an exported name of the runtime's driver package.
func dr(name string) *jen.Statement { return jen.Qual(driverPath, name) }

// newStoreFile starts the generated Go file of m's sqlc package that holds
// the store: the driver.Store (and driver.JobStore) implementation over
// the sqlc queries next to it.
func newStoreFile(m *model) *jen.File {
	f := jen.NewFilePathName(m.DBImport, m.DBPackage)
	f.HeaderComment(templates.Header)
	f.ImportName(driverPath, "driver")
	f.ImportAlias("database/sql/driver", "sqldriver")
	return f
}

// wrappers is lockgen.go: options, the Locks type, New and the methods of
// every lock.
func wrappers(m *model) *jen.File {
	f := newFile(m)
	f.PackageComment(m.packageDoc())

	f.Comment(m.versionGuardDoc())
	f.Const().Id("_").Op("=").Add(rt(versionGuard))
	f.Line()
	lockReexports(f, m)
	f.Line()
	f.Comment(m.optionDoc())
	f.Type().Id("Option").Op("=").Add(rt("Option"))
	f.Line()
	f.Comment(m.withOwnerDoc())
	f.Func().Id("WithOwner").Params(jen.Id("owner").String()).Id("Option").Block(
		jen.Return(rt("WithOwner").Call(jen.Id("owner"))),
	)
	f.Line()
	f.Comment(m.withLoggerDoc())
	f.Func().Id("WithLogger").Params(jen.Id("l").Op("*").Qual("log/slog", "Logger")).Id("Option").Block(
		jen.Return(rt("WithLogger").Call(jen.Id("l"))),
	)
	if len(m.Locks) > 0 {
		f.Line()
		f.Comment(m.withObserverDoc())
		f.Func().Id("WithObserver").Params(jen.Id("obs").Add(rt("Observer"))).Id("Option").Block(
			jen.Return(rt("WithObserver").Call(jen.Id("obs"))),
		)
	}
	if len(m.Locks) > 0 { // a jobs-only package has no lock names
		f.Line()
		f.Comment(m.namesDoc())
		f.Const().DefsFunc(func(g *jen.Group) {
			for _, lk := range m.Locks {
				g.Comment(lk.nameConstDoc())
				g.Id(lk.NameConst).Op("=").Lit(lk.Name)
			}
		})
	}
	f.Line()
	f.Comment(m.locksDoc())
	f.Type().Id("Locks").StructFunc(func(g *jen.Group) {
		g.Id("client").Op("*").Add(rt("Client"))
		if len(m.Jobs) > 0 {
			g.Id("jobs").Op("*").Add(rt("Jobs"))
		}
		for _, lk := range m.Locks {
			g.Id(lk.Field).Op("*").Add(rt("Lock"))
		}
	})
	f.Line()
	f.Comment(m.newDoc())
	f.Func().Id("New").Params(
		jen.Id("db").Op("*").Qual("database/sql", "DB"),
		jen.Id("opts").Op("...").Id("Option"),
	).Params(jen.Op("*").Id("Locks"), jen.Error()).BlockFunc(func(g *jen.Group) { newBody(g, m) })
	f.Line()
	f.Comment(m.ownerDoc())
	f.Func().Params(jen.Id(m.Receiver).Op("*").Id("Locks")).Id("Owner").Params().String().Block(
		jen.Return(jen.Id(m.Receiver).Dot("client").Dot("Owner").Call()),
	)
	f.Line()
	f.Comment(m.checkServerDoc())
	f.Func().Params(jen.Id(m.Receiver).Op("*").Id("Locks")).Id("CheckServer").Params(
		jen.Id("ctx").Qual("context", "Context"),
	).Error().Block(
		jen.Return(jen.Id(m.Receiver).Dot("client").Dot("CheckServer").Call(jen.Id("ctx"))),
	)
	for i := range m.Locks {
		lockMethods(f, m, &m.Locks[i])
	}
	return f
}

// newBody is the body of New: a Client on the sqlc store and one
// runtime.Lock per declaration.
func newBody(g *jen.Group, m *model) {
	g.If(jen.Id("db").Op("==").Nil()).Block(
		jen.Return(jen.Nil(), jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: nil *sql.DB"), rt("ErrInvalid"))),
	)
	g.Id("store").Op(":=").Qual(m.DBImport, "NewStore").Call(jen.Id("db"))
	g.List(jen.Id("client"), jen.Err()).Op(":=").Add(rt("NewClient")).Call(jen.Id("store"), jen.Id("opts").Op("..."))
	g.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err()))
	g.Id("l").Op(":=").Op("&").Id("Locks").Values(jen.Id("client").Op(":").Id("client"))
	if len(m.Jobs) > 0 {
		g.If(
			jen.List(jen.Id("l").Dot("jobs"), jen.Err()).Op("=").Add(rt("NewJobs")).Call(jen.Id("client"), jen.Id("store")),
			jen.Err().Op("!=").Nil(),
		).Block(jen.Return(jen.Nil(), jen.Err()))
	}
	for _, lk := range m.Locks {
		g.If(
			jen.List(jen.Id("l").Dot(lk.Field), jen.Err()).Op("=").Id("client").Dot("Lock").Call(lockConfig(lk)),
			jen.Err().Op("!=").Nil(),
		).Block(jen.Return(jen.Nil(), jen.Err()))
	}
	g.Return(jen.Id("l"), jen.Nil())
}

// lockConfig is the runtime.LockConfig literal of lk; zero fields are
// left out.
func lockConfig(lk lockModel) *jen.Statement {
	kvs := []kv{{"Name", jen.Id(lk.NameConst)}}
	switch {
	case lk.Session:
		kvs = append(kvs, kv{"Strategy", rt("StrategySession")})
	case lk.Row:
		kvs = append(kvs, kv{"Strategy", rt("StrategyRow")})
	}
	if lk.Key != nil {
		kvs = append(kvs, kv{"Keyed", jen.True()})
		if lk.Key.UUID {
			kvs = append(kvs, kv{"UUIDKeys", jen.True()})
		}
	}
	if !lk.Row { // a row lock has no ttl
		kvs = append(kvs, kv{"TTL", durationExpr(lk.TTL)}, kv{"RenewEvery", durationExpr(lk.RenewEvery)})
	}
	if lk.Wait != 0 {
		kvs = append(kvs, kv{"Wait", durationExpr(lk.Wait)})
	}
	if lk.WaitOnServer {
		kvs = append(kvs, kv{"WaitOnServer", jen.True()})
	}
	return literal(rt("LockConfig"), kvs...)
}

// kv is one field of a composite literal.
type kv struct {
	key string
	val jen.Code
}

// literal is the composite literal typ{key: val, ...}: one field per line,
// in the order given (jen.Dict would sort them by name).
func literal(typ *jen.Statement, kvs ...kv) *jen.Statement {
	return typ.Add(values(kvs...))
}

// values is the composite literal {key: val, ...} with its type elided:
// one field per line, in the order given.
func values(kvs ...kv) *jen.Statement {
	return jen.ValuesFunc(func(g *jen.Group) {
		for _, f := range kvs {
			g.Line().Id(f.key).Op(":").Add(f.val)
		}
		g.Line()
	})
}

// list is the composite literal {elem, ...} of a slice or map, one element
// per line, in the order given.
func list(elems []jen.Code) *jen.Statement {
	return jen.ValuesFunc(func(g *jen.Group) {
		for _, e := range elems {
			g.Line().Add(e)
		}
		g.Line()
	})
}

// durationUnits are the time package's units, largest first.
var durationUnits = []struct {
	d    time.Duration
	name string
}{
	{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"},
	{time.Millisecond, "Millisecond"}, {time.Microsecond, "Microsecond"}, {time.Nanosecond, "Nanosecond"},
}

// durationExpr writes d with the largest time unit that divides it:
// time.Second, 3 * time.Second, 1500 * time.Millisecond.
func durationExpr(d time.Duration) *jen.Statement {
	for _, u := range durationUnits {
		if d%u.d != 0 {
			continue
		}
		if n := d / u.d; n != 1 {
			return jen.Lit(int(n)).Op("*").Qual("time", u.name)
		}
		return jen.Qual("time", u.name)
	}
	return jen.Lit(int64(d)) // unreachable: every duration is a whole number of nanoseconds
}

// lockMethods adds the With, Try, Acquire and Holder methods of lk, then
// the leader methods of a leader lock.
func lockMethods(f *jen.File, m *model, lk *lockModel) {
	recv := jen.Id(m.Receiver).Op("*").Id("Locks")
	lock := jen.Id(m.Receiver).Dot(lk.Field)
	ctx := jen.Id("ctx").Qual("context", "Context")
	params := func(more ...jen.Code) []jen.Code {
		ps := []jen.Code{ctx.Clone()}
		if lk.Key != nil {
			ps = append(ps, jen.Id(lk.Key.Param).Id(lk.Key.GoType))
		}
		return append(ps, more...)
	}
	leaseResult := []jen.Code{jen.Op("*").Id("Lease"), jen.Error()}
	fn := jen.Id("fn").Func().Params(
		jen.Id("ctx").Qual("context", "Context"),
		jen.Id("lease").Op("*").Id("Lease"),
	).Error()

	f.Line()
	f.Comment(lk.withDoc())
	f.Func().Params(recv.Clone()).Id(lk.With).Params(params(fn)...).Error().Block(
		jen.Return(lock.Clone().Dot("With").Call(jen.Id("ctx"), keyExpr(lk), jen.Id("fn"))),
	)
	if lk.WithTx != "" {
		txFn := jen.Id("fn").Func().Params(
			jen.Id("ctx").Qual("context", "Context"),
			jen.Id("tx").Op("*").Qual("database/sql", "Tx"),
			jen.Id("lease").Op("*").Id("Lease"),
		).Error()
		f.Line()
		f.Comment(lk.withTxDoc())
		f.Func().Params(recv.Clone()).Id(lk.WithTx).Params(params(txFn)...).Error().Block(
			jen.Return(lock.Clone().Dot("WithTx").Call(jen.Id("ctx"), keyExpr(lk), jen.Id("fn"))),
		)
	}
	f.Line()
	f.Comment(lk.tryDoc())
	f.Func().Params(recv.Clone()).Id(lk.Try).Params(params()...).Params(leaseResult...).Block(
		jen.Return(lock.Clone().Dot("Try").Call(jen.Id("ctx"), keyExpr(lk))),
	)
	f.Line()
	f.Comment(lk.acquireDoc())
	f.Func().Params(recv.Clone()).Id(lk.Acquire).Params(params()...).Params(leaseResult...).Block(
		jen.Return(lock.Clone().Dot("Acquire").Call(jen.Id("ctx"), keyExpr(lk))),
	)
	f.Line()
	f.Comment(lk.holderDoc())
	f.Func().Params(recv.Clone()).Id(lk.Holder).Params(params()...).Params(jen.Id("Holder"), jen.Error()).Block(
		jen.Return(lock.Clone().Dot("Holder").Call(jen.Id("ctx"), keyExpr(lk))),
	)
	if lk.Prune != "" {
		f.Line()
		f.Comment(lk.pruneDoc())
		f.Func().Params(recv.Clone()).Id(lk.Prune).Params(ctx.Clone(), jen.Id("olderThan").Qual("time", "Duration")).Params(jen.Int64(), jen.Error()).Block(
			jen.Return(lock.Clone().Dot("Prune").Call(jen.Id("ctx"), jen.Id("olderThan"))),
		)
	}
	if lk.Leader == nil {
		return
	}
	f.Line()
	f.Comment(lk.runAsDoc())
	f.Func().Params(recv.Clone()).Id(lk.Leader.RunAs).Params(
		ctx.Clone(), fn.Clone(), jen.Id("opts").Op("...").Id("LeaderOption"),
	).Error().Block(
		jen.Return(lock.Clone().Dot("RunAsLeader").Call(jen.Id("ctx"), jen.Id("fn"), jen.Id("opts").Op("..."))),
	)
	f.Line()
	f.Comment(lk.isLeaderDoc())
	f.Func().Params(recv.Clone()).Id(lk.Leader.IsLeader).Params().Bool().Block(
		jen.Return(lock.Clone().Dot("IsLeader").Call()),
	)
	f.Line()
	f.Comment(lk.currentLeaderDoc())
	f.Func().Params(recv.Clone()).Id(lk.Leader.Current).Params(ctx.Clone()).Params(jen.Id("Holder"), jen.Error()).Block(
		jen.Return(lock.Clone().Dot("Holder").Call(jen.Id("ctx"), jen.Lit(""))),
	)
}

// keyExpr is the runtime key of lk: "" for an unkeyed lock, the parameter
// itself for a string key, strconv.FormatInt(param, 10) for an int64 key.
func keyExpr(lk *lockModel) *jen.Statement {
	switch {
	case lk.Key == nil:
		return jen.Lit("")
	case lk.Key.Decimal:
		return jen.Qual("strconv", "FormatInt").Call(jen.Id(lk.Key.Param), jen.Lit(10))
	default:
		return jen.Id(lk.Key.Param)
	}
}

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
		fields = append(fields, jen.Id("inserts").Op("*").Add(dr("InsertStmts")).Comment("the prepared multi-row inserts of runs"))
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
	storeFields := []jen.Code{jen.Id("q").Op(":").Add(db("New")).Call(jen.Id("db")), jen.Id("db").Op(":").Id("db")}
	if len(m.Jobs) > 0 {
		storeFields = append(storeFields, jen.Id("inserts").Op(":").Add(dr("NewInsertStmts")).Call(jen.Id("db"), jen.Lit(m.RunsTable)))
	}
	f.Func().Id("NewStore").Params(jen.Id("db").Op("*").Qual("database/sql", "DB")).Id("Store").Block(
		jen.Return(jen.Id("Store").Values(storeFields...)),
	)

	f.Line()
	f.Comment(m.serverDoc())
	target := []kv{{"DB", jen.Id("s").Dot("db")}, {"LocksTable", jen.Lit(m.Table)}}
	if m.RunsTable != "" {
		target = append(target, kv{"RunsTable", jen.Lit(m.RunsTable)})
	}
	target = append(target, kv{"Migrations", jen.Lit(m.migrationsHint())})
	f.Func().Params(recv.Clone()).Id("Server").Params().Add(dr("Target")).Block(
		jen.Return(literal(dr("Target"), target...)),
	)

	f.Line()
	f.Comment(leaseAcquireDoc)
	f.Func().Params(recv.Clone()).Id("LeaseAcquire").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key"), jen.Id("owner")).String(), jen.Id("ttl").Qual("time", "Duration"),
	).Params(jen.Id("token").Int64(), jen.Err().Error()).Block(
		jen.List(jen.Id("res"), jen.Err()).Op(":=").Add(q.Clone()).Dot("LeaseAcquire").Call(jen.Id("ctx"), literal(db("LeaseAcquireParams"),
			kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")}, kv{"Owner", jen.Id("owner")}, kv{"TtlUs", ttlUs.Clone()},
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Err())),
		jen.Return(jen.Id("res").Dot("LastInsertId").Call()),
	)

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
		jen.Return(q.Clone().Dot("LeasePrune").Call(jen.Id("ctx"), literal(db("LeasePruneParams"),
			kv{"Name", jen.Id("name")}, kv{"OlderThanUs", jen.Id("olderThan").Dot("Microseconds").Call()}, kv{"Limit", jen.Int32().Call(jen.Id("limit"))},
		))),
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
		jen.List(jen.Id("conn"), jen.Err()).Op(":=").Id("s").Dot("db").Dot("Conn").Call(jen.Id("ctx")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Id("sessionConn").Values(
			jen.Id("conn").Op(":").Id("conn"),
			jen.Id("q").Op(":").Add(db("New")).Call(jen.Id("conn")),
		), jen.Nil()),
	)

	f.Line()
	f.Comment(sessionIsUsedDoc)
	f.Func().Params(recv.Clone()).Id("SessionIsUsed").Params(ctx.Clone(), lockName.Clone()).Params(jen.Bool(), jen.Error()).Block(
		isOne(jen.Id("s").Dot("q").Dot("SessionIsUsed").Call(jen.Id("ctx"), jen.Id("lockName")))...,
	)

	f.Line()
	f.Comment(serverGaleraDoc)
	f.Func().Params(recv.Clone()).Id("ServerGalera").Params(ctx.Clone()).Params(jen.Bool(), jen.Error()).Block(
		isOne(jen.Id("s").Dot("q").Dot("ServerGalera").Call(jen.Id("ctx")))...,
	)

	f.Line()
	f.Comment(sessionConnTypeDoc)
	f.Type().Id("sessionConn").Struct(
		jen.Id("conn").Op("*").Qual("database/sql", "Conn"),
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
	f.Comment(sessionTokenDoc)
	f.Func().Params(crecv.Clone()).Id("Token").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key"), jen.Id("owner")).String(),
	).Params(jen.Int64(), jen.Error()).Block(
		jen.List(jen.Id("res"), jen.Err()).Op(":=").Id("c").Dot("q").Dot("SessionToken").Call(jen.Id("ctx"), literal(db("SessionTokenParams"),
			kv{"Name", jen.Id("name")}, kv{"LockKey", jen.Id("key")}, kv{"Owner", jen.Id("owner")},
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Err())),
		jen.Return(jen.Id("res").Dot("LastInsertId").Call()),
	)

	f.Line()
	f.Comment(freeDoc)
	f.Func().Params(crecv.Clone()).Id("Free").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")),
	).Params(jen.Bool(), jen.Error()).Block(
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("c").Dot("q").Dot("LeaseRelease").Call(jen.Id("ctx"), literal(db("LeaseReleaseParams"),
			kv{"Name", jen.Id("id").Dot("Name")}, kv{"LockKey", jen.Id("id").Dot("Key")}, kv{"Owner", jen.Id("id").Dot("Owner")}, kv{"Token", jen.Id("id").Dot("Token")},
		)),
		jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
	)

	f.Line()
	f.Comment(connRenewDoc)
	f.Func().Params(crecv.Clone()).Id("Renew").Params(
		ctx.Clone(), jen.Id("id").Add(dr("LeaseID")), jen.Id("ttl").Qual("time", "Duration"),
	).Params(jen.Bool(), jen.Error()).Block(
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("c").Dot("q").Dot("LeaseRenew").Call(jen.Id("ctx"), literal(db("LeaseRenewParams"),
			kv{"TtlUs", jen.Id("ttl").Dot("Microseconds").Call()}, kv{"Name", jen.Id("id").Dot("Name")}, kv{"LockKey", jen.Id("id").Dot("Key")}, kv{"Owner", jen.Id("id").Dot("Owner")}, kv{"Token", jen.Id("id").Dot("Token")},
		)),
		jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
	)

	f.Line()
	f.Comment(closeDoc)
	f.Func().Params(crecv.Clone()).Id("Close").Params().Error().Block(
		jen.Return(jen.Id("c").Dot("conn").Dot("Close").Call()),
	)

	f.Line()
	f.Comment(discardDoc)
	f.Func().Params(crecv.Clone()).Id("Discard").Params().Error().Block(
		jen.Id("_").Op("=").Id("c").Dot("conn").Dot("Raw").Call(
			jen.Func().Params(jen.Any()).Error().Block(jen.Return(jen.Qual("database/sql/driver", "ErrBadConn"))),
		),
		jen.Comment("Raw's ErrBadConn closed it already: Close then says ErrConnDone."),
		jen.If(jen.Err().Op(":=").Id("c").Dot("conn").Dot("Close").Call(), jen.Err().Op("!=").Nil().Op("&&").Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual("database/sql", "ErrConnDone"))).Block(
			jen.Return(jen.Err()),
		),
		jen.Return(jen.Nil()),
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
	f.Func().Params(recv.Clone()).Id("RowBegin").Params(ctx.Clone(), jen.Id("lockWait").Qual("time", "Duration")).Params(dr("RowTx"), jen.Error()).Block(
		jen.List(jen.Id("rc"), jen.Err()).Op(":=").Add(dr("BeginRow")).Call(jen.Id("ctx"), jen.Id("s").Dot("db"), jen.Id("lockWait")),
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
	f.Comment(rowTakeDoc)
	f.Func().Params(trecv.Clone()).Id("Take").Params(
		ctx.Clone(), jen.List(jen.Id("name"), jen.Id("key"), jen.Id("owner")).String(),
	).Params(jen.Int64(), jen.Error()).Block(
		jen.List(jen.Id("res"), jen.Err()).Op(":=").Id("t").Dot("q").Dot("RowTake").Call(jen.Id("ctx"), params("RowTakeParams", append(nk, kv{"Owner", jen.Id("owner")})...)),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Lit(0), jen.Err())),
		jen.Return(jen.Id("res").Dot("LastInsertId").Call()),
	)

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
		jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("t").Dot("q").Dot("LeaseRelease").Call(jen.Id("ctx"), literal(db("LeaseReleaseParams"),
			kv{"Name", jen.Id("id").Dot("Name")}, kv{"LockKey", jen.Id("id").Dot("Key")}, kv{"Owner", jen.Id("id").Dot("Owner")}, kv{"Token", jen.Id("id").Dot("Token")},
		)),
		jen.Return(jen.Id("n").Op(">").Lit(0), jen.Err()),
	)
}
