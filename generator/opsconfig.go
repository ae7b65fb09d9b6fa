package generator

import "github.com/dave/jennifer/jen"

// opsPath is the import path of the operations layer.
const opsPath = runtimePath + "/ops"

// opsConfig adds OpsConfig to lockgen.go: the package's declarations as the
// operations layer (runtime/ops) needs them, so that an application can
// mount the HTTP API (lockgenapi) without restating its lockgen.yaml. It
// prints m.Ops, the value OpsConfig gives the CLI and openapi.json.
func opsConfig(f *jen.File, m *model) {
	op := func(name string) *jen.Statement { return jen.Qual(opsPath, name) }
	cfg := m.Ops
	fields := []kv{{"TablePrefix", jen.Lit(cfg.TablePrefix)}}
	if len(cfg.Locks) > 0 {
		var locks []jen.Code
		for _, lk := range cfg.Locks {
			l := []kv{{"Name", jen.Lit(lk.Name)}, {"Strategy", jen.Lit(lk.Strategy)}}
			if lk.Keyed {
				l = append(l, kv{"Keyed", jen.True()})
			}
			if lk.Leader {
				l = append(l, kv{"Leader", jen.True()})
			}
			if lk.WaitOnServer {
				l = append(l, kv{"WaitOnServer", jen.True()})
			}
			locks = append(locks, values(l...))
		}
		fields = append(fields, kv{"Locks", jen.Index().Add(op("Lock")).Add(list(locks))})
	}
	if len(cfg.Jobs) > 0 {
		var jobs []jen.Code
		for _, j := range cfg.Jobs {
			jf := []kv{{"Name", jen.Lit(j.Name)}, {"Queue", jen.Lit(j.Queue)}}
			if j.Schedule != "" {
				jf = append(jf, kv{"Schedule", jen.Lit(j.Schedule)}, kv{"Timezone", jen.Lit(j.Timezone)})
			}
			if len(j.Args) > 0 {
				var args []jen.Code
				for _, a := range j.Args {
					args = append(args, jen.Values(jen.Id("Name").Op(":").Lit(a.Name), jen.Id("Type").Op(":").Lit(a.Type)))
				}
				jf = append(jf, kv{"Args", jen.Index().Add(op("Arg")).Add(list(args))})
			}
			jf = append(jf, kv{"MaxAttempts", jen.Lit(j.MaxAttempts)}, kv{"Timeout", durationExpr(j.Timeout)})
			if j.Priority != 0 {
				jf = append(jf, kv{"Priority", jen.Lit(j.Priority)})
			}
			if j.BackoffInitial != 0 || j.BackoffMax != 0 {
				jf = append(jf, kv{"BackoffInitial", durationExpr(j.BackoffInitial)}, kv{"BackoffMax", durationExpr(j.BackoffMax)})
			}
			jobs = append(jobs, values(jf...))
		}
		fields = append(fields, kv{"Jobs", jen.Index().Add(op("Job")).Add(list(jobs))})
		var queues []jen.Code
		for _, q := range cfg.Queues {
			queues = append(queues, jen.Lit(q))
		}
		if len(queues) > 0 {
			fields = append(fields, kv{"Queues", jen.Index().String().Add(list(queues))})
		}
	}
	f.Line()
	f.Comment("OpsConfig describes this package's locks and jobs to lockgen's operations")
	f.Comment("layer (" + opsPath + "), the one behind the operator")
	f.Comment("commands of the lockgen CLI and the HTTP API, so that an application can")
	f.Comment("serve the API (github.com/lockgen/lockgen/lockgenapi) from its own server:")
	f.Comment("")
	f.Comment("\to, err := ops.New(db, " + m.Package + ".OpsConfig())")
	f.Comment("\th := lockgenapi.New(o, lockgenapi.Options{Authorize: adminsOnly})")
	f.Comment("\tmux.Handle(\"/lockgen/\", http.StripPrefix(\"/lockgen\", h))")
	if len(cfg.Jobs) > 0 {
		f.Comment("")
		f.Comment("Consumers over HTTP claim and record runs with the package's store: set")
		f.Comment("Store (cfg := OpsConfig(); cfg.Store = " + m.DBPackage + ".NewStore(db)) before ops.New.")
	}
	f.Func().Id("OpsConfig").Params().Add(op("Config")).Block(
		jen.Return(literal(op("Config"), fields...)),
	)
}
