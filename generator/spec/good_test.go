package spec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goodSpec is a spec Load must accept, and the Spec it must return.
type goodSpec struct {
	name string
	yaml string
	want *Spec
}

// goodSpecs are also the seeds of FuzzLoad.
var goodSpecs = []goodSpec{
	{
		name: "minimal spec gets every default",
		yaml: "version: 1\npackage: locks\nlocks:\n  - name: master\n    ttl: 3s\n",
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Locks: []Lock{{
				Pos:        Pos{Line: 4, Col: 5},
				Name:       "master",
				GoName:     "Master",
				Strategy:   StrategyLease,
				TTL:        3 * time.Second,
				RenewEvery: time.Second,
				WaitMode:   WaitModePoll,
			}},
		},
	},
	{
		name: "wait_mode overrides its default",
		yaml: `version: 1
package: locks
locks:
  - {name: report, ttl: 3s, wait: 10s, wait_mode: poll}
  - {name: order, ttl: 3s, wait: 10s, wait_mode: server, key: {name: id, type: int64}}
`,
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Locks: []Lock{
				{
					Pos: Pos{Line: 4, Col: 5}, Name: "report", GoName: "Report", Strategy: StrategyLease,
					TTL: 3 * time.Second, RenewEvery: time.Second, Wait: 10 * time.Second, WaitMode: WaitModePoll,
				},
				{
					Pos: Pos{Line: 5, Col: 5}, Name: "order", GoName: "Order", Strategy: StrategyLease,
					TTL: 3 * time.Second, RenewEvery: time.Second, Wait: 10 * time.Second, WaitMode: WaitModeServer,
					Key: &Key{Pos: Pos{Line: 5, Col: 63}, Name: "id", GoName: "id", Type: "int64"},
				},
			},
		},
	},
	{
		name: "every key set",
		yaml: `# lockgen spec
version: 1
package: locks
out: internal/locks
migrations: { dir: db/migrations, format: goose }
table_prefix: app_
locks:
  - name: master
    strategy: lease
    ttl: 3s
    renew_every: 1s
    leader: false
  - name: order
    key: { name: order_id, type: int64 }
    ttl: 30s
    wait: 5s
  - name: send_sms
    ttl: 1m
    renew_every: 20s
    wait: 0s
    key:
      name: url_path
      type: string
  - name: user_id
    ttl: 100ms
    key: {name: id, type: string}
`,
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         "internal/locks",
			Migrations:  Migrations{Dir: "db/migrations", Format: FormatGoose},
			TablePrefix: "app_",
			Locks: []Lock{
				{
					Pos: Pos{Line: 8, Col: 5}, Name: "master", GoName: "Master", Strategy: StrategyLease,
					TTL: 3 * time.Second, RenewEvery: time.Second, WaitMode: WaitModePoll,
				},
				{
					Pos: Pos{Line: 13, Col: 5}, Name: "order", GoName: "Order", Strategy: StrategyLease,
					TTL: 30 * time.Second, RenewEvery: 10 * time.Second, Wait: 5 * time.Second, WaitMode: WaitModePoll,
					Key: &Key{Pos: Pos{Line: 14, Col: 10}, Name: "order_id", GoName: "orderID", Type: "int64"},
				},
				{
					Pos: Pos{Line: 17, Col: 5}, Name: "send_sms", GoName: "SendSMS", Strategy: StrategyLease,
					TTL: time.Minute, RenewEvery: 20 * time.Second, WaitMode: WaitModePoll,
					Key: &Key{Pos: Pos{Line: 22, Col: 7}, Name: "url_path", GoName: "urlPath", Type: "string"},
				},
				{
					Pos: Pos{Line: 24, Col: 5}, Name: "user_id", GoName: "UserID", Strategy: StrategyLease,
					TTL: 100 * time.Millisecond, RenewEvery: 33 * time.Millisecond, WaitMode: WaitModePoll,
					Key: &Key{Pos: Pos{Line: 26, Col: 10}, Name: "id", GoName: "id", Type: "string"},
				},
			},
		},
	},
	{
		name: "paths are cleaned, limits are inclusive, quotes and document markers are fine",
		yaml: `---
"version": 1
package: 'locks'
out: ./internal//locks/
migrations:
  dir: .
table_prefix: "l"
locks: [{name: "a1", ttl: "24h", wait: 1h}, {name: a_1_b, ttl: 100ms, renew_every: 89ms}]
...
`,
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         "internal/locks",
			Migrations:  Migrations{Dir: ".", Format: FormatGolangMigrate},
			TablePrefix: "l",
			Locks: []Lock{
				{
					Pos: Pos{Line: 8, Col: 9}, Name: "a1", GoName: "A1", Strategy: StrategyLease,
					TTL: 24 * time.Hour, RenewEvery: 8 * time.Hour, Wait: time.Hour, WaitMode: WaitModeServer,
				},
				{
					Pos: Pos{Line: 8, Col: 45}, Name: "a_1_b", GoName: "A1B", Strategy: StrategyLease,
					TTL: 100 * time.Millisecond, RenewEvery: 89 * time.Millisecond, WaitMode: WaitModePoll,
				},
			},
		},
	},
	{
		name: "leader and session locks",
		yaml: `version: 1
package: locks
locks:
  - name: master
    ttl: 3s
    leader: true
  - name: order
    strategy: session
    key: {name: order_id, type: int64}
    ttl: 30s
    leader: false
  - {name: scheduler, strategy: session, ttl: 10s, wait: 1m}
  - {name: master_leader, leader: true, ttl: 1s}
  - {name: ledger, strategy: row, key: {name: account, type: string}, wait: 2s}
  - {name: report, strategy: row, idle_timeout: 5m}
`,
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Locks: []Lock{
				{
					Pos: Pos{Line: 4, Col: 5}, Name: "master", GoName: "Master", Strategy: StrategyLease,
					TTL: 3 * time.Second, RenewEvery: time.Second, Leader: true, WaitMode: WaitModeServer,
				},
				{
					Pos: Pos{Line: 7, Col: 5}, Name: "order", GoName: "Order", Strategy: StrategySession,
					TTL: 30 * time.Second, RenewEvery: 10 * time.Second,
					Key: &Key{Pos: Pos{Line: 9, Col: 10}, Name: "order_id", GoName: "orderID", Type: "int64"},
				},
				{
					Pos: Pos{Line: 12, Col: 5}, Name: "scheduler", GoName: "Scheduler", Strategy: StrategySession,
					TTL: 10 * time.Second, RenewEvery: 3333 * time.Millisecond, Wait: time.Minute,
				},
				{
					Pos: Pos{Line: 13, Col: 5}, Name: "master_leader", GoName: "MasterLeader", Strategy: StrategyLease,
					TTL: time.Second, RenewEvery: 333 * time.Millisecond, Leader: true, WaitMode: WaitModeServer,
				},
				{
					Pos: Pos{Line: 14, Col: 5}, Name: "ledger", GoName: "Ledger", Strategy: StrategyRow, Wait: 2 * time.Second,
					Key: &Key{Pos: Pos{Line: 14, Col: 40}, Name: "account", GoName: "account", Type: "string"},
				},
				{
					Pos: Pos{Line: 15, Col: 5}, Name: "report", GoName: "Report", Strategy: StrategyRow, IdleTimeout: 5 * time.Minute,
				},
			},
		},
	},
	{
		name: "aliases are resolved",
		yaml: `version: 1
package: locks
migrations: {}
locks:
  - name: order
    ttl: &ttl 10s
    key: &key {name: id, type: int64}
  - name: invoice
    ttl: *ttl
    key: *key
`,
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Locks: []Lock{
				{
					Pos: Pos{Line: 5, Col: 5}, Name: "order", GoName: "Order", Strategy: StrategyLease,
					TTL: 10 * time.Second, RenewEvery: 3333 * time.Millisecond, WaitMode: WaitModePoll,
					Key: &Key{Pos: Pos{Line: 7, Col: 10}, Name: "id", GoName: "id", Type: "int64"},
				},
				{
					Pos: Pos{Line: 8, Col: 5}, Name: "invoice", GoName: "Invoice", Strategy: StrategyLease,
					TTL: 10 * time.Second, RenewEvery: 3333 * time.Millisecond, WaitMode: WaitModePoll,
					Key: &Key{Pos: Pos{Line: 10, Col: 10}, Name: "id", GoName: "id", Type: "int64"},
				},
			},
		},
	},
	{
		name: "every job key set",
		yaml: `version: 1
package: locks
locks:
  - {name: nightly_report, ttl: 3s}
queues:
  - {name: default, concurrency: 100}
  - {name: mail, concurrency: 10}
jobs:
  - name: nightly_report
    schedule: "0 3 * * *"
    timezone: Asia/Shanghai
    args: { order_id: int64, phone: string, sent: time, wait: duration, tags: "[]string", payload: "json(example.com/app/model.Payload)" }
    queue: mail
    timeout: 10m
    max_attempts: 5
    backoff: { initial: 1s, max: 5m }
    priority: 10
    catch_up: one
    min_interval: 30s
    retention: 168h
    concurrency: 1
`,
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Locks: []Lock{{
				Pos: Pos{Line: 4, Col: 5}, Name: "nightly_report", GoName: "NightlyReport", Strategy: StrategyLease,
				TTL: 3 * time.Second, RenewEvery: time.Second, WaitMode: WaitModePoll,
			}},
			Queues: []Queue{
				{Pos: Pos{Line: 6, Col: 5}, Name: "default", Concurrency: 100},
				{Pos: Pos{Line: 7, Col: 5}, Name: "mail", Concurrency: 10},
			},
			Jobs: []Job{{
				Pos:      Pos{Line: 9, Col: 5},
				Name:     "nightly_report",
				GoName:   "NightlyReport",
				Schedule: "0 3 * * *",
				Timezone: "Asia/Shanghai",
				Args: []Arg{
					{Pos: Pos{Line: 12, Col: 13}, Name: "order_id", GoName: "OrderID", Type: ArgInt64, GoType: "int64"},
					{Pos: Pos{Line: 12, Col: 30}, Name: "phone", GoName: "Phone", Type: ArgString, GoType: "string"},
					{Pos: Pos{Line: 12, Col: 45}, Name: "sent", GoName: "Sent", Type: ArgTime, GoType: "time.Time"},
					{Pos: Pos{Line: 12, Col: 57}, Name: "wait", GoName: "Wait", Type: ArgDuration, GoType: "time.Duration"},
					{Pos: Pos{Line: 12, Col: 73}, Name: "tags", GoName: "Tags", Type: ArgStrings, GoType: "[]string"},
					{Pos: Pos{Line: 12, Col: 91}, Name: "payload", GoName: "Payload", Type: ArgJSON, GoType: "Payload", Import: "example.com/app/model"},
				},
				Queue:          "mail",
				Timeout:        10 * time.Minute,
				MaxAttempts:    5,
				BackoffInitial: time.Second,
				BackoffMax:     5 * time.Minute,
				Priority:       10,
				CatchUp:        CatchUpOne,
				MinInterval:    30 * time.Second,
				Retention:      168 * time.Hour,
				Concurrency:    1,
			}},
		},
	},
	{
		name: "minimal scheduled job gets every default, and needs no locks",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: nightly_report\n    schedule: \"0 3 * * *\"\n",
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Queues:      []Queue{{Name: DefaultQueue, Concurrency: DefaultQueueConcurrency}},
			Jobs: []Job{{
				Pos:            Pos{Line: 4, Col: 5},
				Name:           "nightly_report",
				GoName:         "NightlyReport",
				Schedule:       "0 3 * * *",
				Timezone:       "UTC",
				Queue:          "default",
				Timeout:        10 * time.Minute,
				MaxAttempts:    25,
				BackoffInitial: time.Second,
				BackoffMax:     time.Hour,
				CatchUp:        CatchUpOne,
				Retention:      168 * time.Hour,
			}},
		},
	},
	{
		name: "minimal enqueueable job gets every default",
		yaml: "version: 1\npackage: locks\njobs:\n  - name: send_sms\n",
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Queues:      []Queue{{Name: DefaultQueue, Concurrency: DefaultQueueConcurrency}},
			Jobs: []Job{{
				Pos:            Pos{Line: 4, Col: 5},
				Name:           "send_sms",
				GoName:         "SendSMS",
				Queue:          "default",
				Timeout:        10 * time.Minute,
				MaxAttempts:    25,
				BackoffInitial: time.Second,
				BackoffMax:     time.Hour,
				Retention:      168 * time.Hour,
			}},
		},
	},
	{
		name: "jobs both scheduled and enqueueable, limits inclusive, defaults that follow other keys",
		yaml: `version: 1
package: locks
locks: [{name: master, ttl: 3s}]
queues: [{name: bulk}]
jobs:
  - name: sync_users
    schedule: "@every   1m"
    min_interval: 1m
    args: {since: time, dry_run: bool, ratio: float64, shard: int32}
    catch_up: all
    timezone: Europe/Berlin
    timeout: 1s
    max_attempts: 1
    priority: -100
    retention: 1m
    backoff: {initial: 2h}
    queue: bulk
  - name: send_sms
    timeout: 24h
    max_attempts: 1000
    priority: 100
    retention: 8760h
    backoff: {max: 500ms}
    args: &args {user_id: int64, doc: "json(gopkg.in/yaml.v3.Node)"}
  - name: send_email
    schedule: " 30 0 3 * * MON-FRI "
    catch_up: none
    min_interval: 24h
    backoff: {initial: 10ms, max: 24h}
    args: *args
  - {name: cleanup, schedule: "@hourly", min_interval: 0s, backoff: {}}
`,
		want: &Spec{
			File:        "lockgen.yaml",
			Version:     1,
			Package:     "locks",
			Out:         ".",
			Migrations:  Migrations{Dir: "migrations", Format: FormatGolangMigrate},
			TablePrefix: "lockgen_",
			Locks: []Lock{{
				Pos: Pos{Line: 3, Col: 9}, Name: "master", GoName: "Master", Strategy: StrategyLease,
				TTL: 3 * time.Second, RenewEvery: time.Second, WaitMode: WaitModePoll,
			}},
			Queues: []Queue{
				{Pos: Pos{Line: 4, Col: 10}, Name: "bulk", Concurrency: DefaultQueueConcurrency},
				{Name: DefaultQueue, Concurrency: DefaultQueueConcurrency},
			},
			Jobs: []Job{
				{
					Pos: Pos{Line: 6, Col: 5}, Name: "sync_users", GoName: "SyncUsers",
					Schedule: "@every 1m", Timezone: "Europe/Berlin", MinInterval: time.Minute, CatchUp: CatchUpAll,
					Args: []Arg{
						{Pos: Pos{Line: 9, Col: 12}, Name: "since", GoName: "Since", Type: ArgTime, GoType: "time.Time"},
						{Pos: Pos{Line: 9, Col: 25}, Name: "dry_run", GoName: "DryRun", Type: ArgBool, GoType: "bool"},
						{Pos: Pos{Line: 9, Col: 40}, Name: "ratio", GoName: "Ratio", Type: ArgFloat64, GoType: "float64"},
						{Pos: Pos{Line: 9, Col: 56}, Name: "shard", GoName: "Shard", Type: ArgInt32, GoType: "int32"},
					},
					Queue: "bulk", Timeout: time.Second, MaxAttempts: 1, Priority: -100, Retention: time.Minute,
					BackoffInitial: 2 * time.Hour, BackoffMax: 2 * time.Hour,
				},
				{
					Pos: Pos{Line: 18, Col: 5}, Name: "send_sms", GoName: "SendSMS",
					Args: []Arg{
						{Pos: Pos{Line: 24, Col: 18}, Name: "user_id", GoName: "UserID", Type: ArgInt64, GoType: "int64"},
						{Pos: Pos{Line: 24, Col: 34}, Name: "doc", GoName: "Doc", Type: ArgJSON, GoType: "Node", Import: "gopkg.in/yaml.v3"},
					},
					Queue: "default", Timeout: 24 * time.Hour, MaxAttempts: 1000, Priority: 100, Retention: 8760 * time.Hour,
					BackoffInitial: 500 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
				},
				{
					Pos: Pos{Line: 25, Col: 5}, Name: "send_email", GoName: "SendEmail",
					Schedule: "30 0 3 * * MON-FRI", Timezone: "UTC", MinInterval: 24 * time.Hour, CatchUp: CatchUpNone,
					Args: []Arg{
						{Pos: Pos{Line: 24, Col: 18}, Name: "user_id", GoName: "UserID", Type: ArgInt64, GoType: "int64"},
						{Pos: Pos{Line: 24, Col: 34}, Name: "doc", GoName: "Doc", Type: ArgJSON, GoType: "Node", Import: "gopkg.in/yaml.v3"},
					},
					Queue: "default", Timeout: 10 * time.Minute, MaxAttempts: 25, Retention: 168 * time.Hour,
					BackoffInitial: 10 * time.Millisecond, BackoffMax: 24 * time.Hour,
				},
				{
					Pos: Pos{Line: 31, Col: 5}, Name: "cleanup", GoName: "Cleanup",
					Schedule: "@hourly", Timezone: "UTC", CatchUp: CatchUpOne,
					Queue: "default", Timeout: 10 * time.Minute, MaxAttempts: 25, Retention: 168 * time.Hour,
					BackoffInitial: time.Second, BackoffMax: time.Hour,
				},
			},
		},
	},
}

func TestLoadGoodSpecs(t *testing.T) {
	for _, tc := range goodSpecs {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load("lockgen.yaml", []byte(tc.yaml))
			require.NoError(t, err)
			assert.Equal(t, tc.want, s)
		})
	}
}

func TestLockMethods(t *testing.T) {
	assert.Equal(t, []string{"WithOrderLock", "TryOrderLock", "AcquireOrderLock", "OrderLockHolder"},
		Lock{GoName: "Order"}.Methods())
	assert.Equal(t, []string{"WithOrderLock", "TryOrderLock", "AcquireOrderLock", "OrderLockHolder", "PruneOrderLocks"},
		Lock{GoName: "Order", Key: &Key{Name: "id", GoName: "id", Type: "int64"}}.Methods())
	assert.Equal(t, []string{"WithMasterLock", "TryMasterLock", "AcquireMasterLock", "MasterLockHolder", "RunAsMaster", "IsMasterLeader", "MasterLeader"},
		Lock{GoName: "Master", Leader: true}.Methods())
}

func TestJobKinds(t *testing.T) {
	scheduled := Job{GoName: "Report", Schedule: "@daily"}
	both := Job{GoName: "Report", Schedule: "@daily", Args: []Arg{{Name: "id"}}}
	enqueued := Job{GoName: "SendSMS"}
	assert.True(t, scheduled.Scheduled())
	assert.False(t, scheduled.Enqueueable())
	assert.True(t, both.Scheduled())
	assert.True(t, both.Enqueueable())
	assert.False(t, enqueued.Scheduled())
	assert.True(t, enqueued.Enqueueable())
	assert.Equal(t, []string{"SendSMS", "SendSMSArgs", "EnqueueSendSMS", "EnqueueSendSMSTx", "EnqueueSendSMSMany"}, enqueued.Names())
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lockgen.yaml")
	require.NoError(t, os.WriteFile(path, []byte(goodSpecs[0].yaml), 0o600))

	s, err := LoadFile(path)
	require.NoError(t, err)
	assert.Equal(t, path, s.File)
	assert.Equal(t, "Master", s.Locks[0].GoName)

	require.NoError(t, os.WriteFile(path, []byte("version: 2\n"), 0o600))
	_, err = LoadFile(path)
	var list ErrorList
	require.ErrorAs(t, err, &list)
	assert.Equal(t, path+":1:1: missing required key \"package\" (add it, e.g. package: locks)", list[0].Error())

	_, err = LoadFile(filepath.Join(dir, "missing.yaml"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.False(t, errors.As(err, &list), "a read error is not an ErrorList")
}

func TestErrorFormat(t *testing.T) {
	withHint := &Error{File: "a.yaml", Pos: Pos{Line: 3, Col: 7}, Msg: "bad", Hint: "fix it"}
	noHint := &Error{File: "a.yaml", Pos: Pos{Line: 1, Col: 1}, Msg: "worse"}
	noFile := &Error{Pos: Pos{Line: 2, Col: 4}, Msg: "no file"}

	assert.Equal(t, "a.yaml:3:7: bad (fix it)", withHint.Error())
	assert.Equal(t, "a.yaml:1:1: worse", noHint.Error())
	assert.Equal(t, "2:4: no file", noFile.Error())
	assert.Equal(t, "a.yaml:3:7: bad (fix it)\na.yaml:1:1: worse", ErrorList{withHint, noHint}.Error())

	var err error = ErrorList{withHint, noHint}
	var first *Error
	require.ErrorAs(t, err, &first)
	assert.Same(t, withHint, first)
}

func TestLoadReportsEveryError(t *testing.T) {
	_, err := Load("x.yaml", []byte("version: 1\npackage: locks\nlocks:\n  - {name: a, ttl: 1s, tll: 2s}\n  - {name: B, ttl: 1s}\n"))
	var list ErrorList
	require.ErrorAs(t, err, &list)
	require.Len(t, list, 2)
	assert.Equal(t, Pos{Line: 4, Col: 24}, list[0].Pos)
	assert.Equal(t, `unknown key "tll"`, list[0].Msg)
	assert.Equal(t, `did you mean "ttl"?`, list[0].Hint)
	assert.Equal(t, "x.yaml", list[0].File)
	assert.Equal(t, Pos{Line: 5, Col: 12}, list[1].Pos)
}
