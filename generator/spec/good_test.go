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
