package generator

import (
	"encoding/json"
	"fmt"
	"path"

	"github.com/lockgen/lockgen/generator/spec"
	"github.com/lockgen/lockgen/runtime/ops"
	"github.com/lockgen/lockgen/templates"
)

// openAPIFile is the OpenAPI description of the HTTP API (lockgenapi and
// `lockgen serve`) for the spec, written beside the wrappers, from which
// openapi-generator makes typed clients in other languages.
const openAPIFile = "openapi.json"

// OpsConfig is what the operations layer (runtime/ops) needs of s: its
// locks, jobs and queues; the lockgen CLI's operator commands and `lockgen
// serve` use it, as the generated OpsConfig does in an application.
func OpsConfig(s *spec.Spec) ops.Config {
	cfg := ops.Config{TablePrefix: s.TablePrefix}
	for _, l := range s.Locks {
		cfg.Locks = append(cfg.Locks, ops.Lock{Name: l.Name, Strategy: l.Strategy, Keyed: l.Key != nil, Leader: l.Leader,
			WaitOnServer: l.WaitMode == spec.WaitModeServer})
	}
	for _, j := range s.Jobs {
		job := ops.Job{Name: j.Name, Queue: j.Queue, Schedule: j.Schedule, Timezone: j.Timezone,
			MaxAttempts: j.MaxAttempts, Timeout: j.Timeout, Priority: j.Priority}
		if j.BackoffInitial != spec.DefaultBackoffInitial || j.BackoffMax != spec.DefaultBackoffMax {
			job.BackoffInitial, job.BackoffMax = j.BackoffInitial, j.BackoffMax
		}
		for _, a := range j.Args {
			job.Args = append(job.Args, ops.Arg{Name: a.Name, Type: a.Type})
		}
		cfg.Jobs = append(cfg.Jobs, job)
	}
	for _, q := range s.Queues {
		cfg.Queues = append(cfg.Queues, q.Name)
	}
	return cfg
}

// openAPI renders openapi.json for cfg into the package directory outDir:
// the document GET /api/v1/openapi.json answers, plus "x-generated" (the
// generated-code header, which JSON has no comment for), indented, keys
// sorted, so the same spec gives the same bytes.
func openAPI(cfg ops.Config, outDir string) (string, []byte, error) {
	doc, err := ops.OpenAPI(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("render %s: %w", openAPIFile, err)
	}
	doc["x-generated"] = templates.Header
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", nil, fmt.Errorf("render %s: %w", openAPIFile, err)
	}
	return path.Join(outDir, openAPIFile), append(b, '\n'), nil
}
