// Command bench measures, on one pool against the same server, what a lock
// round trip costs: SELECT 1, a hand-written upsert+release pair, and
// lockgen's acquire+release pair through the generated API (lease and
// session strategies), with 1 and 8 clients, each cell the median of
// -rounds measurements taken in turns. It prints a table and the
// ratios to the raw floors: lockgen lease/raw upsert+release pair (issue
// 24: >= 0.95), lockgen lease/the same pair with each statement bounded
// by a timeout as lockgen's are, and lockgen session/raw GET_LOCK+RELEASE_LOCK
// pair on a pinned connection, the way sanketplus/go-mysql-lock does it
// without a fencing token (issue 24: >= 1.0).
//
// It creates its tables as the admin, LOCKGEN_DSN (default
// root@tcp(127.0.0.1:3306)/test), and measures as a user that has SELECT,
// INSERT, UPDATE, DELETE on them only: LOCKGEN_APP_DSN, or a user created
// for the run and dropped after.
package main

//go:generate go run github.com/lockgen/lockgen/cmd/lockgen generate

import (
	"context"
	"database/sql"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockgen/lockgen/examples/bench/locks"
	"github.com/lockgen/lockgen/examples/bench/locks/lockgendb"
	"github.com/lockgen/lockgen/examples/internal/demodb"
)

//go:embed migrations/0001_bench_locks.up.sql
var migration string

// sessionMigration adds the lock table's session reservation columns,
// which the session and row strategies read.
//
//go:embed migrations/0006_bench_locks_session.up.sql
var sessionMigration string

// rawSchema is the table the hand-written pair uses: the same shape and
// primary key as lockgen's, doing the same job (owner, fencing token,
// expiry by the database clock), written the obvious way by hand.
const rawSchema = `CREATE TABLE IF NOT EXISTS bench_raw_locks (
    name        VARCHAR(191) NOT NULL,
    lock_key    VARCHAR(191) NOT NULL DEFAULT '',
    owner       VARCHAR(191) NOT NULL DEFAULT '',
    token       BIGINT       NOT NULL DEFAULT 0,
    acquired_at DATETIME(6)  NOT NULL,
    expires_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (name, lock_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`

const rawAcquire = `INSERT INTO bench_raw_locks (name, lock_key, owner, token, acquired_at, expires_at)
VALUES ('raw', ?, ?, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 10 SECOND)
ON DUPLICATE KEY UPDATE
    token = IF(expires_at <= UTC_TIMESTAMP(6), token + 1, token),
    owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
    acquired_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(acquired_at), acquired_at),
    expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)`

const rawRelease = `UPDATE bench_raw_locks SET owner = '', expires_at = UTC_TIMESTAMP(6)
WHERE name = 'raw' AND lock_key = ? AND owner = ?`

func main() {
	dur := flag.Duration("d", 2*time.Second, "measuring time per cell and round")
	rounds := flag.Int("rounds", 3, "measurements per cell, the operations taking turns; the table shows the median")
	cluster := flag.Bool("cluster", false, "LOCKGEN_DSN is a node of a Galera cluster or a Group Replication group, which refuse the session and row strategies: leave them out")
	flag.Parse()
	if err := run(context.Background(), demodb.FromEnv(), *dur, max(*rounds, 1), *cluster); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsns demodb.DSNs, dur time.Duration, rounds int, cluster bool) error {
	env, err := setup(ctx, dsns)
	if err != nil {
		return err
	}
	defer env.close()
	var ops []op
	for _, op := range env.ops() {
		if cluster && (op.name == opSession || op.name == opRow) {
			continue
		}
		ops = append(ops, op)
	}
	// Every cell is measured rounds times, the operations taking turns, so
	// that no operation always runs right after another's writes (the
	// server's purge and flushing of them); each cell shows the median.
	samples := map[string][2][]float64{}
	for r := 0; r < rounds; r++ {
		for _, op := range ops {
			cell := samples[op.name]
			for i, clients := range []int{1, 8} {
				rate, err := measure(ctx, op.fn, clients, dur)
				if err != nil {
					return fmt.Errorf("%s: %w", op.name, err)
				}
				cell[i] = append(cell[i], rate)
			}
			samples[op.name] = cell
		}
	}
	fmt.Printf("%-36s %12s %12s   (median of %d rounds of %v; range)\n", "operation (per second)", "1 client", "8 clients", rounds, dur)
	results := map[string][2]float64{}
	for _, op := range ops {
		cell := samples[op.name]
		row := [2]float64{median(cell[0]), median(cell[1])}
		results[op.name] = row
		fmt.Printf("%-36s %12.0f %12.0f   %.0f–%.0f / %.0f–%.0f\n", op.name, row[0], row[1],
			slices.Min(cell[0]), slices.Max(cell[0]), slices.Min(cell[1]), slices.Max(cell[1]))
	}
	raw, lg := results[opRaw], results[opLockgen]
	fmt.Printf("%-36s %12.2f %12.2f\n", "ratio lockgen/raw (target >= 0.95)", lg[0]/raw[0], lg[1]/raw[1])
	bounded := results[opRawBounded]
	fmt.Printf("%-36s %12.2f %12.2f\n", "ratio lockgen/raw bounded", lg[0]/bounded[0], lg[1]/bounded[1])
	if cluster {
		return nil
	}
	rawGet, ses := results[opRawGetLock], results[opSession]
	fmt.Printf("%-36s %12.2f %12.2f\n", "ratio session/raw GET_LOCK (>= 1.0)", ses[0]/rawGet[0], ses[1]/rawGet[1])
	return nil
}

// median is the middle of xs (the mean of the two middle ones when even).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

const (
	opSelect     = "SELECT 1"
	opRaw        = "raw upsert+release pair"
	opRawBounded = "raw pair, each statement bounded"
	opRawGetLock = "raw GET_LOCK+RELEASE_LOCK pair"
	opLockgen    = "lockgen TryBenchLock+Release pair"
	opSession    = "lockgen session Try+Release pair"
	opRow        = "lockgen row Try+Release pair"
	opSQLC       = "same SQL via sqlc, no runtime"
)

type env struct {
	db      *sql.DB
	locks   *locks.Locks
	queries *lockgendb.Queries
	setup   *demodb.Env
}

// close closes the pool and drops the user created for the run.
func (e *env) close() {
	_ = e.db.Close()
	_ = e.setup.Close()
}

type op struct {
	name string
	fn   func(ctx context.Context, client int) error
}

// setup creates the tables as dsns.Admin and opens the measured pool as
// the application's user.
func setup(ctx context.Context, dsns demodb.DSNs) (*env, error) {
	s, err := demodb.Setup(ctx, dsns, []string{"bench_locks", "bench_raw_locks"}, migration, sessionMigration, rawSchema)
	if err != nil {
		return nil, err
	}
	cfg := s.App.Clone()
	cfg.InterpolateParams = true // one round trip per statement
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	e := &env{db: db, queries: lockgendb.New(db), setup: s}
	if e.locks, err = locks.New(db, locks.WithOwner("bench")); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) ops() []op {
	return []op{
		{opSelect, e.select1},
		{opRaw, e.rawPair},
		{opRawBounded, e.rawBoundedPair},
		{opRawGetLock, e.rawGetLockPair},
		{opSQLC, e.sqlcPair},
		{opLockgen, e.lockgenPair},
		{opSession, e.sessionPair},
		{opRow, e.rowPair},
	}
}

func (e *env) select1(ctx context.Context, _ int) error {
	var one int
	return e.db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

func (e *env) rawPair(ctx context.Context, client int) error {
	name := "raw-" + strconv.Itoa(client)
	res, err := e.db.ExecContext(ctx, rawAcquire, name, "bench")
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("raw lock %s was not free", name)
	}
	_, err = e.db.ExecContext(ctx, rawRelease, name, "bench")
	return err
}

// rawBoundedPair is rawPair with each statement bounded by a timeout of
// its own, as lockgen bounds every statement of an acquisition and a
// release (by the lock's TTL, 10s here), so that a statement sent on a
// dead connection ends instead of holding its caller until the kernel's
// retransmission timeout. The driver watches a context that can end
// with a goroutine of each connection, woken twice per statement, which
// the unbounded pair's context.Background skips; the difference between
// the two rows is the bound's cost, the driver's watcher and the
// context's timer (docs/decisions.md, "What bounding a statement costs").
func (e *env) rawBoundedPair(ctx context.Context, client int) error {
	name := "raw-bounded-" + strconv.Itoa(client)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := e.db.ExecContext(actx, rawAcquire, name, "bench")
	cancel()
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("raw lock %s was not free", name)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = e.db.ExecContext(rctx, rawRelease, name, "bench")
	return err
}

// rawGetLockPair is what sanketplus/go-mysql-lock's ObtainContext and
// Release send: a connection pinned from the pool, GET_LOCK, RELEASE_LOCK,
// the connection back to the pool. No row, no fencing token.
func (e *env) rawGetLockPair(ctx context.Context, client int) error {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	name := "bench_raw_getlock-" + strconv.Itoa(client)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, 30).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return fmt.Errorf("raw GET_LOCK %s was not free", name)
	}
	var released sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", name).Scan(&released); err != nil {
		return err
	}
	if released.Int64 != 1 {
		return fmt.Errorf("raw RELEASE_LOCK %s: %v", name, released)
	}
	return nil
}

// sqlcPair runs lockgen's acquire and release statements through the
// generated sqlc queries directly: the SQL's cost without the runtime's.
func (e *env) sqlcPair(ctx context.Context, client int) error {
	key := "sqlc-" + strconv.Itoa(client)
	res, err := e.queries.LeaseAcquire(ctx, lockgendb.LeaseAcquireParams{Name: "bench", LockKey: key, Owner: "bench", TtlUs: 10_000_000})
	if err != nil {
		return err
	}
	token, err := res.LastInsertId()
	if err != nil || token == 0 {
		return fmt.Errorf("sqlc lock %s was not free (%v)", key, err)
	}
	_, err = e.queries.LeaseRelease(ctx, lockgendb.LeaseReleaseParams{Name: "bench", LockKey: key, Owner: "bench", Token: token})
	return err
}

func (e *env) lockgenPair(ctx context.Context, client int) error {
	lease, err := e.locks.TryBenchLock(ctx, "lockgen-"+strconv.Itoa(client))
	if err != nil {
		return err
	}
	return lease.Release(ctx)
}

// sessionPair is the session strategy's pair. From each client's third
// pair on (the first writes the row, the second arms the reservation, the
// third takes a reserved token and keeps its connection), it is two
// statements, prepared on a connection kept between tries: one SELECT
// that locks the row, takes GET_LOCK and draws a reserved token, and one
// RELEASE_LOCK (docs/strategies.md, "A try on a kept connection").
func (e *env) sessionPair(ctx context.Context, client int) error {
	lease, err := e.locks.TryBenchSessionLock(ctx, "session-"+strconv.Itoa(client))
	if err != nil {
		return err
	}
	return lease.Release(ctx)
}

// rowPair is the row strategy's pair: lock wait and autocommit set, isolation level,
// BEGIN, FOR UPDATE NOWAIT, the token bump and the lock wait restored, then
// freeing the row, COMMIT and autocommit restored (9 statements, not 2).
func (e *env) rowPair(ctx context.Context, client int) error {
	lease, err := e.locks.TryBenchRowLock(ctx, "row-"+strconv.Itoa(client))
	if err != nil {
		return err
	}
	return lease.Release(ctx)
}

// measure runs fn from clients goroutines for dur and returns calls/s.
func measure(ctx context.Context, fn func(context.Context, int) error, clients int, dur time.Duration) (float64, error) {
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	stop := start.Add(dur)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := fn(ctx, c); err != nil {
					errs <- err
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
