package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// badSpec is a spec Load must reject, with every error it must report, in
// order.
type badSpec struct {
	name string
	yaml string
	want []string
}

// badSpecs are also the seeds of FuzzLoad.
var badSpecs = []badSpec{
	// Documents.
	{
		name: "empty file",
		yaml: "",
		want: []string{"lockgen.yaml:1:1: the spec is empty (start with version: 1, then package and locks)"},
	},
	{
		name: "only comments",
		yaml: "# lockgen spec\n# nothing yet\n",
		want: []string{"lockgen.yaml:1:1: the spec is empty (start with version: 1, then package and locks)"},
	},
	{
		name: "null document",
		yaml: "---\n",
		want: []string{"lockgen.yaml:1:1: the spec is empty (start with version: 1, then package and locks)"},
	},
	{
		name: "syntax error with line",
		yaml: "version: 1\npackage: locks\nlocks: [\n",
		want: []string{"lockgen.yaml:3:1: invalid YAML: did not find expected node content (check the indentation, quoting and brackets on this line and the one before it)"},
	},
	{
		name: "syntax error without line",
		yaml: "version: 1: 2\n",
		want: []string{"lockgen.yaml:1:1: invalid YAML: mapping values are not allowed in this context (check the indentation, quoting and brackets on this line and the one before it)"},
	},
	{
		name: "bad indentation",
		yaml: "version: 1\n package: locks\n",
		want: []string{"lockgen.yaml:2:2: invalid YAML: mapping values are not allowed in this context (this line is indented by 1 space, the blocks above it by 0 (line 1): YAML nests by indentation, so indent it like one of them)"},
	},
	{
		// yaml.v3 says "line 3" (the list's start, counted from 0).
		name: "key indented less than its siblings",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n   renew_every: 1s\n",
		want: []string{"lockgen.yaml:6:4: invalid YAML: did not find expected '-' indicator (this line is indented by 3 spaces, the blocks above it by 4 (line 5), 2 (line 4) and 0 (line 3): YAML nests by indentation, so indent it like one of them)"},
	},
	{
		name: "key indented more than its siblings",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n      renew_every: 1s\n",
		want: []string{"lockgen.yaml:6:7: invalid YAML: mapping values are not allowed in this context (this line is indented by 6 spaces, the blocks above it by 4 (line 5), 2 (line 4) and 0 (line 3): YAML nests by indentation, so indent it like one of them)"},
	},
	{
		name: "key lined up with a list item's dash",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n  renew_every: 1s\n",
		want: []string{`lockgen.yaml:6:3: invalid YAML: did not find expected '-' indicator (this line lines up with the "- " of the list item on line 4: indent it by 4 spaces to add it to that item, or start a new item with "- ")`},
	},
	{
		// yaml.v3 says "line 6", the comment before it: the line counted from 0.
		name: "mis-indented key after a comment and a blank line",
		yaml: "version: 1\npackage: locks\nmigrations:\n  dir: m\n\n  # the format\n format: goose\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{"lockgen.yaml:7:2: invalid YAML: did not find expected key (this line is indented by 1 space, the blocks above it by 2 (line 4) and 0 (line 3): YAML nests by indentation, so indent it like one of them)"},
	},
	{
		name: "tab indentation",
		yaml: "version: 1\npackage: locks\nlocks:\n\t- name: master\n",
		want: []string{"lockgen.yaml:4:1: invalid YAML: found character that cannot start any token (YAML does not allow tabs for indentation; indent with spaces)"},
	},
	{
		name: "unknown anchor",
		yaml: "version: 1\npackage: *pkg\n",
		want: []string{"lockgen.yaml:2:10: invalid YAML: unknown anchor 'pkg' referenced (an alias *pkg repeats a value marked &pkg earlier in the file; mark one, or write the value out)"},
	},
	{
		name: "two documents",
		yaml: "version: 1\npackage: locks\nlocks: [{name: master, ttl: 3s}]\n---\nversion: 1\n",
		want: []string{"lockgen.yaml:4:1: the spec must be a single YAML document (remove the --- line and everything after it)"},
	},
	{
		name: "syntax error in second document",
		yaml: "version: 1\npackage: locks\nlocks: [{name: master, ttl: 3s}]\n---\n[\n",
		want: []string{"lockgen.yaml:5:1: invalid YAML: did not find expected node content (check the indentation, quoting and brackets on this line and the one before it)"},
	},
	{
		name: "top level is a list",
		yaml: "- version: 1\n",
		want: []string{"lockgen.yaml:1:1: the top level of the spec must be a mapping, not a list (e.g. version: 1)"},
	},
	{
		name: "top level is a value",
		yaml: "# spec\nlocks\n",
		want: []string{"lockgen.yaml:2:1: the top level of the spec must be a mapping, not a single value (e.g. version: 1)"},
	},

	// Top-level keys.
	{
		name: "missing required keys",
		yaml: "out: internal/locks\n",
		want: []string{
			`lockgen.yaml:1:1: missing required key "version" (add it, e.g. version: 1)`,
			`lockgen.yaml:1:1: missing required key "package" (add it, e.g. package: locks)`,
			`lockgen.yaml:1:1: missing required key "locks" (add it, e.g. locks: [{name: master, ttl: 3s}])`,
		},
	},
	{
		name: "misspelled top-level key",
		yaml: "version: 1\npakage: locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{
			`lockgen.yaml:1:1: missing required key "package" (add it, e.g. package: locks)`,
			`lockgen.yaml:2:1: unknown key "pakage" (did you mean "package"?)`,
		},
	},
	{
		name: "unknown top-level key without a close match",
		yaml: "version: 1\npackage: locks\ndatabase: mysql\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:1: unknown key "database" (valid keys: version, package, out, migrations, table_prefix, locks, queues, jobs)`},
	},
	{
		name: "duplicate top-level key",
		yaml: "version: 1\npackage: locks\npackage: other\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:1: duplicate key "package" (it is first set at line 2; remove one of them)`},
	},
	{
		name: "key that is not a name",
		yaml: "version: 1\npackage: locks\n? [a, b]\n: c\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:3: a key must be a plain name, not a list (valid keys: version, package, out, migrations, table_prefix, locks, queues, jobs)`},
	},
	{
		name: "merge key",
		yaml: "version: 1\npackage: locks\nlocks:\n  - &base {name: master, ttl: 3s}\n  - <<: *base\n    name: other\n",
		want: []string{
			`lockgen.yaml:5:5: merge keys (<<) are not supported (write the keys out in full)`,
			`lockgen.yaml:5:5: missing required key "ttl" (add it, e.g. ttl: 3s; only strategy row has none)`,
		},
	},
	{
		name: "version 2",
		yaml: "version: 2\npackage: locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:1:10: unsupported version 2 (lockgen knows only version: 1)`},
	},
	{
		name: "version as a string",
		yaml: "version: \"1\"\npackage: locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:1:10: version must be a whole number, not "1" (write version: 1, without quotes)`},
	},
	{
		name: "version as a list",
		yaml: "version: [1]\npackage: locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:1:10: version must be a single value, not a list (e.g. version: 1)`},
	},
	{
		name: "package not lower case",
		yaml: "version: 1\npackage: Locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:2:10: package "Locks" is not a lower-case Go package name (use a short lower-case name such as locks)`},
	},
	{
		name: "package is a Go keyword",
		yaml: "version: 1\npackage: func\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:2:10: package "func" is a Go keyword (use a short lower-case name such as locks)`},
	},
	{
		name: "package main",
		yaml: "version: 1\npackage: main\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:2:10: package main cannot be imported (generated code is a library; use a short lower-case name such as locks)`},
	},
	{
		name: "package for tests",
		yaml: "version: 1\npackage: locks_test\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:2:10: package "locks_test" ends in _test, which is reserved for test packages (use a short lower-case name such as locks)`},
	},
	{
		name: "package without a value",
		yaml: "version: 1\npackage:\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:2:9: package has no value (e.g. package: locks)`},
	},
	{
		name: "absolute out",
		yaml: "version: 1\npackage: locks\nout: /src/locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:6: out "/src/locks" is an absolute path (use a path relative to the spec file's directory, e.g. internal/locks)`},
	},
	{
		name: "windows absolute out",
		yaml: "version: 1\npackage: locks\nout: C:/src/locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:6: out "C:/src/locks" is an absolute path (use a path relative to the spec file's directory, e.g. internal/locks)`},
	},
	{
		name: "out escaping with ..",
		yaml: "version: 1\npackage: locks\nout: internal/../../locks\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:6: out "internal/../../locks" is outside the spec file's directory (use a path relative to the spec file's directory, e.g. internal/locks)`},
	},
	{
		name: "out with backslashes",
		yaml: "version: 1\npackage: locks\nout: 'internal\\locks'\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:6: out "internal\\locks" contains a backslash (use forward slashes, e.g. internal/locks)`},
	},
	{
		name: "empty out",
		yaml: "version: 1\npackage: locks\nout: \"\"\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:6: out is empty (use a path relative to the spec file's directory, e.g. internal/locks)`},
	},
	{
		name: "bad migrations",
		yaml: "version: 1\npackage: locks\nmigrations:\n  dir: ..\n  format: flyway\n  formt: goose\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{
			`lockgen.yaml:4:8: migrations.dir ".." is outside the spec file's directory (use a path relative to the spec file's directory, e.g. db/migrations)`,
			`lockgen.yaml:5:11: unknown migrations format "flyway" (supported formats: golang-migrate, goose)`,
			`lockgen.yaml:6:3: unknown key "formt" (did you mean "format"?)`,
		},
	},
	{
		name: "misspelled migrations format",
		yaml: "version: 1\npackage: locks\nmigrations: {format: golang_migrate}\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:22: unknown migrations format "golang_migrate" (did you mean "golang-migrate"?)`},
	},
	{
		name: "migrations is a value",
		yaml: "version: 1\npackage: locks\nmigrations: db/migrations\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:13: migrations must be a mapping, not a single value (e.g. migrations: {dir: migrations, format: golang-migrate})`},
	},
	{
		name: "migrations dir is a list",
		yaml: "version: 1\npackage: locks\nmigrations: {dir: [a, b]}\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:19: migrations.dir must be a single value, not a list (e.g. dir: db/migrations)`},
	},
	{
		name: "table prefix not an SQL identifier",
		yaml: "version: 1\npackage: locks\ntable_prefix: Lock-\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:15: table_prefix "Lock-" is not a lower-case SQL identifier (use lower-case letters, digits and underscores, starting with a letter, e.g. lockgen_)`},
	},
	{
		name: "table prefix too long",
		yaml: "version: 1\npackage: locks\ntable_prefix: a_very_long_table_prefix_for_lockgen_\nlocks: [{name: master, ttl: 3s}]\n",
		want: []string{`lockgen.yaml:3:15: table_prefix is 37 characters long, the maximum is 30 (table names must fit in 64 characters; shorten it)`},
	},

	// Locks.
	{
		name: "locks empty",
		yaml: "version: 1\npackage: locks\nlocks: []\n",
		want: []string{`lockgen.yaml:3:8: locks is empty (declare at least one, e.g. locks: [{name: master, ttl: 3s}])`},
	},
	{
		name: "locks without a value",
		yaml: "version: 1\npackage: locks\nlocks:\n",
		want: []string{`lockgen.yaml:3:7: locks has no value (e.g. locks: [{name: master, ttl: 3s}])`},
	},
	{
		name: "locks is a mapping",
		yaml: "version: 1\npackage: locks\nlocks:\n  master: {ttl: 3s}\n",
		want: []string{`lockgen.yaml:4:3: locks must be a list, not a mapping (e.g. locks: [{name: master, ttl: 3s}])`},
	},
	{
		name: "lock is a value",
		yaml: "version: 1\npackage: locks\nlocks:\n  - master\n",
		want: []string{`lockgen.yaml:4:5: each lock must be a mapping, not a single value (e.g. - {name: master, ttl: 3s})`},
	},
	{
		name: "misspelled lock key",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    tll: 3s\n",
		want: []string{
			`lockgen.yaml:4:5: missing required key "ttl" (add it, e.g. ttl: 3s; only strategy row has none)`,
			`lockgen.yaml:5:5: unknown key "tll" (did you mean "ttl"?)`,
		},
	},
	{
		name: "lock key in the wrong case",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    renewEvery: 1s\n",
		want: []string{`lockgen.yaml:6:5: unknown key "renewEvery" (did you mean "renew_every"?)`},
	},
	{
		name: "unknown lock key without a close match",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    owner: me\n",
		want: []string{`lockgen.yaml:6:5: unknown key "owner" (valid keys: name, strategy, ttl, renew_every, wait, key, leader, wait_mode, idle_timeout)`},
	},
	{
		name: "unknown wait_mode",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: master, ttl: 3s, wait: 5s, wait_mode: serve}\n",
		want: []string{`lockgen.yaml:4:50: unknown wait_mode "serve" (did you mean "server"?)`},
	},
	{
		name: "wait_mode on a session lock",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: master, strategy: session, ttl: 3s, wait: 5s, wait_mode: poll}\n",
		want: []string{`lockgen.yaml:4:58: a session lock always waits on the server; wait_mode is for strategy lease (remove wait_mode)`},
	},
	{
		name: "wait_mode on a row lock",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: master, strategy: row, wait_mode: server}\n",
		want: []string{`lockgen.yaml:4:35: a row lock always waits on the server; wait_mode is for strategy lease (remove wait_mode)`},
	},
	{
		name: "wait_mode server for a lock nobody waits for",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: master, ttl: 3s, wait_mode: server}\n",
		want: []string{`lockgen.yaml:4:29: wait_mode server without wait or leader: nobody waits for this lock, so its holdings would pin a connection for nothing (add wait (e.g. wait: 5s) or remove wait_mode)`},
	},
	{
		name: "a job's Enqueue method equals a lock's",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: enqueue_report, ttl: 3s, leader: true}\njobs:\n  - name: report_leader\n",
		want: []string{`lockgen.yaml:6:5: job "report_leader" and lock "enqueue_report" both generate the method EnqueueReportLeader (rename one of them)`},
	},
	{
		name: "duplicate lock key",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    ttl: 5s\n",
		want: []string{`lockgen.yaml:6:5: duplicate key "ttl" (it is first set at line 5; remove one of them)`},
	},
	{
		name: "empty lock",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {}\n",
		want: []string{
			`lockgen.yaml:4:5: missing required key "name" (add it, e.g. name: master)`,
			`lockgen.yaml:4:5: missing required key "ttl" (add it, e.g. ttl: 3s; only strategy row has none)`,
		},
	},
	{
		name: "lock name not snake_case",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: sendSMS\n    ttl: 3s\n  - name: send-sms\n    ttl: 3s\n  - name: send__sms\n    ttl: 3s\n  - name: 2fa\n    ttl: 3s\n",
		want: []string{
			`lockgen.yaml:4:11: lock name "sendSMS" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: master)`,
			`lockgen.yaml:6:11: lock name "send-sms" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: master)`,
			`lockgen.yaml:8:11: lock name "send__sms" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: master)`,
			`lockgen.yaml:10:11: lock name "2fa" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: master)`,
		},
	},
	{
		name: "lock name is a number",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: 123\n    ttl: 3s\n",
		want: []string{`lockgen.yaml:4:11: lock name "123" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: master)`},
	},
	{
		name: "lock name too long",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: " + strings.Repeat("a", 65) + "\n    ttl: 3s\n",
		want: []string{`lockgen.yaml:4:11: lock name is 65 characters long, the maximum is 64 (shorten it)`},
	},
	{
		name: "duplicate lock name",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n  - name: master\n    ttl: 5s\n",
		want: []string{`lockgen.yaml:6:11: duplicate lock name "master" (it is first declared at line 4; lock names must be unique)`},
	},
	{
		name: "lock names colliding in Go",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: user_id\n    ttl: 3s\n  - {name: user_i_d, ttl: 3s}\n",
		want: []string{`lockgen.yaml:6:12: lock names "user_id" and "user_i_d" are both UserID in Go ("user_id" is at line 4; rename one of them)`},
	},
	{
		name: "idle_timeout on a lease lock",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    ttl: 3s\n    idle_timeout: 30s\n",
		want: []string{`lockgen.yaml:6:5: idle_timeout is for strategy row (how long the server keeps an idle holding's session), not strategy lease (remove idle_timeout: a lease ends with its ttl)`},
	},
	{
		name: "idle_timeout out of range",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: a, strategy: row, idle_timeout: 500ms}\n  - {name: b, strategy: row, idle_timeout: 25h}\n  - {name: c, strategy: row, idle_timeout: 2500ms}\n",
		want: []string{
			`lockgen.yaml:4:44: idle_timeout 500ms is shorter than the server's smallest wait_timeout, 1s (use at least 1s, e.g. idle_timeout: 1m)`,
			`lockgen.yaml:5:44: idle_timeout 25h is longer than the maximum of 24h (use at most 24h)`,
			`lockgen.yaml:6:44: idle_timeout 2500ms is not whole seconds: the server's wait_timeout counts whole seconds (use whole seconds, e.g. 3s)`,
		},
	},
	{
		name: "row lock with ttl and renew_every",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    ttl: 3s\n    renew_every: 1s\n    strategy: row\n",
		want: []string{
			`lockgen.yaml:5:5: strategy row takes no ttl (remove ttl: the server holds a row lock for as long as the holding's transaction, with no lease to renew)`,
			`lockgen.yaml:6:5: strategy row takes no renew_every (remove renew_every: the server holds a row lock for as long as the holding's transaction, with no lease to renew)`,
		},
	},
	{
		name: "row lock as leader",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    strategy: row\n    leader: true\n",
		want: []string{
			`lockgen.yaml:6:5: a row lock cannot be a leader: the server frees it before the old leader learns it lost it, so two leaders could run at once (leader election needs strategy lease; remove strategy or leader)`,
		},
	},
	{
		name: "row lock with a bad wait",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    strategy: row\n    wait: -1s\n",
		want: []string{
			`lockgen.yaml:6:11: wait must not be negative, not -1s (use 0 to try once, or e.g. wait: 5s)`,
		},
	},
	{
		name: "unknown strategy",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    strategy: mutex\n  - name: order\n    ttl: 3s\n    strategy: leese\n",
		want: []string{
			`lockgen.yaml:6:15: unknown strategy "mutex" (valid strategies: lease, session, row)`,
			`lockgen.yaml:9:15: unknown strategy "leese" (did you mean "lease"?)`,
		},
	},
	{
		name: "unknown strategy close to session",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: master, ttl: 3s, strategy: sesion}\n",
		want: []string{`lockgen.yaml:4:39: unknown strategy "sesion" (did you mean "session"?)`},
	},
	{
		name: "leader on a keyed lock",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    ttl: 3s\n    leader: true\n    key: {name: order_id, type: int64}\n  - {name: shard, leader: true, key: {name: id, type: string}, ttl: 3s}\n",
		want: []string{
			`lockgen.yaml:6:5: a keyed lock cannot be a leader (leader election needs an unkeyed lock; remove key or leader)`,
			`lockgen.yaml:8:19: a keyed lock cannot be a leader (leader election needs an unkeyed lock; remove key or leader)`,
		},
	},
	{
		name: "leader on a session lock",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    strategy: session\n    ttl: 3s\n    leader: true\n",
		want: []string{
			`lockgen.yaml:7:5: a session lock cannot be a leader: the server frees it before the old leader learns it lost it, so two leaders could run at once (leader election needs strategy lease; remove strategy or leader)`,
		},
	},
	{
		name: "leader methods clash with another lock's",
		yaml: "version: 1\npackage: locks\nlocks:\n  - {name: master, ttl: 3s, leader: true}\n  - {name: is_master, ttl: 3s, leader: true}\n  - {name: x_lock_holder, ttl: 3s, leader: true}\n  - {name: run_as_x, ttl: 3s}\n  - {name: master_leader, ttl: 3s, leader: true}\n",
		want: []string{
			`lockgen.yaml:5:12: locks "master" and "is_master" both generate the method IsMasterLeader ("master" is at line 4; rename one of them)`,
			`lockgen.yaml:7:12: locks "x_lock_holder" and "run_as_x" both generate the method RunAsXLockHolder ("x_lock_holder" is at line 6; rename one of them)`,
		},
	},
	{
		name: "leader not a boolean",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    leader: yes\n  - name: order\n    ttl: 3s\n    leader: \"false\"\n",
		want: []string{
			`lockgen.yaml:6:13: leader must be true or false, not "yes" (e.g. leader: true)`,
			`lockgen.yaml:9:13: leader must be true or false, not "false" (e.g. leader: true)`,
		},
	},

	// Durations.
	{
		name: "ttl not a duration",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3 seconds\n",
		want: []string{`lockgen.yaml:5:10: ttl "3 seconds" is not a duration (use a Go duration such as 500ms, 3s or 1m30s)`},
	},
	{
		name: "ttl without unit",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3\n",
		want: []string{`lockgen.yaml:5:10: ttl 3 has no unit (add a unit, e.g. ttl: 3s)`},
	},
	{
		name: "ttl zero and negative",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 0s\n  - name: order\n    ttl: -3s\n",
		want: []string{
			`lockgen.yaml:5:10: ttl must be positive, not 0s (e.g. ttl: 3s)`,
			`lockgen.yaml:7:10: ttl must be positive, not -3s (e.g. ttl: 3s)`,
		},
	},
	{
		name: "ttl out of range",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 99ms\n  - name: order\n    ttl: 24h1s\n",
		want: []string{
			`lockgen.yaml:5:10: ttl 99ms is shorter than the minimum of 100ms (a lease must outlast a database round trip; use at least 100ms)`,
			`lockgen.yaml:7:10: ttl 24h1s is longer than the maximum of 24h (a crashed holder keeps the lock for a whole ttl; use at most 24h)`,
		},
	},
	{
		name: "ttl is a list",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: [3s]\n",
		want: []string{`lockgen.yaml:5:10: ttl must be a single value, not a list (e.g. ttl: 3s)`},
	},
	{
		name: "renew_every not shorter than ttl - ttl/10",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    renew_every: 3s\n  - name: order\n    ttl: 3s\n    renew_every: 1m\n  - name: tight\n    ttl: 3s\n    renew_every: 2.7s\n",
		want: []string{
			`lockgen.yaml:6:18: renew_every 3s must be shorter than ttl - ttl/10 (2.7s): a lease counts as lost ttl/10 before it expires (remove it to renew every ttl/3, which is 1s)`,
			`lockgen.yaml:9:18: renew_every 1m must be shorter than ttl - ttl/10 (2.7s): a lease counts as lost ttl/10 before it expires (remove it to renew every ttl/3, which is 1s)`,
			`lockgen.yaml:12:18: renew_every 2.7s must be shorter than ttl - ttl/10 (2.7s): a lease counts as lost ttl/10 before it expires (remove it to renew every ttl/3, which is 1s)`,
		},
	},
	{
		name: "renew_every not positive",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    renew_every: 0s\n  - name: order\n    ttl: 3s\n    renew_every: -1s\n",
		want: []string{
			`lockgen.yaml:6:18: renew_every must be positive, not 0s (remove it to renew every ttl/3, which is 1s)`,
			`lockgen.yaml:9:18: renew_every must be positive, not -1s (remove it to renew every ttl/3, which is 1s)`,
		},
	},
	{
		name: "renew_every with an invalid ttl",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: forever\n    renew_every: 1x\n",
		want: []string{
			`lockgen.yaml:5:10: ttl "forever" is not a duration (use a Go duration such as 500ms, 3s or 1m30s)`,
			`lockgen.yaml:6:18: renew_every "1x" is not a duration (use a Go duration such as 500ms, 3s or 1m30s)`,
		},
	},
	{
		name: "wait out of range",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    wait: -5s\n  - name: order\n    ttl: 3s\n    wait: 61m\n",
		want: []string{
			`lockgen.yaml:6:11: wait must not be negative, not -5s (use 0 to try once, or e.g. wait: 5s)`,
			`lockgen.yaml:9:11: wait 61m is longer than the maximum of 1h (use at most 1h)`,
		},
	},
	{
		name: "wait without a value",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n    wait: ~\n",
		want: []string{`lockgen.yaml:6:11: wait has no value (e.g. wait: 5s)`},
	},

	// Keys.
	{
		name: "unsupported key types",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    ttl: 3s\n    key: {name: order_id, type: int}\n  - name: user\n    ttl: 3s\n    key: {name: user_id, type: uuid.UUID}\n",
		want: []string{
			`lockgen.yaml:6:33: unsupported key type "int" (did you mean "int64"?)`,
			`lockgen.yaml:9:32: unsupported key type "uuid.UUID" (supported key types: int64, string, uuid)`,
		},
	},
	{
		name: "key names that are not Go parameters",
		yaml: `version: 1
package: locks
locks:
  - {name: a, ttl: 3s, key: {name: type, type: string}}
  - {name: b, ttl: 3s, key: {name: range, type: string}}
  - {name: c, ttl: 3s, key: {name: string, type: string}}
  - {name: d, ttl: 3s, key: {name: len, type: string}}
  - {name: e, ttl: 3s, key: {name: ctx, type: string}}
  - {name: f, ttl: 3s, key: {name: fn, type: string}}
`,
		want: []string{
			`lockgen.yaml:4:36: key name "type" becomes the Go parameter type, which is a Go keyword (rename it, e.g. name: type_key)`,
			`lockgen.yaml:5:36: key name "range" becomes the Go parameter range, which is a Go keyword (rename it, e.g. name: range_key)`,
			`lockgen.yaml:6:36: key name "string" becomes the Go parameter string, which is a predeclared Go identifier (rename it, e.g. name: string_key)`,
			`lockgen.yaml:7:36: key name "len" becomes the Go parameter len, which is a predeclared Go identifier (rename it, e.g. name: len_key)`,
			`lockgen.yaml:8:36: key name "ctx" becomes the Go parameter ctx, which is already used by the generated code for the context parameter (rename it, e.g. name: ctx_key)`,
			`lockgen.yaml:9:36: key name "fn" becomes the Go parameter fn, which is already used by the generated code for the callback parameter (rename it, e.g. name: fn_key)`,
		},
	},
	{
		name: "key name not snake_case",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    ttl: 3s\n    key: {name: orderID, type: int64}\n",
		want: []string{`lockgen.yaml:6:17: key name "orderID" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: order_id)`},
	},
	{
		name: "key incomplete",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    ttl: 3s\n    key:\n      name: order_id\n      typ: int64\n",
		want: []string{
			`lockgen.yaml:7:7: missing required key "type" (add it, e.g. type: int64)`,
			`lockgen.yaml:8:7: unknown key "typ" (did you mean "type"?)`,
		},
	},
	{
		name: "key is a value",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: order\n    ttl: 3s\n    key: order_id\n",
		want: []string{`lockgen.yaml:6:10: key must be a mapping, not a single value (e.g. key: {name: order_id, type: int64})`},
	},

	// Jobs.
	{
		name: "jobs empty",
		yaml: "version: 1\npackage: locks\njobs: []\n",
		want: []string{`lockgen.yaml:3:7: jobs is empty (declare at least one, e.g. jobs: [{name: send_sms, args: {order_id: int64}}])`},
	},
	{
		name: "jobs without a value",
		yaml: "version: 1\npackage: locks\njobs:\n",
		want: []string{`lockgen.yaml:3:6: jobs has no value (e.g. jobs: [{name: send_sms, args: {order_id: int64}}])`},
	},
	{
		name: "jobs is a mapping",
		yaml: "version: 1\npackage: locks\njobs:\n  nightly_report: {schedule: \"@daily\"}\n",
		want: []string{`lockgen.yaml:4:3: jobs must be a list, not a mapping (e.g. jobs: [{name: send_sms, args: {order_id: int64}}])`},
	},
	{
		name: "job is a value",
		yaml: "version: 1\npackage: locks\njobs:\n  - nightly_report\n",
		want: []string{`lockgen.yaml:4:5: each job must be a mapping, not a single value (e.g. - {name: nightly_report, schedule: "0 3 * * *"})`},
	},
	{
		name: "neither locks nor jobs",
		yaml: "version: 1\npackage: locks\nqueues: [{name: mail}]\n",
		want: []string{
			`lockgen.yaml:1:1: missing required key "locks" (add it, e.g. locks: [{name: master, ttl: 3s}])`,
			`lockgen.yaml:3:1: queues are declared but there are no jobs (remove queues, or declare jobs that use them)`,
		},
	},
	{
		name: "unknown job keys",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: nightly_report\n    shedule: \"@daily\"\n    maxAttempts: 3\n    retries: 3\n",
		want: []string{
			`lockgen.yaml:5:5: unknown key "shedule" (did you mean "schedule"?)`,
			`lockgen.yaml:6:5: unknown key "maxAttempts" (did you mean "max_attempts"?)`,
			`lockgen.yaml:7:5: unknown key "retries" (valid keys: name, schedule, timezone, args, queue, timeout, max_attempts, backoff, priority, catch_up, min_interval, retention, concurrency)`,
		},
	},
	{
		name: "empty job",
		yaml: "version: 1\npackage: locks\njobs:\n  - {}\n",
		want: []string{`lockgen.yaml:4:5: missing required key "name" (add it, e.g. name: send_sms)`},
	},
	{
		name: "job name not snake_case or too long",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: sendSMS\n  - name: " + strings.Repeat("a", 65) + "\n",
		want: []string{
			`lockgen.yaml:4:11: job name "sendSMS" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: send_sms)`,
			`lockgen.yaml:5:11: job name is 65 characters long, the maximum is 64 (shorten it)`,
		},
	},
	{
		name: "duplicate job name",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: send_sms\n  - name: send_sms\n    queue: default\n",
		want: []string{`lockgen.yaml:5:11: duplicate job name "send_sms" (it is first declared at line 4; job names must be unique)`},
	},
	{
		name: "job names colliding in Go",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: user_id\n  - {name: user_i_d}\n",
		want: []string{`lockgen.yaml:5:12: job names "user_id" and "user_i_d" are both UserID in Go ("user_id" is at line 4; rename one of them)`},
	},
	{
		name: "jobs generating the same Go name",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: report\n  - name: report_args\n  - name: x\n  - name: enqueue_x\n  - {name: y, args: {n: int64}}\n  - name: y_tx\n  - name: y_many\n",
		want: []string{
			`lockgen.yaml:5:11: jobs "report" and "report_args" both generate the Go name ReportArgs ("report" is at line 4; rename one of them)`,
			`lockgen.yaml:7:11: jobs "x" and "enqueue_x" both generate the Go name EnqueueX ("x" is at line 6; rename one of them)`,
			`lockgen.yaml:9:11: jobs "y" and "y_tx" both generate the Go name EnqueueYTx ("y" is at line 8; rename one of them)`,
			`lockgen.yaml:10:11: jobs "y" and "y_many" both generate the Go name EnqueueYMany ("y" is at line 8; rename one of them)`,
		},
	},
	{
		name: "invalid cron schedules",
		yaml: `version: 1
package: locks
jobs:
  - {name: a, schedule: "0 3 * *"}
  - {name: b, schedule: "61 * * * *"}
  - {name: c, schedule: "0 0 3 * * * *"}
  - {name: d, schedule: "@dayly"}
  - {name: e, schedule: "0 3 * * MOON"}
  - {name: f, schedule: "*/0 * * * *"}
`,
		want: []string{
			`lockgen.yaml:4:25: invalid schedule "0 3 * *": expected 5 to 6 fields, found 4: [0 3 * *] (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
			`lockgen.yaml:5:25: invalid schedule "61 * * * *": end of range (61) above maximum (59): 61 (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
			`lockgen.yaml:6:25: invalid schedule "0 0 3 * * * *": expected 5 to 6 fields, found 7: [0 0 3 * * * *] (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
			`lockgen.yaml:7:25: invalid schedule "@dayly": unrecognized descriptor: @dayly (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
			`lockgen.yaml:8:25: invalid schedule "0 3 * * MOON": failed to parse int from MOON: strconv.Atoi: parsing "MOON": invalid syntax (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
			`lockgen.yaml:9:25: invalid schedule "*/0 * * * *": step of range should be a positive number: */0 (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
		},
	},
	{
		name: "schedule with a time zone prefix",
		yaml: `version: 1
package: locks
jobs:
  - {name: a, schedule: "TZ=Asia/Shanghai 0 3 * * *"}
  - {name: b, schedule: "CRON_TZ=UTC @daily"}
`,
		want: []string{
			`lockgen.yaml:4:25: schedule "TZ=Asia/Shanghai 0 3 * * *" sets its time zone with TZ= (write timezone: Asia/Shanghai and schedule: "0 3 * * *")`,
			`lockgen.yaml:5:25: schedule "CRON_TZ=UTC @daily" sets its time zone with CRON_TZ= (write timezone: UTC and schedule: "@daily")`,
		},
	},
	{
		name: "every schedules out of range",
		yaml: `version: 1
package: locks
jobs:
  - {name: a, schedule: "@every 500ms"}
  - {name: b, schedule: "@every 1500ms"}
  - {name: c, schedule: "@every -1m"}
  - {name: d, schedule: "@every 1 minute"}
`,
		want: []string{
			`lockgen.yaml:4:25: schedule "@every 500ms" is shorter than the minimum interval of 1s (use @every 1s or longer)`,
			`lockgen.yaml:5:25: schedule "@every 1500ms" is not a whole number of seconds (the scheduler ticks on whole seconds; e.g. @every 2s)`,
			`lockgen.yaml:6:25: schedule "@every -1m" is shorter than the minimum interval of 1s (use @every 1s or longer)`,
			`lockgen.yaml:7:25: invalid schedule "@every 1 minute": failed to parse duration @every 1 minute: time: unknown unit " minute" in duration "1 minute" (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
		},
	},
	{
		name: "schedule that never fires",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, schedule: \"0 0 30 2 *\"}\n",
		want: []string{`lockgen.yaml:4:25: schedule "0 0 30 2 *" never fires (check that its days exist in its months)`},
	},
	{
		name: "schedule empty, without a value, or a list",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, schedule: \" \"}\n  - {name: b, schedule: }\n  - {name: c, schedule: [\"@daily\"]}\n",
		want: []string{
			`lockgen.yaml:4:25: schedule is empty (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
			`lockgen.yaml:5:25: schedule has no value (e.g. schedule: "0 3 * * *")`,
			`lockgen.yaml:6:25: schedule must be a single value, not a list (e.g. schedule: "0 3 * * *")`,
		},
	},
	{
		name: "unknown timezones",
		yaml: `version: 1
package: locks
jobs:
  - {name: a, schedule: "@daily", timezone: Asia/Shangai}
  - {name: b, schedule: "@daily", timezone: Local}
  - {name: c, schedule: "@daily", timezone: ""}
  - {name: d, schedule: "@daily", timezone: "+08:00"}
`,
		want: []string{
			`lockgen.yaml:4:45: unknown timezone "Asia/Shangai" (use an IANA time zone name such as Asia/Shanghai, Europe/Berlin or UTC)`,
			`lockgen.yaml:5:45: timezone Local depends on each node's settings (use an IANA time zone name such as Asia/Shanghai, Europe/Berlin or UTC)`,
			`lockgen.yaml:6:45: timezone is empty (use an IANA time zone name such as Asia/Shanghai, Europe/Berlin or UTC)`,
			`lockgen.yaml:7:45: unknown timezone "+08:00" (use an IANA time zone name such as Asia/Shanghai, Europe/Berlin or UTC)`,
		},
	},
	{
		name: "timezone, catch_up and min_interval without schedule",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: send_sms\n    timezone: UTC\n    catch_up: all\n    min_interval: 1s\n",
		want: []string{
			`lockgen.yaml:5:5: timezone is only for scheduled jobs, and this job has no schedule (add a schedule, or remove timezone)`,
			`lockgen.yaml:6:5: catch_up is only for scheduled jobs, and this job has no schedule (add a schedule, or remove catch_up)`,
			`lockgen.yaml:7:5: min_interval is only for scheduled jobs, and this job has no schedule (add a schedule, or remove min_interval)`,
		},
	},
	{
		name: "unknown catch_up",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, schedule: \"@daily\", catch_up: once}\n  - {name: b, schedule: \"@daily\", catch_up: latest}\n",
		want: []string{
			`lockgen.yaml:4:45: unknown catch_up "once" (did you mean "one"?)`,
			`lockgen.yaml:5:45: unknown catch_up "latest" (valid values: none, one, all)`,
		},
	},
	{
		name: "min_interval longer than an every schedule",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: poll\n    schedule: \"@every 1m\"\n    min_interval: 90s\n",
		want: []string{`lockgen.yaml:6:19: min_interval 90s is longer than the interval of schedule "@every 1m", so runs would miss ticks (use at most 1m, or a longer schedule)`},
	},
	{
		name: "min_interval out of range",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, schedule: \"@daily\", min_interval: -1s}\n  - {name: b, schedule: \"@daily\", min_interval: 25h}\n",
		want: []string{
			`lockgen.yaml:4:49: min_interval must not be negative, not -1s (use 0s to 24h, e.g. min_interval: 30s)`,
			`lockgen.yaml:5:49: min_interval 25h is longer than the maximum of 24h (use 0s to 24h, e.g. min_interval: 30s)`,
		},
	},

	// Job args.
	{
		name: "unsupported arg types",
		yaml: `version: 1
package: locks
jobs:
  - name: send_sms
    args:
      a: int
      b: time.Time
      c: uuid
      d: "[]int64"
      e: json
      f: Strin
`,
		want: []string{
			`lockgen.yaml:6:10: unsupported arg type "int" (did you mean "int64"?)`,
			`lockgen.yaml:7:10: unsupported arg type "time.Time" (write time for a time.Time)`,
			`lockgen.yaml:8:10: unsupported arg type "uuid" (supported arg types: int64, int32, string, bool, float64, time, duration, []string, json(<import path>.<TypeName>))`,
			`lockgen.yaml:9:10: unsupported arg type "[]int64" (did you mean "int64"?)`,
			`lockgen.yaml:10:10: unsupported arg type "json" (write json(<import path>.<TypeName>), e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:11:10: unsupported arg type "Strin" (did you mean "string"?)`,
		},
	},
	{
		name: "arg names not snake_case or too long",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: send_sms\n    args: {orderID: int64, 2fa: string, \"\": bool, " + strings.Repeat("a", 65) + ": bool}\n",
		want: []string{
			`lockgen.yaml:5:12: arg name "orderID" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. order_id: int64)`,
			`lockgen.yaml:5:28: arg name "2fa" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. order_id: int64)`,
			`lockgen.yaml:5:41: arg name "" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. order_id: int64)`,
			`lockgen.yaml:5:51: arg name is 65 characters long, the maximum is 64 (shorten it)`,
		},
	},
	{
		name: "duplicate args",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: send_sms\n    args:\n      user_id: int64\n      phone: string\n      user_id: string\n      user_i_d: string\n",
		want: []string{
			`lockgen.yaml:8:7: duplicate arg "user_id" (it is first declared at line 6; remove one of them)`,
			`lockgen.yaml:9:7: args "user_id" and "user_i_d" are both the Go field UserID ("user_id" is at line 6; rename one of them)`,
		},
	},
	{
		name: "bad json arg types",
		yaml: `version: 1
package: locks
jobs:
  - name: send_sms
    args:
      a: json(Payload)
      b: json(example.com/app/model.payload)
      c: json(./model.Payload)
      d: json()
      e: json(example.com/app/model.*Payload)
      f: json(example.com//model.Payload)
      g: json(example.com/app/model.Payload[int])
      h: json(example.com/app/model.Payload
`,
		want: []string{
			`lockgen.yaml:6:10: json type "Payload" has no import path (write json(<import path>.<TypeName>), e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:7:10: json type "payload" is not an exported Go type name (name an exported type (not a pointer or generic instance), e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:8:10: json import path "./model" is not a valid Go import path (use the package's full import path, e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:9:10: json() names no type (e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:10:10: json type "*Payload" is not an exported Go type name (name an exported type (not a pointer or generic instance), e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:11:10: json import path "example.com//model" is not a valid Go import path (use the package's full import path, e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:12:10: json type "Payload[int]" is not an exported Go type name (name an exported type (not a pointer or generic instance), e.g. json(example.com/app/model.Payload))`,
			`lockgen.yaml:13:10: unsupported arg type "json(example.com/app/model.Payload" (write json(<import path>.<TypeName>), e.g. json(example.com/app/model.Payload))`,
		},
	},
	{
		name: "args not a mapping, empty or without values",
		yaml: `version: 1
package: locks
jobs:
  - {name: a, args: [order_id]}
  - {name: b, args: {}}
  - {name: c, args: }
  - {name: d, args: {order_id: [int64], phone: }}
`,
		want: []string{
			`lockgen.yaml:4:21: args must be a mapping, not a list (e.g. args: {order_id: int64, phone: string})`,
			`lockgen.yaml:5:21: args is empty (declare at least one, e.g. args: {order_id: int64, phone: string}, or remove args)`,
			`lockgen.yaml:6:21: args has no value (e.g. args: {order_id: int64, phone: string})`,
			`lockgen.yaml:7:32: args.order_id must be a single value, not a list (e.g. order_id: int64)`,
			`lockgen.yaml:7:48: args.phone has no value (e.g. phone: int64)`,
		},
	},
	{
		name: "arg keys that are not names",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: a\n    args:\n      ? [x]\n      : int64\n  - name: b\n    args: &args {x: int64}\n  - name: c\n    args:\n      <<: *args\n",
		want: []string{
			`lockgen.yaml:6:9: an arg name must be a plain name, not a list (e.g. order_id: int64)`,
			`lockgen.yaml:12:7: merge keys (<<) are not supported (write the args out in full)`,
		},
	},

	// Queues.
	{
		name: "queue not declared",
		yaml: "version: 1\npackage: locks\nqueues: [{name: mail}]\njobs:\n  - {name: a, queue: sms}\n  - {name: b, queue: mial}\n",
		want: []string{
			`lockgen.yaml:5:22: queue "sms" is not declared under queues (declare it, e.g. queues: [{name: sms, concurrency: 10}], or remove queue to use the queue default)`,
			`lockgen.yaml:6:22: queue "mial" is not declared under queues (did you mean "mail"?)`,
		},
	},
	{
		name: "duplicate queues and queue names not snake_case",
		yaml: "version: 1\npackage: locks\nqueues:\n  - name: mail\n  - name: mail\n  - name: Mail\njobs:\n  - {name: a, queue: Mail}\n",
		want: []string{
			`lockgen.yaml:5:11: duplicate queue name "mail" (it is first declared at line 4; queue names must be unique)`,
			`lockgen.yaml:6:11: queue name "Mail" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: mail)`,
			`lockgen.yaml:8:22: queue name "Mail" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. queue: mail)`,
		},
	},
	{
		name: "queue concurrency out of range",
		yaml: "version: 1\npackage: locks\nqueues:\n  - {name: a, concurrency: 0}\n  - {name: b, concurrency: 10001}\n  - {name: c, concurrency: ten}\njobs:\n  - name: x\n",
		want: []string{
			`lockgen.yaml:4:28: concurrency must be between 1 and 10000, not 0 (e.g. concurrency: 10; how many of its runs each node handles at once)`,
			`lockgen.yaml:5:28: concurrency must be between 1 and 10000, not 10001 (e.g. concurrency: 10; how many of its runs each node handles at once)`,
			`lockgen.yaml:6:28: concurrency must be a whole number, not "ten" (e.g. concurrency: 10)`,
		},
	},
	{
		name: "external queue with a concurrency, or a job with one",
		yaml: "version: 1\npackage: locks\nqueues:\n  - {name: py, external: true, concurrency: 5}\n  - {name: rb, external: yes}\njobs:\n  - {name: x, queue: py, concurrency: 1}\n",
		want: []string{
			`lockgen.yaml:4:32: external queue "py" takes no concurrency (remove concurrency: the consumers of an external queue decide how many of its runs they handle at once)`,
			`lockgen.yaml:5:26: external must be true or false, not "yes" (e.g. external: true)`,
			`lockgen.yaml:7:26: job "x" is in external queue "py", which takes no job concurrency (remove concurrency, or move the job to a queue the Go workers work: only they keep a job to one run at a time)`,
		},
	},
	{
		name: "unknown queue keys",
		yaml: "version: 1\npackage: locks\nqueues:\n  - {name: mail, concurency: 10, size: 5}\n  - {concurrency: 1}\njobs:\n  - name: x\n",
		want: []string{
			`lockgen.yaml:4:18: unknown key "concurency" (did you mean "concurrency"?)`,
			`lockgen.yaml:4:34: unknown key "size" (valid keys: name, concurrency, external)`,
			`lockgen.yaml:5:5: missing required key "name" (add it, e.g. name: mail)`,
		},
	},
	{
		name: "queues empty or not a list",
		yaml: "version: 1\npackage: locks\nqueues: []\njobs:\n  - {name: x, queue: mail}\n",
		want: []string{`lockgen.yaml:3:9: queues is empty (remove queues to use only the queue default, or declare one, e.g. queues: [{name: mail, concurrency: 10}])`},
	},
	{
		name: "queues is a mapping",
		yaml: "version: 1\npackage: locks\nqueues: {mail: 10}\njobs:\n  - {name: x, queue: mail}\n",
		want: []string{`lockgen.yaml:3:9: queues must be a list, not a mapping (e.g. queues: [{name: mail, concurrency: 10}])`},
	},
	{
		name: "queues without jobs",
		yaml: "version: 1\npackage: locks\nlocks: [{name: master, ttl: 3s}]\nqueues: [{name: mail}]\n",
		want: []string{`lockgen.yaml:4:1: queues are declared but there are no jobs (remove queues, or declare jobs that use them)`},
	},

	// Job limits.
	{
		name: "timeout out of range",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, timeout: 500ms}\n  - {name: b, timeout: 25h}\n  - {name: c, timeout: 10}\n",
		want: []string{
			`lockgen.yaml:4:24: timeout 500ms is shorter than the minimum of 1s (use 1s to 24h, e.g. timeout: 10m)`,
			`lockgen.yaml:5:24: timeout 25h is longer than the maximum of 24h (use 1s to 24h, e.g. timeout: 10m)`,
			`lockgen.yaml:6:24: timeout 10 has no unit (add a unit, e.g. timeout: 10m)`,
		},
	},
	{
		name: "max_attempts out of range or not a number",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, max_attempts: 0}\n  - {name: b, max_attempts: 1001}\n  - {name: c, max_attempts: \"5\"}\n  - {name: d, max_attempts: 2.5}\n  - {name: e, max_attempts: 99999999999999999999}\n",
		want: []string{
			`lockgen.yaml:4:29: max_attempts must be between 1 and 1000, not 0 (e.g. max_attempts: 25; 1 means no retry)`,
			`lockgen.yaml:5:29: max_attempts must be between 1 and 1000, not 1001 (e.g. max_attempts: 25; 1 means no retry)`,
			`lockgen.yaml:6:29: max_attempts must be a whole number, not "5" (e.g. max_attempts: 25)`,
			`lockgen.yaml:7:29: max_attempts must be a whole number, not "2.5" (e.g. max_attempts: 25)`,
			`lockgen.yaml:8:29: max_attempts must be between 1 and 1000, not 99999999999999999999 (e.g. max_attempts: 25; 1 means no retry)`,
		},
	},
	{
		name: "priority out of range",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, priority: -101}\n  - {name: b, priority: 101}\n",
		want: []string{
			`lockgen.yaml:4:25: priority must be between -100 and 100, not -101 (e.g. priority: 10; higher runs first)`,
			`lockgen.yaml:5:25: priority must be between -100 and 100, not 101 (e.g. priority: 10; higher runs first)`,
		},
	},
	{
		name: "backoff out of range",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: a\n    backoff: {initial: 5ms, max: 25h}\n",
		want: []string{
			`lockgen.yaml:5:24: backoff.initial 5ms is shorter than the minimum of 10ms (use 10ms to 24h, e.g. initial: 1s)`,
			`lockgen.yaml:5:34: backoff.max 25h is longer than the maximum of 24h (use 10ms to 24h, e.g. max: 5m)`,
		},
	},
	{
		name: "backoff max shorter than initial",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: a\n    backoff: {initial: 10s, max: 5s}\n",
		want: []string{`lockgen.yaml:5:34: backoff.max 5s is shorter than backoff.initial 10s (make max at least initial)`},
	},
	{
		name: "backoff unknown key or a value",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, backoff: {initial: 1s, maximum: 5m}}\n  - {name: b, backoff: 1s}\n",
		want: []string{
			`lockgen.yaml:4:38: unknown key "maximum" (valid keys: initial, max)`,
			`lockgen.yaml:5:24: backoff must be a mapping, not a single value (e.g. backoff: {initial: 1s, max: 5m})`,
		},
	},
	{
		name: "retention out of range",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, retention: 30s}\n  - {name: b, retention: 8761h}\n",
		want: []string{
			`lockgen.yaml:4:26: retention 30s is shorter than the minimum of 1m (use 1m to 8760h, e.g. retention: 168h)`,
			`lockgen.yaml:5:26: retention 8761h is longer than the maximum of 8760h (use 1m to 8760h, e.g. retention: 168h)`,
		},
	},
	{
		name: "job concurrency other than 1",
		yaml: "version: 1\npackage: locks\njobs:\n  - {name: a, concurrency: 2}\n  - {name: b, concurrency: 0}\n  - {name: c, concurrency: one}\n",
		want: []string{
			`lockgen.yaml:4:28: concurrency must be 1, not 2 (concurrency: 1 runs one run of the job at a time across the cluster; remove concurrency for no limit; singletons per args key are planned)`,
			`lockgen.yaml:5:28: concurrency must be 1, not 0 (concurrency: 1 runs one run of the job at a time across the cluster; remove concurrency for no limit; singletons per args key are planned)`,
			`lockgen.yaml:6:28: concurrency must be a whole number, not "one" (e.g. concurrency: 1)`,
		},
	},
	{
		name: "every job problem sorted by position",
		yaml: `version: 1
package: locks
jobs:
  - name: Nightly
    schedule: "0 25 * * *"
    timezone: Mars/Olympus
    queue: reports
    args: {OrderID: int64, at: datetime}
    max_attempts: 0
  - name: send_sms
    catch_up: one
    backoff: {initial: 1h, max: 1m}
queues:
  - {name: mail, concurrency: -1}
`,
		want: []string{
			`lockgen.yaml:4:11: job name "Nightly" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: send_sms)`,
			`lockgen.yaml:5:15: invalid schedule "0 25 * * *": end of range (25) above maximum (23): 25 (use 5 cron fields (minute hour day-of-month month day-of-week), 6 with seconds first, a descriptor such as @daily, or @every 1h)`,
			`lockgen.yaml:6:15: unknown timezone "Mars/Olympus" (use an IANA time zone name such as Asia/Shanghai, Europe/Berlin or UTC)`,
			`lockgen.yaml:7:12: queue "reports" is not declared under queues (declare it, e.g. queues: [{name: reports, concurrency: 10}], or remove queue to use the queue default)`,
			`lockgen.yaml:8:12: arg name "OrderID" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. order_id: int64)`,
			`lockgen.yaml:8:32: unsupported arg type "datetime" (supported arg types: int64, int32, string, bool, float64, time, duration, []string, json(<import path>.<TypeName>))`,
			`lockgen.yaml:9:19: max_attempts must be between 1 and 1000, not 0 (e.g. max_attempts: 25; 1 means no retry)`,
			`lockgen.yaml:11:5: catch_up is only for scheduled jobs, and this job has no schedule (add a schedule, or remove catch_up)`,
			`lockgen.yaml:12:33: backoff.max 1m is shorter than backoff.initial 1h (make max at least initial)`,
			`lockgen.yaml:14:31: concurrency must be between 1 and 10000, not -1 (e.g. concurrency: 10; how many of its runs each node handles at once)`,
		},
	},

	// Many problems at once are all reported, sorted by position.
	{
		name: "every problem sorted by position",
		yaml: `jobs: []
version: 3
package: Locks
locks:
  - name: Master
    ttl: 1ms
    strategy: rows
  - name: order
    key: {name: id, type: float64}
table_prefix: "-"
`,
		want: []string{
			`lockgen.yaml:1:7: jobs is empty (declare at least one, e.g. jobs: [{name: send_sms, args: {order_id: int64}}])`,
			`lockgen.yaml:2:10: unsupported version 3 (lockgen knows only version: 1)`,
			`lockgen.yaml:3:10: package "Locks" is not a lower-case Go package name (use a short lower-case name such as locks)`,
			`lockgen.yaml:5:11: lock name "Master" is not snake_case (use lower-case letters and digits in words joined by single underscores, starting with a letter, e.g. name: master)`,
			`lockgen.yaml:6:10: ttl 1ms is shorter than the minimum of 100ms (a lease must outlast a database round trip; use at least 100ms)`,
			`lockgen.yaml:7:15: unknown strategy "rows" (did you mean "row"?)`,
			`lockgen.yaml:8:5: missing required key "ttl" (add it, e.g. ttl: 3s; only strategy row has none)`,
			`lockgen.yaml:9:27: unsupported key type "float64" (supported key types: int64, string, uuid)`,
			`lockgen.yaml:10:15: table_prefix "-" is not a lower-case SQL identifier (use lower-case letters, digits and underscores, starting with a letter, e.g. lockgen_)`,
		},
	},
	{
		name: "error through an alias is reported at the alias",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: &short 10ms\n  - name: order\n    ttl: *short\n",
		want: []string{
			`lockgen.yaml:5:10: ttl 10ms is shorter than the minimum of 100ms (a lease must outlast a database round trip; use at least 100ms)`,
			`lockgen.yaml:7:10: ttl 10ms is shorter than the minimum of 100ms (a lease must outlast a database round trip; use at least 100ms)`,
		},
	},
}

func TestLoadBadSpecs(t *testing.T) {
	for _, tc := range badSpecs {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load("lockgen.yaml", []byte(tc.yaml))
			require.Error(t, err)
			assert.Nil(t, s)

			var list ErrorList
			require.True(t, errors.As(err, &list), "error is %T, not an ErrorList", err)
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Error()
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, strings.Join(tc.want, "\n"), err.Error())
		})
	}
}
