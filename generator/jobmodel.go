package generator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/generator/spec"
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
	// External is true for a job of an external queue: handled outside Go,
	// so JobHandlers has no method for it.
	External bool
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
		for _, q := range s.Queues {
			jm.External = jm.External || (q.Name == j.Queue && q.External)
		}
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

// jobQueues are the queues the declared jobs use, sorted: the only names
// PauseQueue and ResumeQueue accept.
func (m *model) jobQueues() []string {
	var qs []string
	for _, j := range m.Jobs {
		if !slices.Contains(qs, j.Queue) {
			qs = append(qs, j.Queue)
		}
	}
	slices.Sort(qs)
	return qs
}

// quoted puts each name in double quotes, for doc text.
func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
