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
	f.ImportName(probePath, "probe")
	if m.Package == "jobs" {
		f.ImportAlias(jobsPath, "lockgenjobs") // not the package's own name
	} else {
		f.ImportName(jobsPath, "jobs")
	}
	f.ImportName(m.DBImport, m.DBPackage)
	return f
}

// jb refers to an exported name of the runtime's jobs package.
func jb(name string) *jen.Statement { return jen.Qual(jobsPath, name) }

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
	f.Line()
	f.Comment(m.withTracerDoc())
	f.Func().Id("WithTracer").Params(jen.Id("t").Add(rt("Tracer"))).Id("Option").Block(
		jen.Return(rt("WithTracer").Call(jen.Id("t"))),
	)
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
			g.Id("jobs").Op("*").Add(jb("Client"))
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
	).Error().BlockFunc(func(g *jen.Group) { checkServerBody(g, m) })
	opsConfig(f, m)
	for i := range m.Locks {
		lockMethods(f, m, &m.Locks[i])
	}
	return f
}

// checkServerBody is the body of CheckServer: the runtime's check of every
// feature the package uses (the lease, which every package uses, alone is
// Client.CheckServer). One probe answers them all.
func checkServerBody(g *jen.Group, m *model) {
	features := m.serverFeatures()
	client := jen.Id(m.Receiver).Dot("client")
	if len(features) == 1 {
		g.Return(client.Dot("CheckServer").Call(jen.Id("ctx")))
		return
	}
	list := make([]jen.Code, len(features))
	for i, f := range features {
		list[i] = jen.Qual(probePath, f)
	}
	g.For(jen.List(jen.Id("_"), jen.Id("f")).Op(":=").Range().Index().Qual(probePath, "Feature").Values(list...)).Block(
		jen.If(jen.Err().Op(":=").Add(client).Dot("CheckFeature").Call(jen.Id("ctx"), jen.Nil(), jen.Id("f")), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Err()),
		),
	)
	g.Return(jen.Nil())
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
			jen.List(jen.Id("l").Dot("jobs"), jen.Err()).Op("=").Add(jb("NewClient")).Call(jen.Id("client"), jen.Id("store"),
				jb("WithQueues").CallFunc(func(g *jen.Group) {
					for _, q := range m.jobQueues() {
						g.Lit(q)
					}
				})),
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
	if lk.IdleTimeout != 0 {
		kvs = append(kvs, kv{"IdleTimeout", durationExpr(lk.IdleTimeout)})
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
