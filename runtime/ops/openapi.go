package ops

import (
	"fmt"
	"math"
	"strings"

	"github.com/lockgen/lockgen/runtime/driver"
)

// OpenAPI returns the OpenAPI 3.1 description of the HTTP API (package
// lockgenapi) for this deployment, as a JSON-ready value: every endpoint,
// its parameters, bodies and answers, and for each declared job a push
// endpoint of its own whose body carries a JSON Schema of the job's
// arguments, so that openapi-generator makes typed clients in any
// language.
func (o *Ops) OpenAPI() map[string]any {
	ref := func(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }
	jsonBody := func(schema obj) obj {
		return obj{"content": obj{"application/json": obj{"schema": schema}}}
	}
	answer := func(desc string, schema obj) obj {
		return obj{"description": desc, "content": obj{"application/json": obj{"schema": schema}}}
	}
	errors := func(codes ...string) obj {
		out := obj{}
		for _, c := range codes {
			out[c] = obj{"$ref": "#/components/responses/Error"}
		}
		return out
	}
	query := func(name, desc string, schema obj) obj {
		return obj{"name": name, "in": "query", "required": false, "description": desc, "schema": schema}
	}
	path := func(name, desc string, schema obj) obj {
		return obj{"name": name, "in": "path", "required": true, "description": desc, "schema": schema}
	}
	str := obj{"type": "string"}
	limit := query("limit", "at most this many items", obj{"type": "integer", "minimum": 1, "maximum": MaxLimit, "default": DefaultLimit})
	after := query("after", "the next cursor of the previous page", str)
	runID := path("id", "the run's ID", obj{"type": "integer", "format": "int64", "minimum": 1})
	queueName := path("queue", "a declared queue", obj{"type": "string", "enum": o.queues})
	write := []any{obj{"bearer": []any{}}}
	open := []any{obj{}} // reads need no authority
	merge := func(a, b obj) obj {
		for k, v := range b {
			a[k] = v
		}
		return a
	}
	jobNames := make([]string, len(o.cfg.Jobs))
	for i, j := range o.cfg.Jobs {
		jobNames[i] = j.Name
	}

	paths := obj{
		"/api/v1/status": obj{"get": obj{"operationId": "getStatus", "security": open, "summary": "leaders, held locks, queues and schedules",
			"responses": merge(obj{"200": answer("the overview", ref("Status"))}, errors("400", "500"))}},
		"/api/v1/locks": obj{"get": obj{"operationId": "listLocks", "security": open, "summary": "held locks, in (lock, key) order",
			"parameters": []any{query("name", "only this lock", str), after, limit},
			"responses":  merge(obj{"200": answer("a page of held locks", ref("LockPage"))}, errors("400", "500"))}},
		"/api/v1/queues": obj{"get": obj{"operationId": "listQueues", "security": open, "summary": "the queues with their counts",
			"responses": merge(obj{"200": answer("the queues", obj{"type": "object", "properties": obj{"items": obj{"type": "array", "items": ref("Queue")}}})}, errors("400", "500"))}},
		"/api/v1/queues/{queue}/pause": obj{"post": obj{"operationId": "pauseQueue", "summary": "pause a queue on every node", "security": write,
			"parameters": []any{queueName},
			"responses":  merge(obj{"200": answer("the queue after the pause", ref("Queue"))}, errors("400", "401", "403", "500"))}},
		"/api/v1/queues/{queue}/resume": obj{"post": obj{"operationId": "resumeQueue", "summary": "resume a paused queue", "security": write,
			"parameters": []any{queueName},
			"responses":  merge(obj{"200": answer("the queue after the resume", ref("Queue"))}, errors("400", "401", "403", "500"))}},
		"/api/v1/runs": obj{"get": obj{"operationId": "listRuns", "security": open, "summary": "runs, newest first",
			"parameters": []any{
				query("job", "only runs of this job", obj{"type": "string", "enum": jobNames}),
				query("queue", "only runs of this queue", obj{"type": "string", "enum": o.queues}),
				query("state", "only runs in this state", obj{"type": "string", "enum": States}),
				after, limit},
			"responses": merge(obj{"200": answer("a page of runs", ref("RunPage"))}, errors("400", "500"))}},
		"/api/v1/runs/{id}": obj{"get": obj{"operationId": "getRun", "security": open, "summary": "one run with its arguments, history and attempts",
			"parameters": []any{runID},
			"responses":  merge(obj{"200": answer("the run", ref("Run"))}, errors("400", "404", "500"))}},
		"/api/v1/runs/{id}/cancel": obj{"post": obj{"operationId": "cancelRun", "summary": "cancel a due or running run (a running run's handler is told within a heartbeat)", "security": write,
			"parameters": []any{runID},
			"responses":  merge(obj{"200": answer("the cancelled run", ref("Run"))}, errors("400", "401", "403", "404", "409", "500"))}},
		"/api/v1/runs/{id}/retry": obj{"post": obj{"operationId": "retryRun", "summary": "make a discarded, orphaned or cancelled run due again", "security": write,
			"parameters": []any{runID},
			"responses":  merge(obj{"200": answer("the run, available", ref("Run"))}, errors("400", "401", "403", "404", "409", "500"))}},
		"/api/v1/runs/retry": obj{"post": obj{"operationId": "retryRuns", "summary": "make every finished run a filter selects due again", "security": write,
			"requestBody": merge(jsonBody(ref("RetryFilter")), obj{"required": true}),
			"responses":   merge(obj{"200": answer("how many runs were retried", ref("Retried"))}, errors("400", "401", "403", "413", "500"))}},
		"/api/v1/queues/{queue}/claim": obj{"post": obj{"operationId": "claimRuns", "security": write,
			"summary":     "consume: claim due runs of a queue, waiting up to wait for one (a long poll); each is leased to the worker until its deadline unless heartbeats extend it",
			"parameters":  []any{queueName},
			"requestBody": merge(jsonBody(ref("ClaimRequest")), obj{"required": true}),
			"responses":   merge(obj{"200": answer("the claimed runs, none when nothing was due within the wait", ref("ClaimedBatch"))}, errors("400", "401", "403", "413", "500", "503"))}},
		"/api/v1/runs/{id}/heartbeat": obj{"post": obj{"operationId": "heartbeatRun", "security": write,
			"summary":     "keep a claimed run: its lease ends lease after now; 409 when the claim is no longer current (code cancelled: an operator cancelled it), stop working on it then",
			"parameters":  []any{runID},
			"requestBody": merge(jsonBody(ref("HeartbeatRequest")), obj{"required": true}),
			"responses":   merge(obj{"200": answer("the lease's new end", ref("Heartbeated"))}, errors("400", "401", "403", "404", "409", "413", "500", "503"))}},
		"/api/v1/runs/{id}/complete": obj{"post": obj{"operationId": "completeRun", "security": write,
			"summary":     "a claimed attempt succeeded; 409 when the claim is no longer current",
			"parameters":  []any{runID},
			"requestBody": merge(jsonBody(ref("ClaimRef")), obj{"required": true}),
			"responses":   merge(obj{"200": answer("the completed run", ref("Run"))}, errors("400", "401", "403", "404", "409", "413", "500", "503"))}},
		"/api/v1/runs/complete": obj{"post": obj{"operationId": "completeRuns", "security": write,
			"summary":     fmt.Sprintf("1 to %d claimed attempts succeeded, recorded in one statement; the runs that no longer hold their claim are listed as conflicts, those whose rows another transaction held as busy", MaxClaim),
			"requestBody": merge(jsonBody(ref("ClaimRefBatch")), obj{"required": true}),
			"responses":   merge(obj{"200": answer("how many runs were completed, and the conflicts", ref("Completed"))}, errors("400", "401", "403", "413", "500", "503"))}},
		"/api/v1/runs/{id}/fail": obj{"post": obj{"operationId": "failRun", "security": write,
			"summary":     "a claimed attempt failed: retried after the job's backoff while attempts are left, failed for good with retry false, or snoozed; 409 when the claim is no longer current",
			"parameters":  []any{runID},
			"requestBody": merge(jsonBody(ref("FailRequest")), obj{"required": true}),
			"responses":   merge(obj{"200": answer("the run after the failure", ref("Run"))}, errors("400", "401", "403", "404", "409", "413", "500", "503"))}},
		"/api/v1/openapi.json": obj{"get": obj{"operationId": "getOpenAPI", "security": open, "summary": "this document",
			"responses": merge(obj{"200": answer("the OpenAPI document", obj{"type": "object"})}, errors("400"))}},
	}
	schemas := baseSchemas()
	for _, j := range o.cfg.Jobs {
		name := camel(j.Name)
		schemas[name+"Args"] = argsSchema(j)
		push := ref("Push")
		schemas[name+"Push"] = obj{"allOf": []any{push, obj{"type": "object", "properties": obj{"args": ref(name + "Args")}}}}
		paths["/api/v1/jobs/"+j.Name+"/runs"] = obj{"post": obj{"operationId": "push" + name, "summary": "enqueue a run of " + j.Name, "security": write,
			"requestBody": merge(jsonBody(ref(name+"Push")), obj{"required": true}),
			"responses": merge(obj{
				"201": answer("the new run", ref("Pushed")),
				"200": answer("the unfinished run of the job with the same unique key", ref("Pushed")),
			}, errors("400", "401", "403", "413", "500"))}}
		schemas[name+"PushBatch"] = obj{"type": "object", "additionalProperties": false, "required": []any{"runs"}, "properties": obj{
			"runs": obj{"type": "array", "minItems": 1, "maxItems": MaxPushBatch, "items": ref(name + "Push")}}}
		paths["/api/v1/jobs/"+j.Name+"/runs/batch"] = obj{"post": obj{"operationId": "pushMany" + name,
			"summary": fmt.Sprintf("enqueue 1 to %d runs of %s in one transaction (all or none)", MaxPushBatch, j.Name), "security": write,
			"requestBody": merge(jsonBody(ref(name+"PushBatch")), obj{"required": true}),
			"responses": merge(obj{
				"201": answer("each run, in the order given: new, or the unfinished run with the same unique key", ref("PushedBatch")),
			}, errors("400", "401", "403", "413", "500"))}}
	}
	return obj{
		"openapi": "3.1.0",
		"servers": []any{obj{"url": "/", "description": "the server that answered this document"}},
		"info": obj{"title": "lockgen", "version": "1",
			"description": "Operate a lockgen deployment: its leaders, held locks, queues, schedules and runs. Writes need a bearer token."},
		"paths": paths,
		"components": obj{
			"schemas": schemas,
			"responses": obj{"Error": answer("the request was refused; nothing was written",
				obj{"type": "object", "required": []any{"error"}, "properties": obj{"error": ref("Error")}})},
			"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer", "description": "the server's write token"}},
		},
	}
}

type obj = map[string]any

// camel turns a job name (send_receipt) into an identifier (SendReceipt).
func camel(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// argsSchema is the JSON Schema of a job's arguments, as Push checks them.
func argsSchema(j Job) obj {
	props := obj{}
	for _, a := range j.Args {
		props[a.Name] = argSchema(a.Type)
	}
	return obj{"type": "object", "properties": props, "additionalProperties": false,
		"description": "the arguments of " + j.Name + "; a missing one is its type's zero value"}
}

func argSchema(typ string) obj {
	switch typ {
	case "int64":
		return obj{"type": "integer", "format": "int64"}
	case "int32":
		return obj{"type": "integer", "format": "int32", "minimum": math.MinInt32, "maximum": math.MaxInt32}
	case "string":
		return obj{"type": "string"}
	case "bool":
		return obj{"type": "boolean"}
	case "float64":
		return obj{"type": "number", "format": "double"}
	case "time":
		return obj{"type": "string", "format": "date-time"}
	case "duration":
		return obj{"oneOf": []any{
			obj{"type": "integer", "description": "nanoseconds"},
			obj{"type": "string", "description": `a Go duration such as "1m30s"`},
		}}
	case "[]string":
		return obj{"type": []any{"array", "null"}, "items": obj{"type": "string"}}
	}
	return obj{"description": "any JSON value: the application's own type decodes it"}
}

// baseSchemas are the documents every deployment's API answers.
func baseSchemas() obj {
	str, i64, integer, boolean := obj{"type": "string"}, obj{"type": "integer", "format": "int64"}, obj{"type": "integer"}, obj{"type": "boolean"}
	when := obj{"type": "string", "format": "date-time"}
	ref := func(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }
	list := func(item obj) obj { return obj{"type": "array", "items": item} }
	object := func(required []any, props obj) obj {
		return obj{"type": "object", "required": required, "properties": props}
	}
	return obj{
		"Error": object([]any{"code", "message"}, obj{"code": obj{"type": "string",
			"enum": []any{"invalid", "not_found", "conflict", "cancelled", "forbidden", "unauthorized", "method_not_allowed", "unavailable", "internal"}},
			"field": str, "message": str}),
		"Holding": object([]any{"lock", "key", "owner", "token", "acquired_at"}, obj{"lock": str, "key": str, "owner": str, "token": i64,
			"strategy": str, "acquired_at": when, "expires_at": when, "time_left_ms": i64,
			"waiters": obj{"type": "integer", "format": "int64", "description": "sessions waiting on the server for this holding; absent when the server cannot tell (see waiters_unseen)"}}),
		"LockSummary": object([]any{"name", "strategy", "keyed", "leader", "held", "exact"}, obj{"name": str, "strategy": str,
			"keyed": boolean, "leader": boolean, "wait_on_server": boolean, "held": i64, "exact": boolean}),
		"LockPage": object([]any{"items"}, obj{"items": list(ref("Holding")), "next": str,
			"waiters_unseen": obj{"type": "array", "items": str, "description": "whose waiters the server could not tell on this page, and how to make them visible"}}),
		"Counts": object([]any{"due", "scheduled", "retrying", "running", "orphaned", "discarded", "exact"}, obj{"due": i64, "scheduled": i64,
			"retrying": i64, "running": i64, "orphaned": i64, "discarded": i64, "exact": boolean}),
		"Queue": object([]any{"name", "paused", "declared", "counts"}, obj{"name": str, "paused": boolean, "paused_at": when,
			"declared": boolean, "counts": ref("Counts")}),
		"Schedule": object([]any{"job", "cron", "next"}, obj{"job": str, "cron": str, "timezone": str, "next": when,
			"last_tick": when, "last_state": str, "last_run": i64}),
		"Status": object([]any{"time", "leaders", "locks", "queues", "schedules"}, obj{"time": when, "leaders": list(ref("Holding")),
			"locks": list(ref("LockSummary")), "queues": list(ref("Queue")), "schedules": list(ref("Schedule"))}),
		"Run": object([]any{"id", "job", "queue", "state", "priority", "run_at", "attempt", "max_attempts", "created_at"}, obj{
			"id": i64, "job": str, "queue": str, "state": obj{"type": "string", "enum": States}, "priority": integer,
			"run_at": when, "scheduled_at": when, "attempt": integer, "max_attempts": integer, "worker": str, "deadline": when,
			"created_at": when, "finished_at": when, "unique_key": str, "last_error": str,
			"args": obj{"description": "the run's JSON arguments (GET /api/v1/runs/{id} only)"}, "claim": i64, "timeout_ms": i64,
			"history":  obj{"description": "the run's state changes, oldest first, the newest 50 kept (GET /api/v1/runs/{id} only)", "type": "array", "items": ref("HistoryEntry")},
			"attempts": obj{"description": "the run's attempts, read from its history (GET /api/v1/runs/{id} only)", "type": "array", "items": ref("Attempt")},
			"headers":  obj{"description": "the run's headers as its producer set them (GET /api/v1/runs/{id} only)", "$ref": "#/components/schemas/Headers"}}),
		"Headers": obj{"type": "object", "maxProperties": driver.MaxHeaders, "additionalProperties": obj{"type": "string"},
			"description": fmt.Sprintf("string headers that travel with a run to each attempt, at most %d bytes of names and values: a W3C traceparent (and tracestate) here links the attempts' spans to the producer's", driver.MaxHeadersBytes)},
		"HistoryEntry": object([]any{"at", "event", "attempt"}, obj{
			"at": when, "event": obj{"type": "string", "enum": historyEvents}, "attempt": integer, "worker": str, "error": str}),
		"Attempt": object([]any{"attempt", "started_at", "outcome"}, obj{
			"attempt": integer, "worker": str, "started_at": when, "finished_at": when,
			"outcome": obj{"type": "string", "enum": attemptOutcomes}, "error": str}),
		"RunPage": object([]any{"items"}, obj{"items": list(ref("Run")), "next": str}),
		"Push": obj{"type": "object", "additionalProperties": false, "properties": obj{
			"args":         obj{"type": "object"},
			"delay":        obj{"type": "string", "description": `a Go duration such as "30s"; not with run_at`},
			"run_at":       when,
			"priority":     obj{"type": "integer", "minimum": -100, "maximum": 100},
			"max_attempts": obj{"type": "integer", "minimum": 1},
			"unique_key":   obj{"type": "string", "maxLength": 191},
			"headers":      ref("Headers"),
		}},
		"RetryFilter": obj{"type": "object", "additionalProperties": false, "required": []any{"state"}, "properties": obj{
			"job": str, "queue": str, "state": obj{"type": "string", "enum": retryStates},
			"finished_after": when, "finished_before": when,
		}},
		"Retried": object([]any{"retried", "skipped_unique_key", "more"}, obj{"retried": i64, "skipped_unique_key": i64, "more": boolean}),
		"Pushed":  object([]any{"id", "existing"}, obj{"id": i64, "existing": boolean}),
		"ClaimRequest": obj{"type": "object", "additionalProperties": false, "required": []any{"worker"}, "properties": obj{
			"worker": obj{"type": "string", "minLength": 1, "maxLength": MaxWorker, "description": "the consumer, recorded with the runs: name its host and process"},
			"limit":  obj{"type": "integer", "minimum": 1, "maximum": MaxClaim, "default": 1},
			"wait":   obj{"type": "string", "description": fmt.Sprintf("a Go duration up to %v: wait this long for a due run when none is", MaxWait)},
			"lease":  obj{"type": "string", "description": fmt.Sprintf("a Go duration from %v to %v (default %v): how long the claim holds without a heartbeat", MinLease, MaxLease, DefaultLease)},
		}},
		"Claimed": object([]any{"id", "job", "queue", "args", "attempt", "max_attempts", "claim", "deadline", "lease_ms", "timeout", "timeout_ms", "run_at", "created_at"}, obj{
			"id": i64, "job": str, "queue": str, "args": obj{"description": "the run's JSON arguments"}, "priority": integer,
			"attempt": integer, "max_attempts": integer, "claim": i64,
			"deadline":   obj{"type": "string", "format": "date-time", "description": "when the lease ends by the database clock unless a heartbeat extends it"},
			"timeout":    obj{"type": "string", "description": "the attempt's time limit, a Go duration"},
			"lease_ms":   obj{"type": "integer", "format": "int64", "description": "how long the lease lasts, at least, from when the server received the request: work on the run until the time you sent it plus lease_ms (less a margin), unless a heartbeat extends it"},
			"timeout_ms": i64, "scheduled_at": when, "run_at": when, "created_at": when, "headers": ref("Headers")}),
		"ClaimedBatch": object([]any{"items"}, obj{"items": list(ref("Claimed"))}),
		"ClaimRef":     obj{"type": "object", "additionalProperties": false, "required": []any{"claim"}, "properties": obj{"claim": i64}},
		"ClaimRefBatch": obj{"type": "object", "additionalProperties": false, "required": []any{"runs"}, "properties": obj{
			"runs": obj{"type": "array", "minItems": 1, "maxItems": MaxClaim, "items": obj{"type": "object", "additionalProperties": false,
				"required": []any{"id", "claim"}, "properties": obj{"id": i64, "claim": i64}}}}},
		"Completed": object([]any{"completed", "conflicts", "busy"}, obj{"completed": i64, "conflicts": list(object([]any{"id", "state", "claim"},
			obj{"id": i64, "state": str, "claim": i64})),
			"busy": obj{"type": "array", "description": "attempts not recorded because another transaction held their runs' rows: complete them again in a moment",
				"items": object([]any{"id", "claim"}, obj{"id": i64, "claim": i64})}}),
		"HeartbeatRequest": obj{"type": "object", "additionalProperties": false, "required": []any{"claim"}, "properties": obj{
			"claim": i64, "lease": obj{"type": "string", "description": "a Go duration: the new lease from now"}}},
		"Heartbeated": object([]any{"id", "claim", "deadline", "lease_ms"}, obj{"id": i64, "claim": i64, "deadline": when,
			"lease_ms": obj{"type": "integer", "format": "int64", "description": "the new lease from when the server received the heartbeat: work on until the time you sent it plus lease_ms"}}),
		"FailRequest": obj{"type": "object", "additionalProperties": false, "required": []any{"claim"}, "properties": obj{
			"claim":  i64,
			"error":  obj{"type": "string", "description": "what went wrong, kept with the run"},
			"retry":  obj{"type": "boolean", "default": true, "description": "false fails the run for good"},
			"snooze": obj{"type": "string", "description": "a Go duration: give the run back, due after it, without counting the attempt (not with error or retry)"},
		}},
		"PushedBatch": object([]any{"items"}, obj{"items": list(ref("Pushed"))}),
	}
}
